// The CPU statement plan's family, without lowering (part of test_schedule):
// codegen::planCpuStatement decides the whole plan (schedule/CpuStatementPlan.h) from the
// statement's facts before anything is emitted. Per row: a program, its argument shapes, the
// statement asked about, its family and the plan's note (describe), and what the family's own
// plan holds (the packed plan's epilogue, the residue phases, the core's box, the row run); then
// lowering the same call must carry out that plan: its note for the statement is the plan's.
#include "RowMajorBinding.h"

#include "codegen/Lower.h"
#include "codegen/schedule/CpuStatementPlan.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using einjit::DType;
using namespace einjit::codegen;
namespace dsl = einjit::dsl;

namespace {

using Family = CpuStatementPlan::Family;

struct PlanRow {
  const char* program;
  std::vector<std::vector<std::int64_t>> shapes; // per argument, in order of first appearance
  DType dtype;
  std::size_t stmt; // the statement asked about
  Family family;
  const char* note; // describe(plan)
  // Per family: Gemm, the epilogue's last statement; Phases, their count; CoreBorder, the core's
  // range of the first output index; Rows, the run's first statement.
  std::int64_t detail = 0;
  std::int64_t detailHi = 0;
};

const char* kStrided = "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:56, v in 0:56, "
                       "h in max(0, cdiv(u-2, 2)):min(27, fdiv(u, 2)+1), w in max(0, "
                       "cdiv(v-2, 2)):min(27, fdiv(v, 2)+1)";

const PlanRow kRows[] = {
    // The packed contraction, a matrix product large enough for it.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{512, 512}, {512, 512}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 14x32, MC 140 KC 256 NC 256; A packed "
     "whole, B packed whole; 8 tasks in 8 parallel groups",
     0},
    // ... with the element-wise statement after it in its tile stores (an epilogue).
    {"t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]",
     {{784, 1024}, {784, 4096}, {1024}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M i, N j, K k, batch -; micro-kernel 14x32, MC 266 KC 196 NC 1024; A packed "
     "whole, B packed whole; 8 tasks in 8 parallel groups; epilogue: statement 2 in its tile "
     "stores",
     1},
    // A stride-2 input gradient: four residue phases, each a packed contraction.
    {kStrided,
     {{8, 64, 27, 27}, {64, 64, 3, 3}},
     DType::f32,
     0,
     Family::Phases,
     "4 residue phases, each a packed GEMM: M c, N v, K o,h,w, batch n,u; micro-kernel 22x16, MC "
     "66 KC 64 NC 32; A packed whole, B packed per block, ranges of h,w; 224 tasks in 8 parallel "
     "groups",
     4},
    // ... with 16 input channels: M shorter than the tallest tile is one 16-row tile (as the
    // README demo's input gradient), where no tile at all left it to the generic loops.
    {kStrided,
     {{8, 64, 27, 27}, {64, 16, 3, 3}},
     DType::f32,
     0,
     Family::Phases,
     "4 residue phases, each a packed GEMM: M c, N v, K o,h,w, batch n,u; micro-kernel 16x16, MC "
     "16 KC 64 NC 32; A packed whole, B packed per block, ranges of h,w; 224 tasks in 8 parallel "
     "groups",
     4},
    // The README demo's forward: 32 output channels, past the tallest one-vector tile (28
    // rows), are two equal tiles of 16 rows (21 rows computed 42); x's lanes two apart read in
    // place (64-byte vectors).
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
     {{4, 16, 33, 33}, {32, 16, 3, 3}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 16x16, MC 32 KC 144 NC 16; A packed "
     "whole, B read in place; 64 tasks in 8 parallel groups",
     0},
    // ... and its weight gradient: 16 input channels, past the tallest two-vector tile (14
    // rows), two equal tiles of 8 rows (11 rows computed 22).
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w] where a in 0:3, b in 0:3, h in 0:16, w in 0:16",
     {{4, 32, 16, 16}, {4, 16, 33, 33}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 8x32, MC 16 KC "
     "256 NC 32; A packed per block, B packed whole; the reduction split in 2 parts (2 tasks in "
     "parallel, partial sums added in order)",
     0},
    // A weight gradient on two threads: the reduction split across them (GemmPlan::kParts),
    // each summing half of it into its own partial output (tasks over chunks of the output
    // each streamed the whole reduction).
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w] where a in 0:3, b in 0:3, h in 0:54, w in 0:54",
     {{8, 64, 54, 54}, {8, 64, 56, 56}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 13x32, MC 65 KC "
     "216 NC 64; A packed per block, B packed whole; the reduction split in 2 parts (2 tasks in "
     "parallel, partial sums added in order)",
     0},
    // A 1x1 convolution: its pixels merged into one index (GemmBinding.h: every access reads
    // h and w as one run), one GEMM per image over N h*w; M 256 rows: its one-tap window x
    // packed. The bias after it in the tile stores (it reads no merged index).
    {"t[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]\ny[n,o,h,w] := t[n,o,h,w] + bias[o]",
     {{8, 64, 56, 56}, {256, 64, 1, 1}, {256}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M o, N h*w, K c,a,b, batch n; micro-kernel 13x32, MC 260 KC 64 NC 800; A "
     "packed whole, B packed per block; 8 tasks in 8 parallel groups; epilogue: statement 2 in "
     "its tile stores",
     1},
    // ... an epilogue that reads h and w apart (a transposed residual): no epilogue, the
    // product still merged.
    {"t[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]\ny[n,o,h,w] := t[n,o,h,w] + r[n,o,w,h]",
     {{8, 64, 56, 56}, {256, 64, 1, 1}, {8, 256, 56, 56}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M o, N h*w, K c,a,b, batch n; micro-kernel 13x32, MC 260 KC 64 NC 800; A "
     "packed whole, B packed per block; 8 tasks in 8 parallel groups",
     0},
    // Its input gradient, M 64 rows: dy packed on this full-width target (read in place where
    // 512-bit operations run in halves, and with 32-byte vectors; the taps' ranges, their whole
    // hulls, bound nothing).
    {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in 0:56, a in max(u - 55, "
     "0):min(u + 1, 1), b in max(v - 55, 0):min(v + 1, 1)",
     {{8, 256, 56, 56}, {256, 64, 1, 1}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M c, N u*v, K o,a,b, batch n; micro-kernel 13x32, MC 65 KC 256 NC 256; A "
     "packed whole, B packed per block; 8 tasks in 8 parallel groups",
     0},
    // A 3x3 window: x's rows are W + 2 apart, nothing merged.
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
     {{8, 64, 56, 56}, {64, 64, 3, 3}},
     DType::f32,
     0,
     Family::Gemm,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 13x32, MC 65 KC 198 NC 64; A "
     "packed whole, B read in place; 432 tasks in 8 parallel groups",
     0},
    // A stride-1 input gradient's band: a core where every range is its hull, tiled.
    {"dx[u] := dy[u - k] * w[k] where u in 0:100, k in max(u - 97, 0):min(u + 1, 3)",
     {{98}, {3}},
     DType::f64,
     0,
     Family::CoreBorder,
     "core/border split; core: register tile 1x16 over - x u",
     2,
     98},
    // A row statement after another: row blocks.
    {"(max) m[i] := x[i, j]\ne[i, j] := exp(x[i, j] - m[i])",
     {{64, 1000}},
     DType::f32,
     1,
     Family::Rows,
     "row blocks of statements 1-2 (8 rows of i, 8 task groups)",
     0},
    // The (max) gradient's one-hot sum.
    {"dx[i, j] += j == f[i] ? dm[i] : 0",
     {{64, 100}, {64}, {64}},
     DType::f32,
     0,
     Family::OneHot,
     "generic: output indices in left-hand order, reductions inside; one-hot along j: evaluated "
     "only "
     "where j equals the value it is compared with"},
    // Few outputs, a long reduction: split.
    {"s := x[i] * y[i]",
     {{1 << 20}, {1 << 20}},
     DType::f32,
     0,
     Family::Split,
     "split reduction: 64 chunks of 16384 iterations of (i), in parallel, partials combined in "
     "chunk order"},
    // Element-wise statements over one iteration space, in place (which ends a row run): one
    // loop.
    {"m[i] = m[i] * 0.9 + g[i]\nv[i] = v[i] * 0.99 + g[i] * g[i]",
     {{1000}, {1000}, {1000}},
     DType::f32,
     0,
     Family::Fused,
     "generic: output indices in left-hand order, reductions inside; fused with statement 2 "
     "(element-wise, one loop: each element's statements in order)"},
    {"m[i] = m[i] * 0.9 + g[i]\nv[i] = v[i] * 0.99 + g[i] * g[i]",
     {{1000}, {1000}, {1000}},
     DType::f32,
     1,
     Family::Fused,
     "fused into statement 1's loop"},
    // A small product: the loop nest of its register tile.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{64, 64}, {64, 64}},
     DType::f32,
     0,
     Family::Loops,
     "register tile 8x32 over i x k; parallel over k"},
    // Nothing to cover.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{0, 4}, {4, 4}},
     DType::f32,
     0,
     Family::Empty,
     "no element is covered"},
};

