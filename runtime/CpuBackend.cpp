// The CPU backend: preparation (lower, JIT-compile), execution with oneTBB, and the Backend
// that runs calls on host tensors through it.
#include "runtime/CpuBackend.h"

#include "runtime/Backend.h"
#include "runtime/Caches.h"
#include "runtime/CpuTaskTimes.h"
#include "runtime/JitTiming.h"

#include "einjit/Tensor.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <new>

#if EINJIT_HAVE_TBB
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#endif

namespace einjit::runtime {

using namespace einjit::dsl;

namespace {
std::atomic<int> planThreads{0};
} // namespace

void setCpuPlanThreads(int threads) { planThreads.store(threads); }

std::shared_ptr<const PreparedCpu> prepareCpu(const Program& p, const BoundProgram& b,
                                              codegen::Strides strides, bool keepIR,
                                              bool keepIntermediates) {
  Timeline::Compile timeline("a kernel's preparation");
  Timeline::Span lowering("schedule and lower");
  auto prep = std::make_shared<PreparedCpu>();
  codegen::Target target = hostTarget();
  if (const int n = planThreads.load(); n > 0) target.threads = n;
  target.rowScratch = !keepIntermediates;
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
  std::vector<std::size_t> bufferBytes;
  for (const ArgSpec& t : b.tensors) {
    std::size_t n = dtypeSize(t.dtype);
    for (std::int64_t e : t.shape) n *= static_cast<std::size_t>(e);
    bufferBytes.push_back(n);
  }
  for (const codegen::ScratchBuffer& s : prep->lowered.scratch) bufferBytes.push_back(s.bytes());
  prep->stages = planCpuStages(prep->lowered, bufferBytes);
  lowering.end();
  prep->code = jitCompile(prep->lowered.funcs, keepIR);
  return prep;
}

namespace {

// A 64-byte aligned block of scratch memory, grown on demand; `busy` while a call uses it.
// Blocks above kKeptBytes are freed after the call instead of being kept.
struct ScratchBlock {
  static constexpr std::size_t kKeptBytes = std::size_t{256} << 20;
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  bool busy = false;
  ScratchBlock() = default;
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  ~ScratchBlock() { free(); }
  void free() {
    if (data) ::operator delete (data, std::align_val_t{64});
    data = nullptr;
    bytes = 0;
  }
  void reserve(std::size_t n) {
    busy = true;
    if (n <= bytes) return;
    free();
    data = static_cast<std::byte*>(::operator new (n, std::align_val_t{64}));
    bytes = n;
  }
  void release() {
    busy = false;
    if (bytes > kKeptBytes) free();
  }
};

ScratchBlock& threadScratch() {
  thread_local ScratchBlock block;
  return block;
}

// One function run as executeCpu runs it, its time per thread printed (CpuTaskTimes.h).
void timedRun(const codegen::ir::Func& f, KernelFn fn, void** bufs, const double* prm,
              std::int32_t* status) {
  CpuTaskTimes times(f.name);
  const auto t0 = std::chrono::steady_clock::now();
  auto one = [&](std::int64_t lo, std::int64_t hi) {
    const double c0 = CpuTaskTimes::threadCpu();
    fn(bufs, prm, lo, hi, status);
    times.add(lo, hi, CpuTaskTimes::threadCpu() - c0);
  };
#if EINJIT_HAVE_TBB
  if (f.parallel)
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(f.parallelLo, f.parallelHi,
                                                       static_cast<std::size_t>(f.grain)),
                      [&](const tbb::blocked_range<std::int64_t>& r) { one(r.begin(), r.end()); });
  else
#endif
    one(f.parallelLo, f.parallel ? f.parallelHi : f.parallelLo);
  times.print(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

} // namespace

int executeCpu(const PreparedCpu& prep, const std::vector<void*>& buffers,
               const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes) {
  std::int32_t status = 0;
  // Scratch buffers (split reductions' partials, packed GEMM operands) are per call, after
  // the tensors, 64-byte aligned (a packed sliver starts on a cache line), carved out of one
  // block that the calling thread keeps for its next call: a fresh block of megabytes costs a
  // page fault and a cleared page per 4 KiB on first touch, a measurable part of a GEMM call.
  // A call made while the thread's block is in use (a kernel called from inside a task of
  // another call) gets a block of its own.
  std::vector<void*> all = buffers;
  std::size_t total = 0;
  for (const codegen::ScratchBuffer& s : prep.lowered.scratch) total += (s.bytes() + 63) / 64 * 64;
  ScratchBlock local;
  ScratchBlock& cached = threadScratch();
  ScratchBlock& block = cached.busy ? local : cached;
  block.reserve(total);
  struct Release {
    ScratchBlock& b;
    ~Release() { b.release(); }
  } release{block};
  std::size_t at = 0;
  for (const codegen::ScratchBuffer& s : prep.lowered.scratch) {
    all.push_back(block.data + at);
    at += (s.bytes() + 63) / 64 * 64;
  }
  void** bufs = all.data();
  const double* prm = params.data();
  auto runFunction = [&](std::size_t i) {
    const codegen::ir::Func& f = prep.lowered.funcs[i];
    KernelFn fn = prep.code->fns[i];
    if (cpuTaskTimesOn()) {
      timedRun(f, fn, bufs, prm, &status);
      return;
    }
#if EINJIT_HAVE_TBB
    if (f.parallel) {
      // Each output element (or split reduction chunk) is computed by exactly one task, so
      // results do not depend on the partition.
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(f.parallelLo, f.parallelHi,
                                                         static_cast<std::size_t>(f.grain)),
                        [&](const tbb::blocked_range<std::int64_t>& r) {
                          fn(bufs, prm, r.begin(), r.end(), &status);
                        });
      return;
    }
#endif
    fn(bufs, prm, f.parallelLo, f.parallel ? f.parallelHi : f.parallelLo, &status);
  };
  auto statusNow = [&] { return std::atomic_ref<std::int32_t>(status).load(); };
  // The hoisted checks first (Lower.h): nothing is written when they fail.
  for (std::size_t i = 0; i < prep.lowered.checks; ++i) runFunction(i);
  if (statusNow() != 0) return 1;
  for (std::size_t t = 0; t < zeroBytes.size(); ++t)
    if (zeroBytes[t] > 0) std::memset(buffers[t], 0, static_cast<std::size_t>(zeroBytes[t]));
  runCpuStages(prep.stages, runFunction);
  return statusNow();
}

namespace {

// Copies src into dst element by element (same shape and dtype, any strides).
void copyElements(const Tensor& dst, const Tensor& src) {
  const std::size_t es = dtypeSize(src.dtype());
  const std::int64_t n = src.numel();
  if (n == 0) return;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(src.rank()), 0);
  auto* d = static_cast<std::byte*>(dst.data());
  const auto* s = static_cast<const std::byte*>(src.data());
  for (std::int64_t lin = 0; lin < n; ++lin) {
    std::int64_t od = 0, os = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      od += idx[k] * dst.strides()[k];
      os += idx[k] * src.strides()[k];
    }
    std::memcpy(d + od * static_cast<std::int64_t>(es), s + os * static_cast<std::int64_t>(es), es);
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < src.shape()[k]) break;
      idx[k] = 0;
    }
  }
}

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(bool keepIntermediates) : keep_(keepIntermediates) {}

  void prepare(const BoundCall& call) const override { prepared(call); }

  void run(const BoundCall& call, std::vector<Tensor>& all) const override {
    // The interpreter is the slow path when a checked access failed: it throws the error with
    // its caret, or computes the result when the failure came from a branch it does not
    // evaluate.
    if (!runJit(call, all)) codegen::interpret(call.program, call.bound, hostBuffers(all));
  }

  std::string explain(const BoundCall& call, bool llvmIR) const override {
    const Program& p = call.program;
    auto prep = prepared(call, llvmIR);
    std::string out = "# target: " + hostDescription() + "\n";
    out += "# code: " + prep->code->origin + "\n";
    for (std::size_t k = 0; k < p.stmts.size(); ++k)
      out += "# statement " + std::to_string(k + 1) + ": " + prep->lowered.notes[k] + "\n";
    for (int id : prep->lowered.zeroFill)
      out += "# zero-filled first: " + p.tensors[static_cast<std::size_t>(id)].name + "\n";
    out += checkNote(prep->lowered);
    for (const auto& f : prep->lowered.funcs) out += codegen::ir::print(f);
    if (llvmIR) out += "\n; optimized LLVM IR\n" + prep->code->llvmIR;
    return out;
  }

  std::size_t cachedVariants() const override { return memo_.size(); }
  void limitVariants(std::size_t n) override { memo_.setCapacity(n); }

