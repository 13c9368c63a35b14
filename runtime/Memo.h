#pragma once
// A thread-safe memo from a binding signature to prepared (compiled) code, one per Kernel and
// backend, bounded: it keeps the `capacity` most recently used bindings (Options::maxVariants)
// and drops everything when clearCaches() advances the cache generation. The value is made
// outside the lock; when two threads race, the first stored wins. Dropped values are released
// after the lock (their code is unloaded when no call holds it any more).
#include "runtime/Caches.h"
#include "runtime/Lru.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace einjit::runtime {

template <class T>
class Memo {
public:
  using Value = std::shared_ptr<const T>;

  void setCapacity(std::size_t capacity) {
    std::vector<Value> dropped;
    std::lock_guard<std::mutex> lock(mu_);
    map_.setCapacity(capacity, dropped);
  }

  Value get(const std::string& key, const std::function<Value()>& make) {
    std::vector<Value> dropped; // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> lock(mu_);
      sync(dropped);
      if (Value* v = map_.find(key)) return *v;
    }
    Value value = make();
    std::lock_guard<std::mutex> lock(mu_);
    sync(dropped);
    if (Value* v = map_.find(key)) return *v;
    return map_.put(key, std::move(value), dropped);
  }

  std::size_t size() {
    std::vector<Value> dropped;
    std::lock_guard<std::mutex> lock(mu_);
    sync(dropped);
    return map_.size();
  }

private:
  void sync(std::vector<Value>& dropped) {
    const std::uint64_t g = cacheGeneration();
    if (g == generation_) return;
    generation_ = g;
    map_.clear(dropped);
  }

  std::mutex mu_;
  std::uint64_t generation_ = cacheGeneration();
  LruMap<Value> map_{64};
};

} // namespace einjit::runtime
