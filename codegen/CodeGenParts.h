#pragma once
// The outlined loops of a function that CodeGenLLVM emits as parts of their own, each alone in
// a module (CodeGenLLVM.h, separateParts), and what the emitter needs to know of the place
// where each sits.
#include "codegen/IR.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace einjit::codegen {

// Where an outlined loop that compiles apart sits: the local buffers and loop variables in
// scope there (its function's arguments are the ones it uses).
struct PartSite {
  const ir::For* loop = nullptr;
  std::map<std::string, ir::Type> locals;
  std::set<std::string> vars;
  // A register-tile loop (else an outlined loop): the part's body is the loop with the way to
  // it, so that the optimizer knows there what it knew in the whole function (the guards that
  // pick this tile variant, the enclosing loops' ranges and bindings of one iteration: a
  // border tile's lane masks fold to constants). Each enclosing loop of several iterations
  // becomes one iteration at a value passed in (`passed`, in order; its variable is bound to
  // atName(var)), under a guard of its range; each enclosing if keeps the branch taken.
  ir::Stmt body;
  std::vector<std::string> passed;
  // An edge tile's copy (findParts): a rolled loop in the function's only tile loop that reads
  // a buffer of that tile and writes the function's output.
  bool edge = false;
};

// The argument a tile part takes for an enclosing loop's variable.
std::string atName(const std::string& var);

// In the order the emitter reaches them: the outlined loops (ir::ForKind::Outlined) emitted
// exactly once (not inside an unrolled or vectorized loop, which may emit its body several
// times, and not a subtree shared by two places) that do enough work to pay for a module of
// their own; with `tiles` (explicit code), also the serial loops each around a register tile
// of its own (a local buffer allocated directly in the loop), where a function has two or
// more: a packed product's tile variants (its core tile and edge or border forms), whose code
// generation in one module was the compile's longest step. Not a tile loop inside another, nor
// inside an outlined loop. With `tiles` and a single tile loop (which stays in its caller's
// module), also the rolled loops in it that copy its edge tile out (they read a buffer allocated
// in the tile loop and write only the function's buffers): such a copy runs only on the edge
// tile, but its scalar loop nests cost a sixth of the micro-kernel module's compile time; apart,
// the runtime compiles them with the packing functions (runtime/Jit.cpp). EINJIT_JIT_EDGE_PARTS=0
// keeps them in the caller.
std::vector<PartSite> findParts(const ir::Stmt& body, bool tiles);

} // namespace einjit::codegen