Target cpuTarget() { // as tests/GeneratedDump.h's first CPU target
  Target t;
  t.vectorBytes = 64;
  t.threads = 2;
  t.gatherCost = 13;
  return t;
}

} // namespace

TEST_CASE("CPU statement plan: each family, without lowering, as lowering carries it out") {
  for (const PlanRow& row : kRows) {
    CAPTURE(row.program);
    const einjit::test::RowMajorBinding r =
        einjit::test::bindRowMajor(row.program, row.shapes, row.dtype);
    const dsl::Program& p = r.program;
    const dsl::BoundProgram& b = r.bound;
    const Strides& strides = r.strides;
    REQUIRE(p.arguments.size() == row.shapes.size());
    const Target t = cpuTarget();
    const CpuStatementPlan plan = planCpuStatement(p, b, strides, t, row.stmt);
    const std::string note = describe(plan);
    CAPTURE(note);
    CHECK(plan.family == row.family);
    CHECK(note == row.note);
    switch (row.family) {
    case Family::Gemm:
      REQUIRE(plan.sched.gemm);
      CHECK(plan.last() == static_cast<std::size_t>(row.detail));
      break;
    case Family::Phases:
      CHECK(plan.phases.size() == static_cast<std::size_t>(row.detail));
      for (const CpuGemmPhase& ph : plan.phases) // u's slot holds q: half of u's 56 values
        CHECK(ph.bs.hi[2] - ph.bs.lo[2] == 28);
      break;
    case Family::CoreBorder:
      REQUIRE(plan.core);
      CHECK(plan.core->core[0] == std::pair<std::int64_t, std::int64_t>{row.detail, row.detailHi});
      CHECK(plan.core->schedule.tileJ >= 0);
      CHECK(plan.core->border.tileJ < 0);
      break;
    case Family::Rows: CHECK(plan.rowRun >= 0); break;
    case Family::OneHot: REQUIRE(plan.sched.oneHot); break;
    case Family::Split: CHECK(plan.sched.splitChunks > 1); break;
    default: break;
    }
    // Lowering carries this plan out: the statement's note is the plan's (the residue phases'
    // code merged into one copy, where it did; the group's and the run's notes after it; a
    // statement in a row run: its own schedule's note in the block, then the run's).
    const LoweredProgram lowered = lower(p, b, strides, t);
    const std::string loweredNote = lowered.notes.at(row.stmt);
    CAPTURE(loweredNote);
    if (row.family == Family::Rows)
      CHECK(loweredNote.substr(loweredNote.size() - note.size()) == note);
    else
      CHECK(loweredNote.rfind(note, 0) == 0);
  }
}

