// The schedule table: {program, argument shapes (and layouts), target} -> the schedule chosen
// for each statement, as `einjit explain` prints it. Pins every CPU schedule decision without
// running anything; the JIT-vs-interpreter tables check that each schedule computes the right
// values.
#include "codegen/Schedule.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using einjit::DType;
using namespace einjit::codegen;
namespace dsl = einjit::dsl;

namespace {

struct ScheduleRow {
  const char* program;
  std::vector<std::vector<std::int64_t>> shapes; // per argument, in order of first appearance
  DType dtype;
  int vectorBytes;
  double gatherCost;
  int threads;
  const char* expected; // the schedule line of the last statement
  // Argument whose two dimensions are stored transposed (column-major), or -1.
  int transposed = -1;
};

std::vector<std::int64_t> rowMajor(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

const ScheduleRow kRows[] = {
    // Every form with a unit-stride output index read contiguously: the register tile.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{64, 64}, {64, 64}},
     DType::f32,
     64,
     13,
     1,
     "register tile 8x32 over i x k"},
    {"C[i,k] := A[j,i] * B[j,k]",
     {{64, 64}, {64, 64}},
     DType::f32,
     32,
     13,
     1,
     "register tile 8x16 over i x k"},
    // Both operands contiguous only along the sum (a Linear layer's weight gradient): a
    // register tile over k would gather B; the dot-product tile loads contiguously.
    {"C[i,k] := A[i,j] * B[k,j]",
     {{64, 64}, {64, 64}},
     DType::f32,
     64,
     13,
     1,
     "dot-product tile 4x4 over i x k, vectors along j"},
    {"C[i,k] := A[i,j] * B[k,j]",
     {{64, 64}, {64, 64}},
     DType::f32,
     64,
     1,
     1,
     "dot-product tile 4x4 over i x k, vectors along j"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{64, 64}, {64, 64}},
     DType::f64,
     32,
     13,
     1,
     "dot-product tile 4x4 over i x k, vectors along j",
     /*transposed=*/1},
    // A strided convolution's output column with a reduction too short for a dot tile: the
    // strided register tile (its reads gather).
    {"y[i] := x[2i+k] * w[k]",
     {{200}, {3}},
     DType::f32,
     64,
     13,
     1,
     "register tile 1x32 over - x i"},
    // No index is long enough for a vector: generic loops.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{3, 4}, {4, 5}},
     DType::f64,
     64,
     13,
     1,
     "generic: output indices in left-hand order, reductions inside"},
    // Big work on two threads: parallel over the first tile loop.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{512, 512}, {512, 512}},
     DType::f32,
     64,
     13,
     2,
     "register tile 8x32 over i x k; parallel over k"},
    // Few outputs and a long reduction: split.
    {"s := x[i] * y[i]",
     {{1 << 20}, {1 << 20}},
     DType::f32,
     64,
     13,
     2,
     "split reduction: 64 chunks of 16384 iterations of (i), in parallel, partials combined in "
     "chunk order"},
};

} // namespace

TEST_CASE("schedule table: each statement's schedule for its shapes, layouts and target") {
  for (const ScheduleRow& row : kRows) {
    CAPTURE(row.program);
    CAPTURE(row.vectorBytes);
    CAPTURE(row.gatherCost);
    const dsl::Program p = dsl::check(row.program);
    REQUIRE(p.arguments.size() == row.shapes.size());
    std::vector<dsl::ArgSpec> args;
    for (const auto& s : row.shapes) args.push_back({row.dtype, s});
    const dsl::BoundProgram b = dsl::bind(p, args, {}, row.dtype);
    Strides strides(p.tensors.size());
    for (std::size_t t = 0; t < p.tensors.size(); ++t) strides[t] = rowMajor(b.tensors[t].shape);
    if (row.transposed >= 0) {
      const auto id =
          static_cast<std::size_t>(p.arguments[static_cast<std::size_t>(row.transposed)]);
      strides[id] = {1, b.tensors[id].shape[0]};
    }
    Target t;
    t.vectorBytes = row.vectorBytes;
    t.gatherCost = row.gatherCost;
    t.threads = row.threads;
    const StatementSchedule s = scheduleStatement(p, b, p.stmts.size() - 1, strides, t);
    CHECK(s.why == row.expected);
  }
}

TEST_CASE("dependent bounds: which way each moves as an output index grows") {
  // dx of y[i] := x[2i+k] * w[k]: i runs from max(0, cdiv(u - size(w) + 1, 2)) to
  // min(fdiv(size(x) - size(w), 2) + 1, fdiv(u, 2) + 1): both rise with u; a bound that both
  // rises and falls with u is neither.
  const dsl::Program p = dsl::check(
      "dx[u] := dy[i] * w[u - 2i] where u in 0:size(x, 0), "
      "i in max(0, cdiv(u - size(w, 0) + 1, 2)):min(fdiv(size(x, 0) - size(w, 0), 2) + 1, "
      "fdiv(u, 2) + 1)\n"
      "z[u] := dy[i] where u in 0:size(x, 0), i in max(u - 5, 2 - u):7");
  std::vector<dsl::ArgSpec> args;
  for (int id : p.arguments)
    args.push_back({DType::f32, p.tensors[static_cast<std::size_t>(id)].name == "x"
                                    ? std::vector<std::int64_t>{20}
                                : p.tensors[static_cast<std::size_t>(id)].name == "w"
                                    ? std::vector<std::int64_t>{3}
                                    : std::vector<std::int64_t>{9}});
  const dsl::BoundProgram b = dsl::bind(p, args, {});
  const dsl::BoundStatement& dx = b.stmts[0];
  CHECK(dx.dependent[1]);
  CHECK(dx.loBound[1].direction(0) == 1);
  CHECK(dx.hiBound[1].direction(0) == 1);
  CHECK(dx.loBound[1].direction(1) == 0);
  const dsl::BoundStatement& z = b.stmts[1];
  CHECK(z.loBound[1].direction(0) == 2);
  CHECK(z.hiBound[1].direction(0) == 0);
}
