// A square block of vectors transposed in registers (VectorTranspose.h).
#include "codegen/VectorTranspose.h"

#include "einjit/Error.h"

#include <llvm/IR/InlineAsm.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

namespace einjit::codegen {

std::vector<llvm::Value*> transposeVectors(llvm::IRBuilderBase& b,
                                           const std::vector<llvm::Value*>& rows,
                                           unsigned registerBits) {
  const std::size_t n = rows.size();
  if (n < 2 || (n & (n - 1)) != 0)
    throw InternalError("codegen: a transpose of " + std::to_string(n) + " vectors");
  auto* vt = llvm::cast<llvm::FixedVectorType>(rows[0]->getType());
  if (vt->getNumElements() != n)
    throw InternalError("codegen: a transpose of vectors not as long as they are many");
  // Elements per 128-bit lane (x86's in-lane shuffles), at most the vector.
  const std::size_t bits = vt->getElementType()->getPrimitiveSizeInBits().getFixedValue();
  const std::size_t e = std::min(n, std::max<std::size_t>(1, 128 / bits));
  // Each element's (row, column), so that the columns are found among the results whatever
  // order the stages leave them in.
  using Label = std::pair<std::size_t, std::size_t>;
  std::vector<llvm::Value*> v = rows;
  std::vector<std::vector<Label>> at(n, std::vector<Label>(n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) at[i][j] = {i, j};
  // One stage: vectors d apart paired, each pair's two results given by `pick` (the index of
  // each result element in the concatenation of the pair, as shufflevector takes it).
  auto stage = [&](std::size_t d, const std::vector<int>& lo, const std::vector<int>& hi) {
    for (std::size_t i = 0; i < n; ++i) {
      if (i & d) continue;
      llvm::Value *a = v[i], *c = v[i + d];
      std::vector<Label> la = at[i], lc = at[i + d];
      auto label = [&](int k) { return k < static_cast<int>(n) ? la[k] : lc[k - n]; };
      v[i] = b.CreateShuffleVector(a, c, lo);
      v[i + d] = b.CreateShuffleVector(a, c, hi);
      for (std::size_t j = 0; j < n; ++j) {
        at[i][j] = label(lo[j]);
        at[i + d][j] = label(hi[j]);
      }
    }
  };
  // Between two stages, each vector through an empty inline-asm statement (no instruction): the
  // x86 backend's shuffle combining otherwise searches every chain of the n log2 n shuffles for
  // a shorter one (there is none), about 10 ms of a 16 x 16 transpose's 22 ms of code generation.
  // Only where a vector fits a register (the "v" constraint): 64-byte vectors on an AVX2 CPU
  // (EINJIT_CPU_VECTOR_BYTES=64) are split by LLVM.
  const bool fits = registerBits > 0 && n * bits <= registerBits;
  auto opaque = [&]() {
    if (!fits) return;
    auto* fty = llvm::FunctionType::get(vt, {vt}, false);
    llvm::InlineAsm* id = llvm::InlineAsm::get(fty, "", "=v,0", /*hasSideEffects=*/false);
    for (llvm::Value*& x : v) x = b.CreateCall(fty, id, {x});
  };
  std::size_t d = 1;
  // Inside 128-bit lanes: the low (high) halves' units of u elements interleaved.
  for (std::size_t u = 1; u < e; u *= 2, d *= 2) {
    std::vector<int> lo, hi;
    for (int h = 0; h < 2; ++h) {
      std::vector<int>& out = h ? hi : lo;
      for (std::size_t lane = 0; lane < n; lane += e)
        for (std::size_t k = 0; k < e / 2; k += u)
          for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t q = 0; q < u; ++q)
              out.push_back(static_cast<int>(s * n + lane + (h ? e / 2 : 0) + k + q));
    }
    stage(d, lo, hi);
    if (d * 2 < n) opaque();
  }
  // Whole 128-bit blocks: the even blocks of the pair's first vector, then of its second; the
  // odd ones likewise.
  for (; d < n; d *= 2) {
    std::vector<int> lo, hi;
    for (int h = 0; h < 2; ++h) {
      std::vector<int>& out = h ? hi : lo;
      for (std::size_t s = 0; s < 2; ++s)
        for (std::size_t blk = static_cast<std::size_t>(h); blk < n / e; blk += 2)
          for (std::size_t q = 0; q < e; ++q) out.push_back(static_cast<int>(s * n + blk * e + q));
    }
    stage(d, lo, hi);
    if (d * 2 < n) opaque();
  }
  std::vector<llvm::Value*> cols(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = at[i][0].second;
    for (std::size_t j = 0; j < n; ++j)
      if (at[i][j] != Label{j, c})
        throw InternalError("codegen: a register transpose left a vector mixed");
    cols[c] = v[i];
  }
  return cols;
}

} // namespace einjit::codegen
