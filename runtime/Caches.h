#pragma once
// The bounds of the compiled-code caches (docs/RELIABILITY.md) and the generation counter that
// clearCaches() advances so that every kernel's binding memo drops what it holds.
//
//   in-memory modules per backend   CacheLimits::memoryModules  $EINJIT_CACHE_MEMORY     256
//   disk cache size (bytes)         CacheLimits::diskBytes      $EINJIT_CACHE_DISK_MB    1024 MiB
//   bindings per kernel             Options::maxVariants        $EINJIT_KERNEL_VARIANTS  64
#include "einjit/einjit.h"

#include <cstdint>

namespace einjit::runtime {

// The process-wide limits (from the environment at first use, then setCacheLimits).
CacheLimits currentLimits();
// Options::maxVariants, or the environment's default when it is 0.
std::size_t variantLimit(const Options& options);

// Advanced by clearCaches(); a Memo that sees a new value drops its entries.
std::uint64_t cacheGeneration();

// Reads a positive integer from the environment; `fallback` (with one warning on stderr) when
// it is set but not a positive integer no larger than `max`.
std::uint64_t positiveFromEnvironment(const char* name, std::uint64_t fallback, std::uint64_t max);

// Prints "einjit: warning: <text>" on stderr, once per distinct text in the process.
void warnOnce(const std::string& text);

} // namespace einjit::runtime
