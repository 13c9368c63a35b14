#include "runtime/DiskCache.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace einjit::runtime {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'E', 'I', 'N', 'J', 'I', 'T', 'O', '1'};
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

DiskCache::DiskCache(std::string suffix) : dir_(defaultDirectory()), suffix_(std::move(suffix)) {}

std::string DiskCache::defaultDirectory() {
  if (const char* d = std::getenv("EINJIT_CACHE_DIR")) {
    std::string s = d;
    if (s == "off" || s.empty()) return "";
    return s;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/einjit";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/einjit";
  return "";
}

std::string DiskCache::pathOf(const std::string& key) const {
  return dir_ + "/" + hex(fnv1a(key)) + suffix_;
}

std::string DiskCache::read(const std::string& key) {
  if (dir_.empty()) return "";
  std::ifstream in(pathOf(key), std::ios::binary);
  if (!in) return "";
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto u64 = [&](std::size_t at, std::uint64_t* v) {
    if (at + 8 > data.size()) return false;
    std::memcpy(v, data.data() + at, 8);
    return true;
  };
  std::uint64_t keyLen = 0, len = 0, sum = 0;
  bool ok = data.size() >= 8 && std::memcmp(data.data(), kMagic, 8) == 0 && u64(8, &keyLen) &&
            keyLen <= data.size() && 16 + keyLen <= data.size() &&
            data.compare(16, keyLen, key) == 0 && u64(16 + keyLen, &len) &&
            u64(24 + keyLen, &sum) && 32 + keyLen + len == data.size();
  std::string payload;
  if (ok) {
    payload = data.substr(32 + keyLen);
    ok = fnv1a(payload) == sum;
  }
  if (!ok) {
    ++rejected_;
    return "";
  }
  return payload;
}

void DiskCache::write(const std::string& key, const std::string& payload) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return;
  std::string path = pathOf(key);
  std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(tmpCounter_.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    std::uint64_t keyLen = key.size(), len = payload.size(), sum = fnv1a(payload);
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&keyLen), 8);
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(reinterpret_cast<const char*>(&sum), 8);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

} // namespace einjit::runtime
