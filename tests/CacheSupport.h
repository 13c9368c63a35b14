#pragma once
// Shared by the cache tests (test_cache.cpp: what the disk cache trusts; test_cache_limits.cpp:
// the bounds, threads and processes): temporary cache directories, pointing the process's cache
// at one, reading and forging entries, running a program on the JIT and the interpreter.
#include "Compare.h"
#include "TestSupport.h"

#include "einjit/einjit.h"
#include "runtime/DiskCache.h"
#if EINJIT_HAVE_LLVM
#include "runtime/Jit.h"
#endif

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace einjit::test {

namespace fs = std::filesystem;
using einjit::runtime::DiskCache;

// A fresh directory path (not created) under the temporary directory, removed at the end.
struct TempPath {
  fs::path path;
  explicit TempPath(const std::string& tag) {
    static std::atomic<int> n{0};
    path = fs::temp_directory_path() /
           ("einjit-cache-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  ~TempPath() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
};

// Points the process's disk cache at `dir` (checked anew) with empty in-memory caches, and puts
// everything back at the end.
struct UseCache {
  std::string saved;
  einjit::CacheLimits limits;
  explicit UseCache(const fs::path& dir) {
    saved = DiskCache::instance().directory();
    limits = einjit::cacheLimits();
    DiskCache::instance().setDirectory(dir.string());
    einjit::clearCaches();
  }
  ~UseCache() {
    DiskCache::instance().setExpectedOwner(::geteuid());
    DiskCache::instance().setDirectory(saved);
    einjit::setCacheLimits(limits);
    einjit::clearCaches();
  }
};

struct Shell {
  int status;
  std::string out; // stdout and stderr
};

inline Shell runShell(const std::string& cmd) {
  Shell r{-1, {}};
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) r.out += buf.data();
  const int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

struct Parsed {
  std::string key, payload;
};

// An entry's key and payload, read without checking its MAC (what an attacker sees).
inline Parsed parseEntry(const std::string& bytes) {
  REQUIRE(bytes.size() >= 56);
  REQUIRE(bytes.compare(0, 8, "EINJITC2") == 0);
  std::uint64_t keyLen = 0, len = 0;
  std::memcpy(&keyLen, bytes.data() + 8, 8);
  std::memcpy(&len, bytes.data() + 16, 8);
  REQUIRE(24 + keyLen + len + 32 == bytes.size());
  return {bytes.substr(24, keyLen), bytes.substr(24 + keyLen, len)};
}

// The entry layout before the MAC: magic EINJITO1, key, payload length and an FNV-1a checksum.
inline std::string oldStyleEntry(const std::string& key, const std::string& payload) {
  std::string s = "EINJITO1";
  auto u64 = [&](std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
  u64(key.size());
  s += key;
  u64(payload.size());
  u64(einjit::runtime::fnv1a(payload));
  s += payload;
  return s;
}

inline std::vector<fs::path> entries(const fs::path& dir, const std::string& ext = ".o") {
  std::vector<fs::path> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ext && e.path().filename().string()[0] != '.')
      v.push_back(e.path());
  return v;
}

inline DiskCache::Secret readSecret(const fs::path& dir) {
  std::string s = readFile(dir / "secret");
  REQUIRE(s.size() == 32);
  DiskCache::Secret k;
  std::memcpy(k.data(), s.data(), 32);
  return k;
}

inline mode_t modeOf(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

// Runs `program` on the CPU JIT and on the interpreter with the same f64 input of n elements;
// returns the JIT's result after checking it against the interpreter's.
inline std::vector<double> runBoth(const std::string& program, std::int64_t n = 37) {
  Tensor x = Tensor::random({n}, DType::f64, 7);
  Kernel jit = einjit::compile(program, on(Device::cpu()));
  Kernel ref = einjit::compile(program, on(Device::reference()));
  Tensor a = jit(x), b = ref(x);
  CHECK(relativeError(a, b) <= 1e-12);
  return a.toVector();
}

// Element-wise equal within 1e-12 relative (the JIT may fuse a multiply-add).
inline bool close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-12 * std::max(1.0, std::fabs(b[i]))) return false;
  return true;
}

#if EINJIT_HAVE_LLVM
inline std::int64_t compiled() { return einjit::runtime::jitStats().compiled; }

inline std::int64_t diskHits() { return einjit::runtime::jitStats().diskHits; }
#endif

} // namespace einjit::test