// Where 512-bit operations run as two 256-bit halves (AMD Zen 4: Target::halvedVectors), a
// last sliver of N that holds at most 8 of 16 lanes runs on 256-bit vectors, so the one-vector
// tile pads 54 or 56 columns to 56 where the two-vector one pads them to 64: taken where it
// computes fewer padded cells, in 16-row tiles where 22 would pad 64 channels to 66 (a
// product's one-vector tile takes the tallest of at least 16 rows that divides M). Other shapes
// keep the plan of the AVX-512 target without it.
TEST_CASE("CPU statement plan: 512-bit operations in halves pad N to half vectors") {
  struct Row {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes;
    const char* halved; // the note with Target::halvedVectors
    const char* whole;  // without (the Xeon's)
  };
  const Row rows[] = {
      // The 3x3 stride-1 forward: 54 columns.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{8, 64, 56, 56}, {64, 64, 3, 3}},
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 16x16 (the last 8 columns in half "
       "vectors), MC 64 KC 288 NC 64; A packed whole, B read in place; 432 tasks in 8 parallel "
       "groups",
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 13x32, MC 65 KC 198 NC 64; A "
       "packed whole, B read in place; 432 tasks in 8 parallel groups"},
      // Its input gradient: 56 columns; the taps' ranges mask its first sliver: dy packed in
      // the Xeon's 13 x 32 tiles, read in place in 16-row tiles (they divide M).
      {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in 0:56, a in max(u - 53, "
       "0):min(u + 1, 3), b in max(v - 53, 0):min(v + 1, 3)",
       {{8, 64, 54, 54}, {64, 64, 3, 3}},
       "packed GEMM: M c, N v, K o,a,b, batch n,u; micro-kernel 16x16 (the last 8 columns in half "
       "vectors), MC 64 KC 288 NC 64; A packed whole, B read in place, ranges of a,b; 448 tasks "
       "in 8 parallel groups",
       "packed GEMM: M c, N v, K o,a,b, batch n,u; micro-kernel 13x32, MC 65 KC 198 NC 64; A "
       "packed whole, B packed per block, ranges of a,b; 448 tasks in 8 parallel groups"},
      // The stride-2 forward: 27 columns, 11 in the last sliver (more than half a vector); x's
      // lanes two apart read in place (two loads and a permute a vector, the last sliver
      // masked), in one more equal tile of the 64 channels (4 x 16 rows, not 3 x 22), in
      // halves and at full width alike.
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{8, 64, 56, 56}, {64, 64, 3, 3}},
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 16x16, MC 64 KC 288 NC 32; A "
       "packed whole, B read in place; 216 tasks in 8 parallel groups",
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 16x16, MC 64 KC 288 NC 32; A "
       "packed whole, B read in place; 216 tasks in 8 parallel groups"},
      // 20 columns (16 + 4: in halves a half-width tail, whose half vectors would be read lane
      // by lane, so x stays packed there; at full width read in place) and 29 channels (two
      // equal tiles of 15 rows already pad least).
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{2, 29, 19, 41}, {29, 29, 3, 3}},
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 15x16 (the last 8 columns in "
       "half vectors), MC 30 KC 261 NC 32; A packed whole, B packed per block; 18 tasks in 6 "
       "parallel groups",
       "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 15x16, MC 30 KC 261 NC 32; A "
       "packed whole, B read in place; 18 tasks in 6 parallel groups"},
      // A matrix product and a 1x1 input gradient (its taps' ranges mask nothing): whole
      // slivers; the latter's dy read in place in halves, packed at full width.
      {"C[i,k] := A[i,j] * B[j,k]",
       {{512, 512}, {512, 512}},
       "packed GEMM: M i, N k, K j, batch -; micro-kernel 14x32, MC 140 KC 256 NC 256; A packed "
       "whole, B packed whole; 8 tasks in 8 parallel groups",
       "packed GEMM: M i, N k, K j, batch -; micro-kernel 14x32, MC 140 KC 256 NC 256; A packed "
       "whole, B packed whole; 8 tasks in 8 parallel groups"},
      {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in 0:56, a in max(u - 55, "
       "0):min(u + 1, 1), b in max(v - 55, 0):min(v + 1, 1)",
       {{8, 256, 56, 56}, {256, 64, 1, 1}},
       "packed GEMM: M c, N u*v, K o,a,b, batch n; micro-kernel 13x32, MC 65 KC 256 NC 256; A "
       "packed whole, B read in place; 8 tasks in 8 parallel groups",
       "packed GEMM: M c, N u*v, K o,a,b, batch n; micro-kernel 13x32, MC 65 KC 256 NC 256; A "
       "packed whole, B packed per block; 8 tasks in 8 parallel groups"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.program);
    const einjit::test::RowMajorBinding r =
        einjit::test::bindRowMajor(row.program, row.shapes, DType::f32);
    for (bool halved : {true, false}) {
      CAPTURE(halved);
      Target t = cpuTarget();
      t.halvedVectors = halved;
      const CpuStatementPlan plan = planCpuStatement(r.program, r.bound, r.strides, t, 0);
      const std::string note = describe(plan);
      CAPTURE(note);
      CHECK(note == (halved ? row.halved : row.whole));
      // Lowering carries it out.
      const LoweredProgram lowered = lower(r.program, r.bound, r.strides, t);
      CHECK(lowered.notes.at(0).rfind(note, 0) == 0);
    }
  }
}

