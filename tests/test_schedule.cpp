// The schedule table: {program, argument shapes (and layouts), target} -> the schedule chosen
// for each statement, as `einjit explain` prints it. Pins every CPU schedule decision without
// running anything; the JIT-vs-interpreter tables check that each schedule computes the right
// values.
#include "RowMajorBinding.h"

#include "codegen/Schedule.h"

#include <doctest/doctest.h>

#include <functional>
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
  bool splitWide = false; // Target::halvedVectors (AMD Zen 4)
};


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
    // A product of two reads and a constant: an element-wise summand on the packed path, its
    // power-of-two factor taken out of the sum.
    {"C[i,k] := A[i,j] * B[j,k] * 2",
     {{512, 512}, {512, 512}},
     DType::f32,
     64,
     13,
     2,
     "packed contraction (element-wise summand, scaled by 2): M i, N k, K j, batch -; "
     "micro-kernel 14x32, MC 140 KC 256 NC 256; A packed whole, B packed whole; 8 tasks in 8 "
     "parallel groups"},
    // The packed GEMM path (GemmPlan.h): a product of two reads of at least 10^6 flops with
    // an M and an N side of at least MR and NR. N is the output's unit-stride index; MR x NR
    // from the vector registers (AVX-512: 14 x 2 vectors, AVX2: 6 x 2); KC, MC, NC from the
    // default caches (32 KiB, 512 KiB, 8 MiB), each in equal blocks (MC and NC of a task's
    // chunk); operands up to 8 MB packed whole; with 2 threads 8 tasks (chunks of M or N), the
    // groups a multiple of the threads.
    // An element-wise summand of two operands (GemmOperands): the distance layer, and its
    // weight gradient, whose read of output indices only (w) keeps a tile beside the
    // accumulators and whose factor 2 is taken out of the sum. AVX2 has room for 5 x 8 only,
    // 5 FMA chains: two accumulator sets along the reduction make it 4 x 8 with 8 chains;
    // AVX-512's 6 x 32 has 12 chains and one set.
    {"y[i,j] := (w[k,i] - x[k,j]) ^ 2",
     {{784, 1024}, {784, 4096}},
     DType::f32,
     32,
     13,
     2,
     "packed contraction (element-wise summand): M i, N j, K k, batch -; micro-kernel 6x16, MC "
     "258 KC 196 NC 1024; A packed whole, B packed whole; 8 tasks in 8 parallel groups"},
    {"dw[k,i] := dy[i,j] * (2 * (w[k,i] - x[k,j]))",
     {{1024, 4096}, {784, 1024}, {784, 4096}},
     DType::f32,
     32,
     13,
     2,
     "packed contraction (element-wise summand, scaled by 2): M k, N i, K j, batch -; "
     "micro-kernel 4x8 (2 accumulator sets), MC 100 KC 512 NC 256; A packed whole, B packed "
     "whole; 8 tasks in 8 parallel groups"},
    {"dw[k,i] := dy[i,j] * (2 * (w[k,i] - x[k,j]))",
     {{1024, 4096}, {784, 1024}, {784, 4096}},
     DType::f32,
     64,
     13,
     2,
     "packed contraction (element-wise summand, scaled by 2): M k, N i, K j, batch -; "
     "micro-kernel 6x32, MC 198 KC 256 NC 256; A packed whole, B packed whole; 8 tasks in 8 "
     "parallel groups"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{512, 512}, {512, 512}},
     DType::f32,
     64,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 14x32, MC 140 KC 256 NC 256; "
     "A packed whole, B packed whole; 8 tasks in 8 parallel groups"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{1024, 1024}, {1024, 1024}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 6x16, MC 132 KC 256 NC 512; A "
     "packed whole, B packed whole; 8 tasks in 8 parallel groups"},
    {"C[i,k] := A[j,i] * B[k,j]",
     {{1000, 257}, {17, 1000}},
     DType::f64,
     32,
     13,
     1,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 6x8, MC 90 KC 250 NC 24; A "
     "packed per block, B packed per block; one thread"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{257, 300}, {300, 1000}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 6x16, MC 132 KC 150 NC 256; A "
     "packed whole, B packed whole; 8 tasks in 8 parallel groups",
     1},
    // Batch b, the output's fastest index: N is then the longer of i and k; the tasks batch
    // values fastest (each thread's run of tasks its own rows of C's lines); one KC block, so
    // the output is not staged.
    {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
     {{256, 256, 4}, {4, 300, 256}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch b; micro-kernel 6x16, MC 132 KC 256 NC 160; A "
     "packed whole, B packed per block; 8 tasks (batch values fastest) in 8 parallel groups"},
    // The same over two KC blocks: the output staged in a contiguous partial.
    {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
     {{256, 300, 4}, {4, 300, 300}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch b; micro-kernel 6x16, MC 258 KC 150 NC 160; A "
     "packed whole, B packed per block; 8 tasks (batch values fastest) in 8 parallel groups; "
     "output staged in a contiguous partial"},
    // A Linear layer's weight gradient.
    {"dw[o,i] := dt[n,o] * x[n,i]",
     {{4096, 1024}, {4096, 784}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M o, N i, K n, batch -; micro-kernel 6x16, MC 132 KC 256 NC 400; A "
     "packed whole, B packed whole; 8 tasks in 8 parallel groups"},
    // Convolutions (bench_cpu's shapes): the image and row loop around the GEMM; the input,
    // a window along N read with unit stride and proven inside, is read in place by the
    // micro-kernel (its packed form would be an im2col tensor: each element once per tap).
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
     {{8, 64, 56, 56}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 6x16, MC 66 KC 198 NC "
     "64; A packed whole, B read in place; 432 tasks in 8 parallel groups"},
    // The same with 64-byte vectors (NR 32) and dilation 2: still a window along N; 24 output
    // channels in two 12-row tiles (14 rows would compute 28).
    {"y[n,o,h,w] := x[n,c,h+2a,w+2b] * k[o,c,a,b]",
     {{2, 16, 40, 44}, {24, 16, 3, 3}},
     DType::f32,
     64,
     13,
     2,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 12x32, MC 24 KC 144 NC 64; A "
     "packed whole, B read in place; 72 tasks in 8 parallel groups"},
    // Padded (a zero outside the image: nothing to read there), or strided along N (lanes two
    // elements apart): B packed per block.
    {"y[n,o,h,w] := x[n,c,pad(h+a-1),pad(w+b-1)] * k[o,c,a,b] where h in 0:size(x,2), w in "
     "0:size(x,3)",
     {{8, 64, 56, 56}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 6x16, MC 66 KC 198 NC "
     "64; A packed whole, B packed per block; 448 tasks in 8 parallel groups"},
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
     {{8, 64, 56, 56}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 6x16, MC 66 KC 198 NC "
     "32; A packed whole, B packed per block; 216 tasks in 8 parallel groups"},
    // 64-byte vectors, 28 output columns: two 16-lane vectors would not fit w, so the plan
    // would take h and o as M and N (scattered tile stores); one vector and a tall tile keep
    // N on w, x's lanes two apart read in place, in 16-row tiles (64 channels in 64 rows, where
    // the rule's 22 rows compute 66 and 28-row tiles 84).
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
     {{8, 64, 57, 57}, {64, 64, 3, 3}},
     DType::f32,
     64,
     4,
     2,
     "packed GEMM: M o, N w, K c,a,b, batch n,h; micro-kernel 16x16, MC 64 KC 288 NC 32; A "
     "packed whole, B read in place; 224 tasks in 8 parallel groups"},
    // 64-byte vectors and both output indices shorter than two 16-lane vectors (as a stride-2
    // input gradient's residue phases of 28 x 28): one vector of columns and a tall tile plan
    // it, where two vectors would leave the register tiles (two equal tiles of 15 rows: 30 in
    // 30, where 21-row tiles computed 42 and the tallest, 28 rows, 56). Its
    // reduction is 2 KC blocks with 32 registers (a B sliver fills L1), too few to split across
    // two threads (GemmPlan::kParts: two blocks per part): 4 tasks over chunks of the output.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{30, 1000}, {1000, 20}},
     DType::f32,
     64,
     4,
     2,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 15x16, MC 15 KC 500 NC 16; A packed "
     "whole, B packed whole; 4 tasks in 4 parallel groups"},
    // The input gradient: dy read in place, the taps a (a range of the batch index u) over
    // their own loop's bounds, b (a range of N) by masked loads in the first and last slivers
    // (the middle two, 32 of 56 columns, read without masks).
    {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:size(dy,2)+2, v in "
     "0:size(dy,3)+2, a in max(u+1-size(dy,2),0):min(u+1,size(k,2)), b in "
     "max(v+1-size(dy,3),0):min(v+1,size(k,3))",
     {{8, 64, 54, 54}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N v, K o,a,b, batch n,u; micro-kernel 6x16, MC 66 KC 198 NC "
     "64; A packed whole, B read in place, ranges of a,b; 448 tasks in 8 parallel "
     "groups"},
    // 30 columns: the one whole sliver lacks tap b at v = 0, so every sliver would be masked:
    // dy is packed per block, the taps masked while packing.
    {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:size(dy,2)+2, v in "
     "0:size(dy,3)+2, a in max(u+1-size(dy,2),0):min(u+1,size(k,2)), b in "
     "max(v+1-size(dy,3),0):min(v+1,size(k,3))",
     {{8, 64, 28, 28}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N v, K o,a,b, batch n,u; micro-kernel 6x16, MC 66 KC 198 NC "
     "32; A packed whole, B packed per block, ranges of a,b; 240 tasks in 8 parallel "
     "groups"},
    // A range the hull's ends leave outside dy (u up to size(dy,2)+3, a from u-size(dy,2)):
    // B is read in place only where every term's subscripts are inside, so it is packed (the
    // packing checks each run, and an out-of-bounds term is reported).
    {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:size(dy,2)+2, v in "
     "0:size(dy,3)+2, a in max(u-size(dy,2),0):min(u+1,size(k,2)), b in "
     "max(v+1-size(dy,3),0):min(v+1,size(k,3))",
     {{8, 64, 54, 54}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N v, K o,a,b, batch n,u; micro-kernel 6x16, MC 66 KC 198 NC "
     "64; A packed whole, B packed per block, ranges of a,b; 448 tasks in 8 parallel "
     "groups"},
    // The weight gradient: the taps (a, b) are windows of x: they run inside each KC block
    // (x's block packed from cache for each tap, dy's packed block serving all nine). Its
    // output (147 KB) is small against the reduction (25088 terms): on two threads the
    // one-thread plan, the reduction split across them (GemmPlan::kParts), each part's sums in
    // its own partial output; tasks over chunks of the output each streamed all of dy.
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w]",
     {{8, 64, 54, 54}, {8, 64, 56, 56}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 6x16, MC 66 "
     "KC 216 NC 64; A packed per block, B packed whole; the reduction split in 2 parts (2 tasks "
     "in parallel, partial sums added in order)"},
    // The same with 64-byte vectors.
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w]",
     {{8, 64, 54, 54}, {8, 64, 56, 56}},
     DType::f32,
     64,
     4,
     2,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 13x32, MC 65 "
     "KC 216 NC 64; A packed per block, B packed whole; the reduction split in 2 parts (2 tasks "
     "in parallel, partial sums added in order)"},
    // A 1x1 weight gradient, 256 input channels to 64 output ones, 25088 terms: B, whose lanes
    // are copied one element at a time, is dy (64 channels), A is x, packed lane-major; the
    // output's unit-stride index (c) was N before, x transposed.
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w] where a in 0:1, b in 0:1",
     {{8, 64, 56, 56}, {8, 256, 56, 56}},
     DType::f32,
     64,
     4,
     2,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 13x32, MC 260 "
     "KC 224 NC 64; A packed per block, B packed per block; the reduction split in 2 parts (2 "
     "tasks in parallel, partial sums added in order)"},
    // Unequal chunks (5 slivers of M): 2 tasks per thread and a multiple of the threads, as
    // before, here 5 chunks of M x 2 groups of taps; the 10 tasks in 2 groups of 5, not 5
    // groups of 2 (3 groups on one thread, 2 on the other). (A reduction of 3 KC blocks: too
    // short to split.)
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w]",
     {{1, 16, 24, 24}, {1, 30, 26, 26}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks (2 groups); micro-kernel "
     "6x16, MC 6 KC 192 NC 16; A packed per block, B packed whole; 10 tasks in 2 parallel "
     "groups"},
    // Strided: x would fit packed whole (13 MB), packed per block all the same; one thread.
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w] where a in 0:3, b in 0:3",
     {{8, 64, 27, 27}, {8, 64, 56, 56}},
     DType::f32,
     32,
     13,
     1,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 6x16, MC 66 "
     "KC 243 NC 64; A packed per block, B packed whole; one thread; output staged in a "
     "contiguous partial"},
    // The README demo's weight gradient (18 KB of output, 1024 terms): the reduction split;
    // 16 channels in 4-row tiles (6-row ones compute 18).
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w] where a in 0:3, b in 0:3",
     {{4, 32, 16, 16}, {4, 16, 33, 33}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M c, N o, K n,h,w, batch a,b inside the KC blocks; micro-kernel 4x16, MC 16 "
     "KC 256 NC 32; A packed per block, B packed whole; the reduction split in 2 parts (2 tasks "
     "in parallel, partial sums added in order)"},
    // Too few chunks of M and N for the threads (one sliver each), which left the taps
    // outside, one per task (9 tasks in 5 groups): the reduction split instead.
    {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w]",
     {{8, 6, 30, 30}, {8, 16, 32, 32}},
     DType::f32,
     32,
     13,
     2,
     "packed GEMM: M o, N c, K n,h,w, batch a,b inside the KC blocks; micro-kernel 6x16, MC 6 "
     "KC 240 NC 16; A packed whole, B packed per block; the reduction split in 2 parts (2 tasks "
     "in parallel, partial sums added in order)"},
    // The strided input gradient's taps fill half their hull or less: no packed plan for the
    // statement as it is (the lowering then splits it into residue phases, each packed).
    {"dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:55, v in 0:55, h in "
     "max(0,cdiv(u-size(k,2)+1,2)):min(fdiv(55-size(k,2),2)+1,fdiv(u,2)+1), w in "
     "max(0,cdiv(v-size(k,3)+1,2)):min(fdiv(55-size(k,3),2)+1,fdiv(v,2)+1)",
     {{8, 64, 27, 27}, {64, 64, 3, 3}},
     DType::f32,
     32,
     13,
     2,
     "generic: output indices in left-hand order, reductions inside; parallel over n"},
    // M below MR, or under 10^6 flops: the register tiles.
    {"C[i,k] := A[i,j] * B[j,k]",
     {{3, 1000}, {1000, 1000}},
     DType::f32,
     32,
     13,
     2,
     "register tile 3x16 over i x k; parallel over k"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{60, 60}, {60, 60}},
     DType::f32,
     32,
     13,
     2,
     "register tile 8x16 over i x k; parallel over k"},
    // A row's max or min (softmax, the position of a row's maximum): vectors of partial
    // extremes along the contiguous reduction index, not gathers down the column.
    {"(max) m[i] := x[i,j]",
     {{4096, 1024}},
     DType::f32,
     32,
     13,
     2,
     "dot-product tile 4x1 over i x -, vectors along j; parallel over i"},
    {"(max) m[i] := x[i,j]\n(min) p[i] := x[i,j] == m[i] ? j : 1e300",
     {{4096, 1024}},
     DType::f64,
     64,
     13,
     2,
     "dot-product tile 4x1 over i x -, vectors along j; parallel over i"},
    // A single row of outputs summed down long columns (layernorm's gain and bias
    // gradients): a wide tile per thread, accumulators in L1, long runs of each row per step.
    {"db[j] := dy[i,j]",
     {{4096, 1024}},
     DType::f32,
     32,
     13,
     2,
     "register tile 1x512 over - x j; parallel over j"},
    {"dg[j] := dy[i,j] * x[i,j]",
     {{4096, 4096}, {4096, 4096}},
     DType::f64,
     64,
     13,
     2,
     "register tile 1x512 over - x j; parallel over j"},
    // ... but a short reduction keeps two vectors of accumulators in registers.
    {"y[j] := A[k,j] * x[k]",
     {{100, 1000}, {100}},
     DType::f32,
     32,
     13,
     2,
     "register tile 1x16 over - x j; parallel over j"},
    // The distance layer's input gradient: x[k,j] does not move with the reduction index i
    // (a tile beside the accumulators), the factor -2 taken out of the sum.
    {"dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j]))",
     {{1024, 4096}, {784, 1024}, {784, 4096}},
     DType::f32,
     32,
     13,
     2,
     "packed contraction (element-wise summand, scaled by -2): M k, N j, K i, batch -; "
     "micro-kernel 4x8 (2 accumulator sets), MC 112 KC 512 NC 512; A packed whole, B packed per "
     "block; 8 tasks in 8 parallel groups"},
    // The same on a smaller shape (below the packed path's size): the register tile, x[k,j]
    // loaded once per tile, so k can be the tile's rows and dy's vectors serve 8 of them.
    {"dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j]))",
     {{40, 64}, {30, 40}, {30, 64}},
     DType::f32,
     32,
     13,
     2,
     "register tile 8x16 over k x j; parallel over j"},
    // Where 512-bit operations run as two halves (Zen 4), the distance layer and both its
    // gradients take one vector of columns, A's read the subtraction's subtrahend (its
    // broadcast folded into it: GemmSummand.h); dx's summand `dy * (x - w)` carries the sign,
    // its scale 2. The same shapes on a full-width AVX-512 target: the rows above.
    {"y[i,j] := (w[k,i] - x[k,j]) ^ 2",
     {{784, 1024}, {784, 4096}},
     DType::f32,
     64,
     13,
     2,
     "packed contraction (element-wise summand): M i, N j, K k, batch -; micro-kernel 14x16, MC "
     "140 KC 392 NC 1024; A packed whole, B packed whole; 8 tasks in 8 parallel groups",
     -1,
     true},
    {"dw[k,i] := dy[i,j] * (2 * (w[k,i] - x[k,j]))",
     {{1024, 4096}, {784, 1024}, {784, 4096}},
     DType::f32,
     64,
     13,
     2,
     "packed contraction (element-wise summand, scaled by 2): M k, N i, K j, batch -; "
     "micro-kernel 13x16, MC 104 KC 512 NC 256; A packed whole, B packed whole; 8 tasks in 8 "
     "parallel groups",
     -1,
     true},
    {"dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j]))",
     {{1024, 4096}, {784, 1024}, {784, 4096}},
     DType::f32,
     64,
     13,
     2,
     "packed contraction (element-wise summand, scaled by 2): M k, N j, K i, batch -; "
     "micro-kernel 13x16, MC 117 KC 512 NC 512; A packed whole, B packed per block; 8 tasks in "
     "8 parallel groups",
     -1,
     true},
    // A product keeps two vectors there (its broadcast is as cheap as the FMA's operand).
    {"C[i,k] := A[i,j] * B[j,k]",
     {{1024, 1024}, {1024, 1024}},
     DType::f32,
     64,
     13,
     2,
     "packed GEMM: M i, N k, K j, batch -; micro-kernel 14x32, MC 140 KC 256 NC 512; A packed "
     "whole, B packed whole; 8 tasks in 8 parallel groups",
     -1,
     true},
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
    einjit::test::RowMajorBinding r = einjit::test::bindRowMajor(row.program, row.shapes, row.dtype);
    const dsl::Program& p = r.program;
    const dsl::BoundProgram& b = r.bound;
    Strides& strides = r.strides;
    REQUIRE(p.arguments.size() == row.shapes.size());
    if (row.transposed >= 0) {
      const auto id =
          static_cast<std::size_t>(p.arguments[static_cast<std::size_t>(row.transposed)]);
      strides[id] = {1, b.tensors[id].shape[0]};
    }
    Target t;
    t.vectorBytes = row.vectorBytes;
    t.gatherCost = row.gatherCost;
    t.threads = row.threads;
    t.halvedVectors = row.splitWide;
    const StatementSchedule s = scheduleStatement(p, b, p.stmts.size() - 1, strides, t);
    CHECK(s.why == row.expected);
    CHECK(s.gemm.has_value() == (std::string(row.expected).rfind("packed ", 0) == 0));
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

