#pragma once
// A map from string keys to values that keeps at most `capacity` entries, dropping the least
// recently used (found or stored) first. Not thread-safe: its users hold their own lock, and
// hand the dropped values back to the caller so that they are destroyed after it is released
// (a value may own loaded code whose unloading takes other locks).
#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace einjit::runtime {

template <class V>
class LruMap {
public:
  explicit LruMap(std::size_t capacity = 1) : capacity_(capacity < 1 ? 1 : capacity) {}

  std::size_t size() const { return items_.size(); }
  std::size_t capacity() const { return capacity_; }

  // The value stored for key (now the most recently used), or null.
  V* find(std::string_view key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    items_.splice(items_.begin(), items_, it->second);
    return &it->second->second;
  }

  // Stores value for key (replacing an older one, which goes to dropped) as the most recently
  // used; entries beyond the capacity go to dropped.
  V& put(std::string key, V value, std::vector<V>& dropped) {
    if (auto it = index_.find(key); it != index_.end()) {
      dropped.push_back(std::move(it->second->second));
      items_.erase(it->second);
      index_.erase(it);
    }
    items_.emplace_front(std::move(key), std::move(value));
    index_.emplace(std::string_view(items_.front().first), items_.begin());
    trim(dropped);
    return items_.front().second;
  }

  void setCapacity(std::size_t capacity, std::vector<V>& dropped) {
    capacity_ = capacity < 1 ? 1 : capacity;
    trim(dropped);
  }

  void clear(std::vector<V>& dropped) {
    for (auto& [k, v] : items_) dropped.push_back(std::move(v));
    index_.clear();
    items_.clear();
  }

  // Evictions so far (entries dropped for room, not by clear or replacement).
  std::size_t evicted() const { return evicted_; }

private:
  void trim(std::vector<V>& dropped) {
    while (items_.size() > capacity_) {
      auto& last = items_.back();
      dropped.push_back(std::move(last.second));
      index_.erase(std::string_view(last.first));
      items_.pop_back();
      ++evicted_;
    }
  }

  std::size_t capacity_;
  std::size_t evicted_ = 0;
  // Most recent first. std::list nodes do not move, so the index may view their keys.
  std::list<std::pair<std::string, V>> items_;
  std::unordered_map<std::string_view, typename std::list<std::pair<std::string, V>>::iterator>
      index_;
};

} // namespace einjit::runtime
