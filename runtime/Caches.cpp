// The compiled-code caches' limits, status and clearing (public API in einjit.h).
#include "runtime/Caches.h"

#include "runtime/DiskCache.h"
#include "runtime/HostMemory.h"
#if EINJIT_HAVE_LLVM
#include "runtime/Jit.h"
#endif
#if EINJIT_HAVE_CUDA
#include "runtime/CudaBackend.h"
#endif

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace einjit::runtime {

namespace {

constexpr std::size_t kDefaultMemoryModules = 256;
constexpr std::uint64_t kDefaultDiskMiB = 1024;
constexpr std::size_t kDefaultVariants = 64;

std::atomic<std::uint64_t> generation{1};

struct LimitState {
  std::mutex mu;
  CacheLimits limits;
  std::size_t variants;
  LimitState() {
    limits.memoryModules = static_cast<std::size_t>(
        positiveFromEnvironment("EINJIT_CACHE_MEMORY", kDefaultMemoryModules, 1u << 30));
    limits.diskBytes =
        positiveFromEnvironment("EINJIT_CACHE_DISK_MB", kDefaultDiskMiB, std::uint64_t{1} << 30)
        << 20;
    variants = static_cast<std::size_t>(
        positiveFromEnvironment("EINJIT_KERNEL_VARIANTS", kDefaultVariants, 1u << 30));
  }
};

LimitState& state() {
  static LimitState* s = new LimitState;
  return *s;
}

} // namespace

void warnOnce(const std::string& text) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  if (!seen->insert(text).second) return;
  std::fprintf(stderr, "einjit: warning: %s\n", text.c_str());
  std::fflush(stderr);
}

std::uint64_t positiveFromEnvironment(const char* name, std::uint64_t fallback, std::uint64_t max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno == 0 && end && *end == '\0' && n >= 1 && n <= max && v[0] != '-')
    return static_cast<std::uint64_t>(n);
  warnOnce(std::string(name) + "='" + v + "' is not a whole number from 1 to " +
           std::to_string(max) + "; using " + std::to_string(fallback));
  return fallback;
}

CacheLimits currentLimits() {
  LimitState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.limits;
}

std::size_t variantLimit(const Options& options) {
  if (options.maxVariants > 0) return options.maxVariants;
  LimitState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.variants;
}

std::uint64_t cacheGeneration() { return generation.load(std::memory_order_acquire); }

} // namespace einjit::runtime

namespace einjit {

CacheLimits cacheLimits() { return runtime::currentLimits(); }

void setCacheLimits(const CacheLimits& limits) {
  if (limits.memoryModules < 1)
    throw Error("CacheLimits::memoryModules must be at least 1 (got 0)");
  if (limits.diskBytes < 1)
    throw Error("CacheLimits::diskBytes must be at least 1 (got 0); EINJIT_CACHE_DIR=off "
                "turns the disk cache off");
  {
    runtime::LimitState& s = runtime::state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.limits = limits;
  }
  runtime::DiskCache::instance().setMaxBytes(limits.diskBytes);
#if EINJIT_HAVE_LLVM
  runtime::jitTrimMemoryCache();
#endif
#if EINJIT_HAVE_CUDA
  runtime::cudaTrimMemoryCache();
#endif
}

CacheStatus cacheStatus() {
  CacheStatus s;
  runtime::DiskCache& disk = runtime::DiskCache::instance();
  s.directory = disk.directory();
  s.problem = disk.problem();
  runtime::DiskCache::Stats d = disk.stats();
  s.diskEntries = d.entries;
  s.diskBytes = d.bytes;
  s.diskHits = d.hits;
  s.diskRejected = d.rejected;
  s.diskEvicted = d.evicted;
#if EINJIT_HAVE_LLVM
  s.memoryModules += static_cast<std::size_t>(runtime::jitStats().memoryEntries);
#endif
#if EINJIT_HAVE_CUDA
  s.memoryModules += static_cast<std::size_t>(runtime::cudaStats().memoryEntries);
#endif
  return s;
}

std::int64_t clearCaches(bool disk) {
  runtime::generation.fetch_add(1, std::memory_order_acq_rel);
  runtime::releaseHostBlocks();
#if EINJIT_HAVE_LLVM
  runtime::jitClearMemoryCache();
#endif
#if EINJIT_HAVE_CUDA
  runtime::cudaClearMemoryCache();
#endif
  return disk ? runtime::DiskCache::instance().clear() : 0;
}

} // namespace einjit