// Where 512-bit operations are split, the distance layer's summands are planned with A's read
// as the subtrahend (schedule/GemmSummand.h): the forward's `(w - x)^2` as `(x - w)^2`, the
// input gradient's `dy * (w - x)` (scale -2) as `dy * (x - w)` (scale 2); the weight gradient's
// A read (x) is the subtrahend already. Elsewhere the summand is the one written.
TEST_CASE("packed plan: the broadcast read as the subtraction's subtrahend where 512-bit operations are split") {
  struct Row {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes;
    const char* minuend; // the tensor the planned subtraction reads first, split / not split
    const char* notSplit;
    double scale, notSplitScale;
  };
  const Row table[] = {
      {"y[i,j] := (w[k,i] - x[k,j]) ^ 2", {{784, 1024}, {784, 4096}}, "x", "w", 1, 1},
      {"dw[k,i] := dy[i,j] * (2 * (w[k,i] - x[k,j]))",
       {{1024, 4096}, {784, 1024}, {784, 4096}},
       "w",
       "w",
       2,
       2},
      {"dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j]))",
       {{1024, 4096}, {784, 1024}, {784, 4096}},
       "x",
       "w",
       2,
       -2},
  };
  // The first subtraction in the summand (depth first).
  const std::function<const dsl::CExpr*(const dsl::CExpr&)> sub = [&](const dsl::CExpr& e) -> const dsl::CExpr* {
    if (e.kind == dsl::CKind::Binary && e.binop == dsl::BinOp::Sub) return &e;
    for (const dsl::CExprPtr& a : e.args)
      if (const dsl::CExpr* d = sub(*a)) return d;
    return nullptr;
  };
  for (const Row& row : table)
    for (bool split : {true, false}) {
      CAPTURE(row.program);
      CAPTURE(split);
      einjit::test::RowMajorBinding r = einjit::test::bindRowMajor(row.program, row.shapes, DType::f32);
      Target t;
      t.vectorBytes = 64;
      t.threads = 2;
      t.halvedVectors = split;
      const StatementSchedule s = scheduleStatement(r.program, r.bound, 0, r.strides, t);
      REQUIRE(s.gemm.has_value());
      CHECK(s.gemm->nr == (split ? 16 : 32));
      const dsl::CExpr* d = sub(*s.gemm->summand);
      REQUIRE(d != nullptr);
      REQUIRE(d->args[0]->kind == dsl::CKind::Read);
      CHECK(r.program.tensors[static_cast<std::size_t>(d->args[0]->tensor)].name == (split ? row.minuend : row.notSplit));
      CHECK(s.gemm->scale == (split ? row.scale : row.notSplitScale));
    }
}
