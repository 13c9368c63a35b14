#pragma once
// The compiled-code cache of both backends (the JIT's object files, NVRTC's cubins): an
// in-memory map of loaded code, at most CacheLimits::memoryModules entries with the least
// recently used dropped (released after the lock: unloading takes other locks), in front of
// the disk cache (DiskCache.h), with the counts jitStats()/cudaStats() report. The caller holds
// lock() while it builds, so one piece of code is compiled once however many threads ask.
//
// The protocol per key: memory (a hit); else the disk entry read, or the image built and
// written; then loaded. An authenticated disk entry that does not load (a compiler changed
// without the key) is rebuilt and replaced, never a kernel that fails for good.
#include "runtime/Caches.h"
#include "runtime/DiskCache.h"
#include "runtime/Lru.h"

#include "einjit/Error.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace einjit::runtime {

template <class V>
class CompileCache {
public:
  using Value = std::shared_ptr<const V>;
  enum class Origin { memory, disk, compiled };
  struct Counts {
    std::int64_t compiled = 0, memoryHits = 0, diskHits = 0, entries = 0, evicted = 0;
  };

  // kind: the disk entries' kind ("o", "cubin").
  explicit CompileCache(std::string kind) : kind_(std::move(kind)) {}

  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }

  // Under lock(): the value stored for key, now the most recently used, or null. hit() counts
  // the lookup as a memory hit when it finds one.
  const Value* find(const std::string& key) { return memory_.find(key); }
  const Value* hit(const std::string& key) {
    const Value* v = memory_.find(key);
    if (v) ++counts_.memoryHits;
    return v;
  }

  // Under lock(): the disk entry for key (origin disk), or build()'s image written there (origin
  // compiled).
  template <class Build>
  std::string readOrBuild(const std::string& key, Build&& build, Origin& origin) {
    DiskCache& disk = DiskCache::instance();
    std::string image = disk.read(kind_, key);
    origin = Origin::disk;
    if (image.empty()) {
      image = build();
      origin = Origin::compiled;
      disk.write(kind_, key, image);
    }
    return image;
  }

  // Under lock(): load(image); an image from disk that does not load is rebuilt, written and
  // loaded (origin compiled).
  template <class Build, class Load>
  Value loadOrRebuild(const std::string& key, std::string image, Origin& origin, Build&& build,
                      Load&& load) {
    try {
      return load(image);
    } catch (const Error&) {
      if (origin != Origin::disk) throw;
      image = build();
      origin = Origin::compiled;
      DiskCache::instance().write(kind_, key, image);
      return load(image);
    }
  }

  // Under lock(): keeps value for key (the bound re-read from the current limits) and counts
  // where it came from. Dropped entries go to dropped, to be released after the lock.
  void store(const std::string& key, Value value, Origin origin, std::vector<Value>& dropped) {
    if (origin == Origin::compiled)
      ++counts_.compiled;
    else
      ++counts_.diskHits;
    memory_.setCapacity(currentLimits().memoryModules, dropped);
    memory_.put(key, std::move(value), dropped);
  }

  Counts counts() {
    std::lock_guard<std::mutex> guard(mu_);
    Counts c = counts_;
    c.entries = static_cast<std::int64_t>(memory_.size());
    c.evicted = static_cast<std::int64_t>(memory_.evicted());
    return c;
  }

  // Drops every entry (code stays loaded while kernels hold it).
  void clear() {
    std::vector<Value> dropped; // released after the lock
    std::lock_guard<std::mutex> guard(mu_);
    memory_.clear(dropped);
  }

  // Applies a lowered CacheLimits::memoryModules.
  void trim() {
    std::vector<Value> dropped;
    std::lock_guard<std::mutex> guard(mu_);
    memory_.setCapacity(currentLimits().memoryModules, dropped);
  }

private:
  std::string kind_;
  std::mutex mu_;
  LruMap<Value> memory_{currentLimits().memoryModules};
  Counts counts_;
};

} // namespace einjit::runtime
