#pragma once
// The CPU JIT engine: lowered IR functions -> LLVM IR (CodeGenLLVM) -> the new pass manager's
// O3 pipeline for the host TargetMachine -> an object file -> LLJIT. One process-wide engine;
// compiled code is cached in memory by key (the printed IR plus the target; at most
// CacheLimits::memoryModules modules, least recently used dropped) and on disk as object files
// (DiskCache.h: authenticated entries in a private directory). Each module is loaded into a
// JITDylib of its own, removed when the last holder releases the code.
#include "codegen/IR.h"
#include "codegen/Schedule.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace einjit::runtime {

using KernelFn = void (*)(void** buffers, const double* params, std::int64_t begin,
                          std::int64_t end, std::int32_t* status);

struct CompiledCode {
  std::vector<KernelFn> fns; // one per ir::Func, in order
  std::string llvmIR;        // optimized LLVM IR, when asked for
  std::string origin;        // "compiled", "memory cache" or "disk cache"
  double compileMs = 0;
  struct Resource;
  std::shared_ptr<Resource> resource; // keeps the code loaded
};

struct JitStats {
  std::int64_t compiled = 0, memoryHits = 0, diskHits = 0;
  std::int64_t diskRejected = 0; // the process's disk cache, both backends
  std::int64_t memoryEntries = 0, memoryEvicted = 0;
};

// True when this build has the LLVM JIT.
bool jitAvailable();

// The host's vector width and thread count, for schedules.
codegen::Target hostTarget();
std::string hostDescription(); // "x86_64 sapphirerapids, 64-byte vectors, 2 threads"

// Compiles (or finds) the functions. keepIR: fill CompiledCode::llvmIR (never cached).
std::shared_ptr<const CompiledCode> jitCompile(const std::vector<codegen::ir::Func>& funcs,
                                               bool keepIR = false);

JitStats jitStats();
// Drops the in-memory cache (code stays loaded while kernels hold it); tests use it to reach
// the disk cache.
void jitClearMemoryCache();
// Applies a lowered CacheLimits::memoryModules.
void jitTrimMemoryCache();
// The disk cache's directory, shared with the CUDA backend (DiskCache::instance()).
std::string jitCacheDirectory();                   // empty when the disk cache is off
void jitSetCacheDirectory(const std::string& dir); // "" turns the disk cache off

} // namespace einjit::runtime
