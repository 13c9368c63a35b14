#pragma once
// Symbolic integer expressions for index ranges: linear combinations of tensor extents
// size(x,d) and integer scalar parameters, with max, min and floor/ceil division by positive
// constants. Range inference builds them without shapes; Binding evaluates them once the
// shapes and scalars of a call are known. Smart constructors keep a canonical form (linear
// parts merged, constants folded, duplicate max/min arguments removed), so two equal
// expressions print the same.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace einjit::dsl {

struct SymNode;
using Sym = std::shared_ptr<const SymNode>;

enum class SymKind : unsigned char { Lin, Size, Param, Max, Min, FDiv, CDiv };

struct SymNode {
  SymKind kind;
  // Lin: constant + sum(coef * term), terms are non-Lin nodes, sorted by their printed form.
  std::int64_t constant = 0;
  std::vector<std::pair<Sym, std::int64_t>> terms;
  // Size: tensor, dim. Param: tensor holds the parameter name.
  std::string tensor;
  int dim = 0;
  // Max/Min: args (>= 2). FDiv/CDiv: args[0] / divisor.
  std::vector<Sym> args;
  std::int64_t divisor = 1;
  std::string key; // canonical printed form
};

Sym symConst(std::int64_t c);
Sym symSize(const std::string& tensor, int dim);
Sym symParam(const std::string& name);
Sym symAdd(const Sym& a, const Sym& b);
Sym symSub(const Sym& a, const Sym& b);
Sym symScale(const Sym& a, std::int64_t c);
Sym symAddConst(const Sym& a, std::int64_t c);
Sym symMax(std::vector<Sym> args);
Sym symMin(std::vector<Sym> args);
Sym symFloorDiv(const Sym& a, std::int64_t d); // d > 0
Sym symCeilDiv(const Sym& a, std::int64_t d);  // d > 0

bool symIsConst(const Sym& s, std::int64_t* value = nullptr);
// In einjit syntax: "size(x,0) - size(w,0) + 1", "max(0, N - 3)", "fdiv(size(x,0) - 1, 2)".
const std::string& symPrint(const Sym& s);
// Replace size(t,d) atoms (used to express extents of earlier outputs through inputs).
Sym symSubstitute(const Sym& s, const std::function<Sym(const SymNode&)>& atom);

struct SymEnv {
  std::function<std::int64_t(const std::string& tensor, int dim)> size;
  std::function<std::int64_t(const std::string& param)> param;
};
std::int64_t symEval(const Sym& s, const SymEnv& env);

// Thrown when a range computation leaves 64-bit integers; the front end turns it into an
// einjit::Error pointing at the statement.
struct SymOverflow : std::overflow_error {
  SymOverflow() : std::overflow_error("integer overflow in an index computation") {}
};
inline std::int64_t checkedAdd(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw SymOverflow();
  return r;
}
inline std::int64_t checkedMul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw SymOverflow();
  return r;
}

// Integer floor/ceil division for any signs (b != 0).
std::int64_t floorDiv(std::int64_t a, std::int64_t b);
std::int64_t ceilDiv(std::int64_t a, std::int64_t b);

} // namespace einjit::dsl
