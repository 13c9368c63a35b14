#include "runtime/CpuBackend.h"

#include "einjit/Tensor.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <cstring>
#include <functional>
#include <memory>

#if EINJIT_HAVE_TBB
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#endif

namespace einjit::runtime {

using namespace einjit::dsl;

std::shared_ptr<const PreparedCpu> prepareCpu(const Program& p, const BoundProgram& b,
                                              codegen::Strides strides, bool keepIR) {
  auto prep = std::make_shared<PreparedCpu>();
  const codegen::Target target = hostTarget();
  prep->lowered = codegen::lower(p, b, strides, target);
  if (prep->lowered.lateChecks()) {
    bool writesArgument = false;
    for (int id : p.arguments) {
      if (p.tensors[static_cast<std::size_t>(id)].writtenBy.empty()) continue;
      writesArgument = true;
      strides[static_cast<std::size_t>(id)] =
          contiguousStrides(b.tensors[static_cast<std::size_t>(id)].shape);
    }
    if (writesArgument) {
      prep->scratch = true;
      prep->lowered = codegen::lower(p, b, strides, target);
    }
  }
  prep->code = jitCompile(prep->lowered.funcs, keepIR);
  return prep;
}

int executeCpu(const PreparedCpu& prep, const std::vector<void*>& buffers,
               const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes) {
  std::int32_t status = 0;
  // Scratch buffers (split reductions' partials, packed GEMM operands) are per call, after
  // the tensors, 64-byte aligned (a packed sliver starts on a cache line).
  std::vector<void*> all = buffers;
  struct AlignedDelete {
    void operator()(void* q) const { ::operator delete(q, std::align_val_t{64}); }
  };
  std::vector<std::unique_ptr<void, AlignedDelete>> scratch;
  for (const codegen::ScratchBuffer& s : prep.lowered.scratch) {
    scratch.emplace_back(::operator new(std::max<std::size_t>(s.bytes(), 64), std::align_val_t{64}));
    all.push_back(scratch.back().get());
  }
  void** bufs = all.data();
  const double* prm = params.data();
  auto run = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      const codegen::ir::Func& f = prep.lowered.funcs[i];
      KernelFn fn = prep.code->fns[i];
#if EINJIT_HAVE_TBB
      if (f.parallel) {
        // Each output element (or split reduction chunk) is computed by exactly one task, so
        // results do not depend on the partition.
        tbb::parallel_for(tbb::blocked_range<std::int64_t>(f.parallelLo, f.parallelHi,
                                                           static_cast<std::size_t>(f.grain)),
                          [&](const tbb::blocked_range<std::int64_t>& r) {
                            fn(bufs, prm, r.begin(), r.end(), &status);
                          });
        continue;
      }
#endif
      fn(bufs, prm, f.parallelLo, f.parallel ? f.parallelHi : f.parallelLo, &status);
    }
    return std::atomic_ref<std::int32_t>(status).load();
  };
  // The hoisted checks first (Lower.h): nothing is written when they fail.
  const std::size_t checks = prep.lowered.checks;
  if (run(0, checks) != 0) return 1;
  for (std::size_t t = 0; t < zeroBytes.size(); ++t)
    if (zeroBytes[t] > 0) std::memset(buffers[t], 0, static_cast<std::size_t>(zeroBytes[t]));
  return run(checks, prep.lowered.funcs.size());
}

} // namespace einjit::runtime
