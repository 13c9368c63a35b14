#pragma once
// The GPU tile tables: programs and shapes that reach each CUDA tile family and layout path.
// test_cuda_compile.cpp compiles them through NVRTC, test_cuda.cpp runs them on a GPU against
// the interpreter; tools/dump-generated dumps their lowered IR and CUDA to show that a
// refactoring changes no generated code.
#include "einjit/einjit.h"

#include <map>
#include <string>
#include <vector>

namespace einjit::test {

using einjit::Shape;

// Convolutions whose input gradients have dependent reduction ranges, at odd sizes: stride 1
// (3x3), stride 2 (3x3), stride 3 (4x4), and stride 2 with split-K.
struct ConvCase {
  int stride;
  const char* program;
  Shape x, k;
};
inline const ConvCase kConvGrads[] = {
    {1, "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {2, 5, 21, 19}, {12, 5, 3, 3}},
    // 64 output channels: the reduction reordered to (a,b,o), a slice within one filter tap.
    {1, "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {2, 8, 20, 19}, {64, 8, 3, 3}},
    // bf16: dy and k copied with o fastest, both operands by masked 16-byte copies; 128 input
    // channels: the warpgroup tile on sm_90.
    {1, "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {2, 128, 9, 11}, {64, 128, 3, 3}},
    // 64 input channels: on sm_90 the warpgroups side by side (a tile of 64 rows).
    {1, "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {2, 56, 12, 13}, {64, 56, 3, 3}},
    // 20 output channels (not a multiple of 8): bf16 stages dy through registers.
    {2, "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {2, 12, 23, 21}, {20, 12, 3, 3}},
    {3, "y[n,o,h,w] := x[n,c,3h+a,3w+b] * k[o,c,a,b]", {2, 16, 25, 22}, {16, 16, 4, 4}},
    // Few outputs per phase, a long reduction: split-K inside each phase (ranges of at least
    // 512 of the reduction).
    {2, "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {1, 8, 9, 9}, {2048, 8, 3, 3}},
    // The same with phases of 256 output elements and more: their split-K combines have the
    // tiles' 256 threads, and must still follow the tiles' launches (never merged into one
    // grid, whose blocks run in no order).
    {2, "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {1, 16, 9, 9}, {2048, 16, 3, 3}},
};

// The four matmul layouts, batched, and two reduction indices, at sizes that are multiples of
// 8 but not of the tiles (partial tiles and a partial last slice): the tiles copy their
// operands 16 bytes at a time.
// With aligned rows, how many operands are copied by 16-byte vectors (f32, bf16): an f32 tile
// moves an operand contiguous along the reduction through registers (into the k-major layout)
// when the other one is not so too.
struct VectorTile {
  const char* program;
  std::map<std::string, Shape> shapes;
  int f32, bf16;
};
inline const std::vector<VectorTile> kVectorTiles = {
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {264, 200}}, {"B", {200, 136}}}, 1, 2},
    {"C[i,k] := A[j,i] * B[j,k]", {{"A", {200, 264}}, {"B", {200, 136}}}, 2, 2},
    {"C[i,k] := A[i,j] * B[k,j]", {{"A", {264, 200}}, {"B", {136, 200}}}, 2, 2},
    {"C[i,k] := A[j,i] * B[k,j]", {{"A", {200, 264}}, {"B", {136, 200}}}, 1, 2},
    {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {3, 72, 48}}, {"B", {3, 48, 80}}}, 1, 2},
    {"C[i,k] := A[i,j,l] * B[j,l,k]", {{"A", {136, 24, 8}}, {"B", {24, 8, 144}}}, 1, 2},
    // The weights are contiguous along the flattened (c,a,b): copied by vectors in bf16; in
    // f32 through registers (the input is staged through registers).
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
     {{"x", {2, 8, 13, 11}}, {"k", {16, 8, 3, 3}}},
     0,
     1},
};

// f32 tiles 6 or 7 cells wide per thread (96, 112) where that pads an extent 5% less than 128,
// in the three operand layouts (k-major, through registers into k-major, row-major), at edges
// (200 = 112 + 88); split-K in a count that is not a power of two (9 ranges of 35 slices
// for one 96 x 96 tile: the least-loaded-SM model, ranges of at least 32 slices); and operands
// contiguous along a long whole reduction copied 4 bytes at a time.
struct OddTile {
  const char* program;
  std::map<std::string, Shape> shapes;
  const char* note; // in the statement's schedule note
};
inline const std::vector<OddTile> kOddTiles = {
    {"C[i,k] := A[i,j] * B[j,k]",
     {{"A", {200, 40}}, {"B", {40, 576}}},
     "tile 112x96 over (i) x (k), 7x6"},
    {"C[i,k] := A[j,i] * B[k,j]",
     {{"A", {40, 200}}, {"B", {576, 40}}},
     "tile 112x96 over (i) x (k), 7x6"},
    {"C[i,k] := A[i,j] * B[k,j]",
     {{"A", {200, 40}}, {"B", {576, 40}}},
     "tile 112x96 over (i) x (k), 7x6"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{"A", {70, 5003}}, {"B", {5003, 90}}},
     "split-K: 9 ranges of 35 slices"},
    // A whole reduction of 26 slices (the last partial): operands contiguous along it are
    // copied 4 bytes at a time into the k-major layout, 4 slices in flight.
    {"C[i,k] := A[i,j] * B[k,j]",
     {{"A", {200, 404}}, {"B", {200, 404}}},
     "4 slices in flight; tile.L by 4-byte asynchronous copies, tile.R by 4-byte asynchronous "
     "copies"},
    {"C[i,k] := A[i,j] * B[j,k]",
     {{"A", {200, 404}}, {"B", {404, 136}}},
     "4 slices in flight; tile.L by 4-byte asynchronous copies, tile.R by 16-byte asynchronous "
     "copies"},
};

// bf16 contractions large enough for the warpgroup tile on sm_90 (both tile dimensions
// filled, two slices or more, copied asynchronously: rows whole 16-byte vectors): every
// operand layout, edges, a batch and split-K. Their gradients are contractions of the same
// sizes. `width`: the forward tile's columns, the widest of which there are tiles for every
// SM (132): 256 for 2 x 2 x 33 (and the gradient for B), 128 for 2 x 2 x 33 with 200 columns;
// else 64.
struct WarpgroupCase {
  const char* program;
  std::map<std::string, Shape> shapes;
  int width;
  int rows = 128; // the tile's: 64 with the two warpgroups side by side
};
inline const std::vector<WarpgroupCase> kWarpgroupTiles = {
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {300, 264}}, {"B", {264, 200}}}, 64},
    {"C[i,k] := A[j,i] * B[j,k]", {{"A", {264, 296}}, {"B", {264, 200}}}, 64},
    {"C[i,k] := A[i,j] * B[k,j]", {{"A", {300, 264}}, {"B", {200, 264}}}, 64},
    {"C[i,k] := A[j,i] * B[k,j]", {{"A", {264, 296}}, {"B", {200, 264}}}, 64},
    {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {2, 136, 200}}, {"B", {2, 200, 144}}}, 64},
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {128, 2048}}, {"B", {2048, 136}}}, 64}, // split-K
    {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {33, 129, 136}}, {"B", {33, 136, 264}}}, 256},
    {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {33, 129, 136}}, {"B", {33, 136, 200}}}, 128},
    // 48 to 64 rows: one warpgroup's worth, the two side by side over 128 columns.
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {64, 264}}, {"B", {264, 328}}}, 64, 64},
    {"C[i,k] := A[j,i] * B[k,j]", {{"A", {264, 56}}, {"B", {200, 264}}}, 64, 64},
};

} // namespace einjit::test
