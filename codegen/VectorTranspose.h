#pragma once
// A square block of vectors transposed in registers: the packing of an operand whose lanes are
// far apart but whose reduction positions are contiguous (a weight gradient's channels, a GEMM's
// transposed B) reads one vector per lane along the positions and stores one vector per position
// across the lanes (lower/CpuGemmPacking.cpp, docs/CPU_SCHEDULES.md "Lanes far apart").
#include <llvm/IR/IRBuilder.h>

#include <vector>

namespace einjit::codegen {

// rows[i] is a vector of n elements, n = rows.size() a power of two: returns cols with
// cols[j][i] = rows[i][j]. Shuffles x86 runs as one instruction each: interleaves inside 128-bit
// lanes (unpcklps/unpckhps, unpcklpd/unpckhpd), then 128-bit blocks between vectors
// (vperm2f128, vshuff32x4): n log2 n shuffles, 24 for 8 floats and 64 for 16.
// `registerBits`: the widest vector register of the target (512 with AVX-512; 0: unknown), which
// the stages' values must fit for the empty inline-asm statements between them.
std::vector<llvm::Value*> transposeVectors(llvm::IRBuilderBase& b,
                                           const std::vector<llvm::Value*>& rows,
                                           unsigned registerBits = 0);

} // namespace einjit::codegen
