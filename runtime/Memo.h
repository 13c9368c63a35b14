#pragma once
// A thread-safe memo from a binding signature to prepared (compiled) code, one per Kernel and
// backend. The value is made outside the lock; when two threads race, the first stored wins.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace einjit::runtime {

template <class T>
class Memo {
public:
  std::shared_ptr<const T> get(const std::string& key,
                               const std::function<std::shared_ptr<const T>()>& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    auto value = make();
    std::lock_guard<std::mutex> lock(mu_);
    return map_.emplace(key, std::move(value)).first->second;
  }

private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const T>> map_;
};

} // namespace einjit::runtime