// A residue phase reads dy in place only where no lane is masked (CpuPhases): the README demo's
// input gradient (x 33 x 33) has phases of 17 and 16 columns; the odd columns' phases (one tap
// along w, 16 columns: a whole sliver, every column's tap inside) read dy in place, the even
// columns' (a tap missing at the first column, a 17th column) pack it. Every phase of the
// benchmark's 56 columns (28 = 16 + 12: a masked last sliver) packs it.
TEST_CASE("CPU statement plan: residue phases read dy in place where no lane is masked") {
  struct Case {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes;
    std::size_t inPlace;
  };
  const Case cases[] = {
      {"dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:33, v in 0:33, h in max(0, "
       "cdiv(u-2, 2)):min(16, fdiv(u, 2)+1), w in max(0, cdiv(v-2, 2)):min(16, fdiv(v, 2)+1)",
       {{4, 32, 16, 16}, {32, 16, 3, 3}},
       2},
      {kStrided, {{8, 64, 27, 27}, {64, 64, 3, 3}}, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.program);
    const einjit::test::RowMajorBinding r =
        einjit::test::bindRowMajor(c.program, c.shapes, DType::f32);
    const CpuStatementPlan plan = planCpuStatement(r.program, r.bound, r.strides, cpuTarget(), 0);
    REQUIRE(plan.family == Family::Phases);
    REQUIRE(plan.phases.size() == 4);
    std::size_t inPlace = 0;
    for (const CpuGemmPhase& ph : plan.phases) {
      const std::int64_t cols = ph.bs.hi[3] - ph.bs.lo[3]; // v's slot holds the phase's column
      CAPTURE(cols);
      CHECK(ph.gemm.bInPlace == (cols % ph.gemm.nr == 0 && c.inPlace > 0));
      inPlace += ph.gemm.bInPlace ? 1 : 0;
    }
    CHECK(inPlace == c.inPlace);
  }
}