private:
  // keepIR (explain's LLVM IR): compiled afresh, not kept in the memo.
  std::shared_ptr<const PreparedCpu> prepared(const BoundCall& call, bool keepIR = false) const {
    const Program& p = call.program;
    codegen::Strides strides = stridesOf(call);
    if (keepIR) return prepareCpu(p, call.bound, strides, true, keep_);
    return memo_.get(bindingSignature(p, call.bound, strides),
                     [&] { return prepareCpu(p, call.bound, strides, false, keep_); });
  }

  // Runs through the JIT. False when a checked access failed: the caller's tensors are as
  // before (written arguments went through scratch copies) and the interpreter must report it.
  bool runJit(const BoundCall& call, std::vector<Tensor>& all) const {
    const Program& p = call.program;
    auto prep = prepared(call);
    std::vector<Tensor> work = all;
    if (prep->scratch)
      for (int id : p.arguments)
        if (!p.tensors[static_cast<std::size_t>(id)].writtenBy.empty())
          work[static_cast<std::size_t>(id)] = all[static_cast<std::size_t>(id)].clone();
    std::vector<void*> ptrs;
    std::vector<std::int64_t> zero(work.size(), 0);
    for (const Tensor& t : work) ptrs.push_back(t.data());
    for (int id : prep->lowered.zeroFill) {
      const Tensor& t = work[static_cast<std::size_t>(id)];
      zero[static_cast<std::size_t>(id)] =
          t.numel() * static_cast<std::int64_t>(dtypeSize(t.dtype()));
    }
    if (executeCpu(*prep, ptrs, call.bound.params, zero) != 0) return false;
    if (prep->scratch)
      for (int id : p.arguments)
        if (!p.tensors[static_cast<std::size_t>(id)].writtenBy.empty())
          copyElements(all[static_cast<std::size_t>(id)], work[static_cast<std::size_t>(id)]);
    return true;
  }

  mutable PreparedCache memo_; // compiled code per binding
  bool keep_;                  // Options::keepIntermediates
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend(bool keepIntermediates) {
  return std::make_unique<CpuBackend>(keepIntermediates);
}

} // namespace einjit::runtime
