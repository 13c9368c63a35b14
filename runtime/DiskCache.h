#pragma once
// An on-disk cache of compiled code (CPU object files, CUDA cubins), shared by the backends.
// Each entry is one file named by a hash of its key; it holds a magic number, the whole key
// (so a hash collision is a miss), the payload's length and checksum, then the payload. Writes
// go to a temporary file that is renamed into place, so readers never see half an entry; an
// entry that is truncated, corrupt or for another key is counted as rejected and rebuilt.
//
// Location: $EINJIT_CACHE_DIR, else $XDG_CACHE_HOME/einjit, else ~/.cache/einjit;
// EINJIT_CACHE_DIR=off disables it. The cache is an optimisation: an unwritable directory
// only costs time.
#include <atomic>
#include <cstdint>
#include <string>

namespace einjit::runtime {

std::uint64_t fnv1a(std::string_view s);
std::string hex(std::uint64_t v); // 16 lower-case hex digits

class DiskCache {
public:
  explicit DiskCache(std::string suffix); // ".o", ".cubin"
  static std::string defaultDirectory();

  // The payload stored for key, or empty when absent or invalid (counted in rejected()).
  std::string read(const std::string& key);
  void write(const std::string& key, const std::string& payload);

  // Not thread-safe: callers hold their own lock around the cache.
  const std::string& directory() const { return dir_; }
  void setDirectory(std::string dir) { dir_ = std::move(dir); }
  std::int64_t rejected() const { return rejected_; }

private:
  std::string pathOf(const std::string& key) const;
  std::string dir_;
  std::string suffix_;
  std::int64_t rejected_ = 0;
  std::atomic<std::uint64_t> tmpCounter_{0};
};

} // namespace einjit::runtime