// Where 512-bit operations run in halves (Zen 4), a residue phase's one-vector tile whose rows
// do not divide M takes the tallest of at least 16 rows that does: 64 channels in 16-row tiles
// (22 rows computed 66); elsewhere, and where the tile divides M, the rule's tile.
TEST_CASE("CPU statement plan: Zen 4's residue phases take tiles whose rows divide M") {
  const einjit::test::RowMajorBinding r =
      einjit::test::bindRowMajor(kStrided, {{8, 64, 27, 27}, {64, 64, 3, 3}}, DType::f32);
  for (const bool halved : {false, true}) {
    Target t = cpuTarget();
    t.halvedVectors = halved;
    const CpuStatementPlan plan = planCpuStatement(r.program, r.bound, r.strides, t, 0);
    REQUIRE(plan.family == Family::Phases);
    for (const CpuGemmPhase& ph : plan.phases) {
      CHECK(ph.gemm.nr == 16);
      CHECK(ph.gemm.mr == (halved ? 16 : 22));
    }
  }
  const einjit::test::RowMajorBinding few =
      einjit::test::bindRowMajor(kStrided, {{8, 64, 27, 27}, {64, 16, 3, 3}}, DType::f32);
  Target t = cpuTarget();
  t.halvedVectors = true;
  for (const CpuGemmPhase& ph : planCpuStatement(few.program, few.bound, few.strides, t, 0).phases)
    CHECK(ph.gemm.mr == 16);
}

