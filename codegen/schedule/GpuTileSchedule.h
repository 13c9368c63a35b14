#pragma once
// The decisions of a GPU contraction tile, as functions of the statement's extents and the
// Target: when a tile is worth it, its family and shape, its cells per thread, split-K, the
// pipeline depth, the layout copies around it. The tile planners (schedule/GpuSimtPlan.h,
// GpuTensorCorePlan.h, GpuStagingPlan.h) ask these before the tile is emitted and return
// schedule/GpuTile.h's value; the reasons, with the measurements behind them, are in
// docs/GPU_SCHEDULES.md and bench/RESULTS.md.
#include "codegen/Schedule.h"
#include "codegen/Target.h"
#include "codegen/schedule/GpuTile.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <optional>

namespace einjit::codegen::gpuschedule {

// The reduction's slice length (BK) of the f32 tile and of the tensor-core tiles.
inline constexpr std::int64_t kSimtSlice = 16, kMmaSlice = 64;
// The widest tile along J: the warpgroup tile's 256 columns, the mma.sync tile's 64 x 256.
inline constexpr std::int64_t kWideTile = 256;
// The shortest reduction range of a split tile: 512 (32 f32 slices, 8 tensor-core ones).
// Shorter ranges spend their time filling the pipeline and writing partials.
inline constexpr std::int64_t kSplitReduction = 512;
// The fewest slices of an f32 tile's reduction for which row-major operands are copied
// 4 bytes at a time into the k-major layout.
inline constexpr std::int64_t kLongReduction = 16;
// Multiply-adds below which a statement (or the whole of its residue phases) gets no tile.
inline constexpr double kMinTileWork = 65536;

// Whether a '+' contraction of these extents (I x J tiles over a reduction K) is worth a tile:
// a reduction of 8 at least and, unless it is a residue phase (weighed as a whole by
// planPhases), kMinTileWork multiply-adds.
bool worthTile(std::int64_t extI, std::int64_t extJ, std::int64_t extK, bool phase);

// The f32 tile's cells per thread along a side of `ext` (16 threads along each side): 8 (128
// wide), fewer for short extents (powers of two), or 7 or 6 (112, 96 wide) where that pads the
// extent 5% less.
std::int64_t simtCells(std::int64_t ext);

// Whether the f32 tile copies its row-major operands 4 bytes at a time into the k-major layout
// (every operand asynchronous): over a whole (unsplit) reduction of kLongReduction slices or more.
bool simtWordCopies(std::int64_t splits, std::int64_t slices);

// The tensor-core family and its warps' layout. Wgmma on sm_90 where both operands are copied
// asynchronously, both tile dimensions filled (I of 128 rows, or 48-64 for the side-by-side
// shape) and the reduction at least two slices; else mma.sync, 8 warps 2 x 4 (128 x 128) or
// 1 x 8 (64 x 256) when I fills no more than 64 rows.
struct TensorCoreShape {
  GpuTileKind kind = GpuTileKind::MmaSync;
  bool sideBySide = false; // Wgmma: I of one warpgroup's rows, the two side by side
  std::int64_t WM = 2, WN = 4;
};
TensorCoreShape tensorCoreShape(const Target& t, bool bothCopied, std::int64_t extI,
                                std::int64_t extJ, std::int64_t extK);

// The warpgroup tile's width along J, the slices it keeps in shared memory and the groups of
// products it leaves running while the next slice is issued: 256 wide with 4 slices and one
// group in flight where there are enough such tiles for every SM, else 128 with 3, else 64 with 4;
// side by side (TensorCoreShape::sideBySide), 64 with 4: each warpgroup's own 64 columns.
struct WarpgroupShape {
  std::int64_t BN = 128;
  int stages = 3, inFlight = 0;
};
WarpgroupShape warpgroupShape(const Target& t, bool sideBySide, std::int64_t tilesI,
                              std::int64_t extJ, std::int64_t extB);

// The blocks split-K aims at for a tensor-core tile: Target::gpuBlocksWanted(); for the
// warpgroup tile (one or two blocks fill an SM) a quarter of that, unless there are fewer tiles
// than that quarter.
std::int64_t tensorCoreBlocksWanted(const Target& t, GpuTileKind kind, std::int64_t tiles);

// Split-K: the reduction's `slices` cut into `splits` contiguous ranges of `perSplit` slices
// (each at least kSplitReduction of the reduction and 8 slices).
// - Tensor-core tiles (cellFlops 0): the count doubles while there are fewer blocks than
//   `wanted`.
// - f32 tiles (cellFlops: the flops of one slice of one tile): the count that least loads the
//   busiest SM: ceil(tiles * s / SMs) * ceil(slices / s) slices at Target::gpuSmFlops
//   (Target::gpuLoneBlock times that when an SM holds one block), plus the partials' traffic,
//   (2s + 1) times the output's `outputBytes`, at Target::gpuBandwidth.
struct SplitK {
  std::int64_t splits = 1, perSplit = 0;
};
SplitK splitK(const Target& t, std::int64_t tiles, std::int64_t slices, std::int64_t BK,
              double outputBytes, std::int64_t wanted, double cellFlops);

// The transposing copy of a tensor into another layout (relayoutCopy): a block moves a tile of
// TS elements along the source's fastest dimension (up to a warp's 32: coalesced reads) by TD
// along the destination's (at least 32, up to kRelayoutTile elements in all: coalesced writes),
// through shared memory.
inline constexpr std::int64_t kRelayoutTile = 1024;
struct RelayoutTile {
  std::int64_t TS = 0, TD = 0;
};
RelayoutTile relayoutTile(std::int64_t extS, std::int64_t extD);

// The dimension with the smallest nonzero stride among those of two elements or more (-1:
// none).
int fastestDim(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides);

// The layout copies a GPU tile of statement `st` runs over (docs/GPU_SCHEDULES.md, "Layout
// copies"), or nothing; the tile itself is decided afterwards, over the copies' layouts, and
// the copies are emitted only if it applies.
// - Batch-fast tensors: a tile computes one value of the batch indices (output indices that
//   every factor uses, of two values or more) per block, so a tensor whose unit stride lies on
//   one (C[i,k,b] := A[i,j,b] * B[b,k,j]: A and C) gives a block one useful element per 32-byte
//   sector and L2 moves it once per batch value. A factor or output whose fastest dimension is
//   on a batch-only subscript, with another dimension on a non-batch one and no broadcast
//   dimension (its copy would be larger than the tensor), is copied with the batch dimensions
//   outermost (the others in their stride order); the output is computed in its copy and copied
//   back, its copy filled from it first unless ':=' covers it (`outputCovered`: the left-hand
//   side writes every element of the output).
// - Channel-fast inputs (bf16 only, when no tensor is batch-fast): a convolution's input read
//   through a window (x[n,c,h+a,w+b]) is contiguous along 3 elements of its reduction (c,a,b)
//   in NCHW, so it is staged through registers 2 bytes at a time; with the channel fastest
//   (NHWC) and the reduction run as (a,b,c), a slice is whole 16-byte vectors along c. A
//   reduction index c qualifies when no output index has a dependent range, c's is not
//   dependent, its extent is at least 16 and a multiple of 8, both factors are plain reads
//   using c alone in one subscript, and a factor with a window subscript (two indices of two
//   values or more) reads fewer than 8 elements contiguously along the reduction (a forward
//   convolution: 3; a stride-2 weight gradient, whose c is the image index n: 1; a stride-1
//   weight gradient reads 12-54 along (h,w) and keeps its layout). Factors whose c dimension is
//   not already their fastest are copied with it fastest (the others in their order) and the
//   tile runs c last (kLast). Other reduction indices may have dependent ranges (an input
//   gradient's filter taps, masked in the tile).
std::optional<GpuRelayoutPlan> relayoutPlan(const dsl::Program& p, const dsl::BoundProgram& b,
                                            const dsl::Statement& st, const dsl::BoundStatement& bs,
                                            const Strides& strides, bool outputCovered);

// Slices a tile keeps in shared memory: 2 when an operand is staged through registers (one
// slice ahead); with every operand copied asynchronously, as many of `stageBytes` as
// Target::gpuPipelineShared holds, from 2 to 4.
int pipelineStages(const Target& t, bool allAsync, std::int64_t stageBytes);

} // namespace einjit::codegen::gpuschedule
