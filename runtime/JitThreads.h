#pragma once
// The threads a cold compile's modules are emitted and compiled on (runtime/Jit.cpp).
#include <algorithm>
#include <atomic>
#include <cstddef>

#if EINJIT_HAVE_TBB
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#endif

namespace einjit::runtime {

// How many threads compile a kernel's modules at once.
inline unsigned jitThreads() {
#if EINJIT_HAVE_TBB
  return static_cast<unsigned>(std::max(1, tbb::this_task_arena::max_concurrency()));
#else
  return 1;
#endif
}

// Runs work(0..n-1) on oneTBB's threads in the order given: each thread takes the next index
// when it is free, so the costliest modules, put first, start first (a parallel_for over the
// indices hands out halves of the range instead: with the packing functions first in the
// program, a GEMM's micro-kernel module started after them, on the critical path).
template <class Work>
void inOrder(std::size_t n, const Work& work) {
#if EINJIT_HAVE_TBB
  std::atomic<std::size_t> next{0};
  const auto slots = std::min<std::size_t>(n, jitThreads());
  // Isolated: the caller holds the cache's lock, so while it waits it must not take an
  // unrelated task (another compile, from a caller's parallel loop) that would wait for it.
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(
        std::size_t{0}, slots,
        [&](std::size_t) {
          for (std::size_t i; (i = next.fetch_add(1)) < n;) work(i);
        },
        tbb::simple_partitioner{});
  });
#else
  for (std::size_t i = 0; i < n; ++i) work(i);
#endif
}

} // namespace einjit::runtime