// Where 512-bit operations run at full width (the Xeon) and B carries dependent reduction
// ranges (the stride-1 input gradient's taps, zeros packed outside them), a reduction at most
// half again the L1 block runs in one KC block: 576 terms at the Xeon's 48 KiB L1, where the
// block is 288 (384 terms of 32 lanes, in whole channels of 9 taps). The forward (B read in
// place, no ranges), a longer reduction (128 channels, 1152 terms), AVX2 and Zen 4 keep their
// blocks.
TEST_CASE("CPU statement plan: full-width AVX-512 takes a tapped reduction in one KC block") {
  const char* dx = "dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in 0:56, a in "
                   "max(u - 53, 0):min(u + 1, 3), b in max(v - 53, 0):min(v + 1, 3)";
  struct Row {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes;
    int vectorBytes;
    bool halved;
    const char* kc; // the KC of the plan's note
  };
  const Row rows[] = {
      {dx, {{8, 64, 54, 54}, {64, 64, 3, 3}}, 64, false, "KC 576 "},
      {dx, {{8, 128, 54, 54}, {128, 64, 3, 3}}, 64, false, "KC 288 "},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{8, 64, 56, 56}, {64, 64, 3, 3}}, 64, false,
       "KC 288 "},
      {dx, {{8, 64, 54, 54}, {64, 64, 3, 3}}, 32, false, "KC 288 "},
      {dx, {{8, 64, 54, 54}, {64, 64, 3, 3}}, 64, true, "KC 576 "},
  };
  for (const Row& row : rows) {
    CAPTURE(row.program);
    CAPTURE(row.vectorBytes);
    CAPTURE(row.halved);
    const einjit::test::RowMajorBinding r =
        einjit::test::bindRowMajor(row.program, row.shapes, DType::f32);
    Target t = cpuTarget();
    t.vectorBytes = row.vectorBytes;
    t.halvedVectors = row.halved;
    t.l1Bytes = 48 << 10;
    t.l2Bytes = 2 << 20;
    const CpuStatementPlan plan = planCpuStatement(r.program, r.bound, r.strides, t, 0);
    const std::string note = describe(plan);
    CAPTURE(note);
    CHECK(note.find(row.kc) != std::string::npos);
    // Lowering carries it out.
    const LoweredProgram lowered = lower(r.program, r.bound, r.strides, t);
    CHECK(lowered.notes.at(0).rfind(note, 0) == 0);
  }
}

// Where 512-bit operations run in halves (Zen 4), a kernel that reads B in place through a
// window along the task's batch index fetches the next task's line of B into L2 in each step
// (GemmPlan::prefetchNext, lower/CpuGemmKernel): the 3x3 stride-1 input gradient
// (dy[n,o,u-a,v-b], tasks of (n, u)) and the stride-2 forward (x[n,c,2h+a,2w+b]), at the next
// row (clamped inside its range). Not the stride-1 forward (its next row follows the rows it
// read, taps ascending: the hardware's stream), not on the Xeon (not measured there), not
// where B is packed, not without a window along the batch index (a 1x1 input gradient: its
// taps are single values, a GEMM per image).
TEST_CASE("CPU lowering: Zen 4's in-place windows fetch the next task's rows of B") {
  const char* const dx = "dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in "
                         "0:56, a in max(u - 53, 0):min(u + 1, 3), b in max(v - 53, 0):min(v + "
                         "1, 3)";
  struct Row {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes;
    const char* fetch; // the fetch of the next task's row where 512-bit operations run in halves
  };
  const Row rows[] = {
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{8, 64, 56, 56}, {64, 64, 3, 3}}, nullptr},
      {dx, {{8, 64, 54, 54}, {64, 64, 3, 3}},
       "prefetch.ahead dy[((((((gemm.task / 1) / 56) * 186624) + (o * 2916)) + ((min((fmod(("
       "gemm.task / 1), 56) + 1), 55) + (-1 * a)) * 54)) + ((gemm.t * 16) + (-1 * b)))]"},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {{8, 64, 56, 56}, {64, 64, 3, 3}},
       "prefetch.ahead x[((((((gemm.task / 1) / 27) * 200704) + (c * 3136)) + (((2 * min((fmod(("
       "gemm.task / 1), 27) + 1), 26)) + a) * 56)) + ((2 * (gemm.t * 16)) + b))]"},
      {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:56, v in 0:56, a in max(u - 55, "
       "0):min(u + 1, 1), b in max(v - 55, 0):min(v + 1, 1)",
       {{8, 256, 56, 56}, {256, 64, 1, 1}}, nullptr},
  };
  for (const Row& row : rows) {
    CAPTURE(row.program);
    const einjit::test::RowMajorBinding r =
        einjit::test::bindRowMajor(row.program, row.shapes, DType::f32);
    for (const bool halved : {true, false}) {
      CAPTURE(halved);
      Target t = cpuTarget();
      t.halvedVectors = halved;
      const LoweredProgram lowered = lower(r.program, r.bound, r.strides, t);
      std::string text;
      for (const ir::Func& f : lowered.funcs) text += ir::print(f);
      CAPTURE(lowered.notes.at(0));
      if (halved && row.fetch) {
        const std::size_t at = text.find(row.fetch);
        CHECK(at != std::string::npos);
        // One in each kernel that reads B in place (whole slivers, masked, half width).
        CHECK(text.find("prefetch.ahead", at + 1) != std::string::npos);
      } else {
        CHECK(text.find("prefetch.ahead") == std::string::npos);
      }
    }
  }
}
