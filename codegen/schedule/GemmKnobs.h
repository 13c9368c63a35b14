#pragma once
// Experiment knobs of the packed GEMM plan (docs/CPU_SCHEDULES.md, "Experiment knobs"): each
// environment variable changes one plan decision in every plan of the process, so that one
// binary can be measured against itself under several plans on a machine that only a script
// reaches (the AVX-512 Xeon behind the device tool: tools/xeon-sweep.sh). Unset, a knob changes
// nothing. They are for measurement, not for users: a value the plan cannot run (an MR that
// spills, a KC that leaves no block) gives a slower plan or none (the generic loops), never a
// wrong result; test_gemm passes under each.
#include <cstdint>
#include <string>

namespace einjit::codegen {

struct GemmKnobs {
  int mr = 0;          // EINJIT_GEMM_MR: the micro-kernel's rows (0: the plan's)
  int nrVectors = 0;   // EINJIT_GEMM_NR_VECTORS: its columns in vectors, 1-3 (0: the plan's)
  std::int64_t kc = 0; // EINJIT_GEMM_KC: the KC block wanted (0: half of L1 per B sliver)
  int kSets = 0;       // EINJIT_GEMM_KSETS: accumulator sets along the reduction (0: the plan's)
  bool packB = false;  // EINJIT_GEMM_PACK_B=1: B packed, never read in place
  bool prefetchOut = true; // EINJIT_GEMM_PREFETCH_OUT=0: no prefetch of the tile's output lines
  bool prefetchNext = true; // EINJIT_GEMM_PREFETCH_NEXT=0: no fetch of the next task's rows of B
  int stage = -1;      // EINJIT_GEMM_STAGE: 0 never stage an unsplit plan's output, 1 the rule
  // EINJIT_GEMM_S2_IN_PLACE=0: a B whose lanes are two apart along N (a stride-2 window) is
  // packed, never read in place (otherwise in place with 64-byte vectors).
  bool strideTwoInPlace = true;
  // EINJIT_GEMM_S2_TILE=0: such an in-place plan keeps the rule's rows, never one more equal
  // tile where that pads M less.
  bool strideTwoTile = true;
  // EINJIT_GEMM_TRANSPOSE: 0 never transpose a packing of B in registers, 2-16 that many lanes
  // at a time (a power of two, at most the vector), -1 the plan's (CpuGemmPanels.cpp)
  int transpose = -1;
  // EINJIT_GEMM_PREFETCH_A=0|1: a lane-major A's next KC block prefetched while one is packed
  // (-1: where 512-bit operations run in halves, CpuGemmPacking.cpp)
  int prefetchA = -1;
  // The knobs set, for `einjit explain` ("" when none is).
  std::string note() const;
};

// The process's knobs, read from the environment once.
const GemmKnobs& gemmKnobs();

} // namespace einjit::codegen
