// The compiled-code caches as an attacker and an unlucky user would meet them
// (docs/RELIABILITY.md): the disk cache's permissions, ownership checks and keyed MAC (forged
// entries are never loaded: a working forgery, accepted under the real secret, computes a
// different result, and every other forgery leaves the kernel computing the interpreter's
// values), entries that are links, FIFOs, directories, truncated, mutated or oversized (a miss
// that rebuilds and replaces, never a hang or an error), the bounds of the per-kernel,
// process-wide and disk caches, 8 threads and two processes sharing one cache. A build without
// LLVM has no keyed hash, hence no disk cache: it checks only that.
#include "Compare.h"

#include "einjit/einjit.h"
#include "runtime/DiskCache.h"
#if EINJIT_HAVE_LLVM
#include "runtime/Jit.h"
#endif

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace einjit::test;
using einjit::runtime::DiskCache;
namespace fs = std::filesystem;

namespace {

[[maybe_unused]] std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

[[maybe_unused]] void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

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

Shell runShell(const std::string& cmd) {
  Shell r{-1, {}};
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) r.out += buf.data();
  const int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

} // namespace

#if EINJIT_HAVE_LLVM

namespace {

struct Parsed {
  std::string key, payload;
};

// An entry's key and payload, read without checking its MAC (what an attacker sees).
Parsed parseEntry(const std::string& bytes) {
  REQUIRE(bytes.size() >= 56);
  REQUIRE(bytes.compare(0, 8, "EINJITC2") == 0);
  std::uint64_t keyLen = 0, len = 0;
  std::memcpy(&keyLen, bytes.data() + 8, 8);
  std::memcpy(&len, bytes.data() + 16, 8);
  REQUIRE(24 + keyLen + len + 32 == bytes.size());
  return {bytes.substr(24, keyLen), bytes.substr(24 + keyLen, len)};
}

// The entry layout before the MAC: magic EINJITO1, key, payload length and an FNV-1a checksum.
std::string oldStyleEntry(const std::string& key, const std::string& payload) {
  std::string s = "EINJITO1";
  auto u64 = [&](std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
  u64(key.size());
  s += key;
  u64(payload.size());
  u64(einjit::runtime::fnv1a(payload));
  s += payload;
  return s;
}

std::vector<fs::path> entries(const fs::path& dir, const std::string& ext = ".o") {
  std::vector<fs::path> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ext && e.path().filename().string()[0] != '.')
      v.push_back(e.path());
  return v;
}

DiskCache::Secret readSecret(const fs::path& dir) {
  std::string s = slurp(dir / "secret");
  REQUIRE(s.size() == 32);
  DiskCache::Secret k;
  std::memcpy(k.data(), s.data(), 32);
  return k;
}

mode_t modeOf(const fs::path& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

// Runs `program` on the CPU JIT and on the interpreter with the same f64 input of n elements;
// returns the JIT's result after checking it against the interpreter's.
std::vector<double> runBoth(const std::string& program, std::int64_t n = 37) {
  Tensor x = Tensor::random({n}, DType::f64, 7);
  Kernel jit = einjit::compile(program, on(Device::cpu()));
  Kernel ref = einjit::compile(program, on(Device::reference()));
  Tensor a = jit(x), b = ref(x);
  CHECK(relativeError(a, b) <= 1e-12);
  return a.toVector();
}

std::int64_t compiled() { return einjit::runtime::jitStats().compiled; }

std::int64_t diskHits() { return einjit::runtime::jitStats().diskHits; }

// The program whose entry the fault tests attack, and one that computes something else.
const std::string kVictim = "y[i] := x[i] * 1.25 + 0.5";
const std::string kOther = "y[i] := x[i] * 7 + 0.5";

// Element-wise equal within 1e-12 relative (the JIT may fuse a multiply-add).
bool close(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-12 * std::max(1.0, std::fabs(b[i]))) return false;
  return true;
}

// The victim's expected values (the interpreter's) and the other program's, for x of 37.
std::vector<double> expected(const std::string& program) {
  Tensor x = Tensor::random({37}, DType::f64, 7);
  return Tensor(einjit::compile(program, on(Device::reference()))(x)).toVector();
}

// A fresh cache holding the victim's entry: its path, key and the authentic bytes.
struct Victim {
  fs::path entry;
  Parsed parsed;
  std::string bytes;
};

Victim plantVictim(const fs::path& dir) {
  einjit::clearCaches();
  runBoth(kVictim);
  auto es = entries(dir);
  REQUIRE(es.size() == 1);
  Victim v;
  v.entry = es[0];
  v.bytes = slurp(v.entry);
  v.parsed = parseEntry(v.bytes);
  return v;
}

void checkAuthentic(const fs::path& dir, const Victim& v);

// After a fault: the victim computes the interpreter's values (it was rebuilt), the fault was
// counted as a rejection when `rejected`, and the entry is authentic again so that the next
// process (here: the next load after clearing memory) hits it.
void checkRebuilt(const fs::path& dir, const Victim& v) {
  const auto before = DiskCache::instance().stats();
  const std::int64_t builds = compiled();
  einjit::clearCaches();
  CHECK(close(runBoth(kVictim), expected(kVictim)));
  const auto after = DiskCache::instance().stats();
  CHECK(after.rejected >= before.rejected + 1);
  CHECK(compiled() == builds + 1);
  checkAuthentic(dir, v);
}

// The victim's entry is a private regular file, authentic under the directory's secret, and
// the next load (after clearing memory: as in a new process) hits it.
void checkAuthentic(const fs::path& dir, const Victim& v) {
  struct stat st;
  REQUIRE(::lstat(v.entry.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  std::string payload;
  CHECK(DiskCache::decode(readSecret(dir), "o", v.parsed.key, slurp(v.entry), &payload));
  const std::int64_t hits = diskHits();
  einjit::clearCaches();
  CHECK(close(runBoth(kVictim), expected(kVictim)));
  CHECK(diskHits() == hits + 1);
}

} // namespace

TEST_CASE("cache: directories are created 0700, entries and the secret 0600") {
  TempPath t("perm");
  const fs::path dir = t.path / "a" / "b";
  UseCache use(dir);
  CHECK(close(runBoth(kVictim), expected(kVictim)));
  CHECK((modeOf(t.path) & 0777) == 0700);
  CHECK((modeOf(t.path / "a") & 0777) == 0700);
  CHECK((modeOf(dir) & 0777) == 0700);
  CHECK((modeOf(dir / "secret") & 0777) == 0600);
  CHECK(fs::file_size(dir / "secret") == 32);
  auto es = entries(dir);
  REQUIRE(es.size() == 1);
  CHECK((modeOf(es[0]) & 0777) == 0600);
  CHECK(einjit::cacheStatus().problem.empty());
  // Nothing else is left behind (no temporary files).
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  CHECK(files == 2);
}

TEST_CASE("cache: a forged entry is never loaded, whatever its checksum or header") {
  TempPath t("forge");
  UseCache use(t.path);
  const std::vector<double> victim = expected(kVictim), other = expected(kOther);
  REQUIRE(victim != other);
  Victim v = plantVictim(t.path);
  const DiskCache::Secret secret = readSecret(t.path);

  // The forgery: the other program's object, its symbols renamed to the victim's (the names
  // have one length: "ej" + 16 hex digits + "_").
  std::string forged;
  {
    TempPath t2("forge-other");
    DiskCache::instance().setDirectory(t2.path.string());
    einjit::clearCaches();
    runBoth(kOther);
    auto es = entries(t2.path);
    REQUIRE(es.size() == 1);
    Parsed o = parseEntry(slurp(es[0]));
    const std::string from = "ej" + einjit::runtime::hex(einjit::runtime::fnv1a(o.key)) + "_";
    const std::string to = "ej" + einjit::runtime::hex(einjit::runtime::fnv1a(v.parsed.key)) + "_";
    forged = o.payload;
    int renamed = 0;
    for (std::size_t at = forged.find(from); at != std::string::npos;
         at = forged.find(from, at + 1), ++renamed)
      forged.replace(at, from.size(), to);
    REQUIRE(renamed >= 1);
    DiskCache::instance().setDirectory(t.path.string());
  }

  SUBCASE("control: under the real secret the forgery loads and computes the other program") {
    // Proves that the forged object works: only the MAC keeps it out below.
    spit(v.entry, DiskCache::encode(secret, "o", v.parsed.key, forged));
    einjit::clearCaches();
    CHECK(close(runBoth(kOther), other));
    einjit::clearCaches();
    Tensor x = Tensor::random({37}, DType::f64, 7);
    CHECK(close(Tensor(einjit::compile(kVictim, on(Device::cpu()))(x)).toVector(), other));
  }
  SUBCASE("the old format with a valid FNV checksum") {
    spit(v.entry, oldStyleEntry(v.parsed.key, forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("the new format, MAC under another secret") {
    DiskCache::Secret guess{};
    guess[0] = 1;
    spit(v.entry, DiskCache::encode(guess, "o", v.parsed.key, forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("the new format, the authentic MAC copied from the real entry") {
    std::string bytes =
        v.bytes.substr(0, 24) + v.parsed.key + forged + v.bytes.substr(v.bytes.size() - 32);
    const std::uint64_t len = forged.size();
    std::memcpy(bytes.data() + 16, &len, 8);
    spit(v.entry, bytes);
    checkRebuilt(t.path, v);
  }
  SUBCASE("an authentic entry of another kind (a cubin's MAC) or another key") {
    spit(v.entry, DiskCache::encode(secret, "cubin", v.parsed.key, forged));
    checkRebuilt(t.path, v);
    spit(v.entry, DiskCache::encode(secret, "o", v.parsed.key + " ", forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("a random payload with a forged header: rejected and rebuilt, not failing for good") {
    std::mt19937_64 rng(5);
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    spit(v.entry, oldStyleEntry(v.parsed.key, junk));
    checkRebuilt(t.path, v);
    std::string bytes = DiskCache::encode(secret, "o", v.parsed.key, junk);
    for (std::size_t i = bytes.size() - 32; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(rng());
    spit(v.entry, bytes);
    checkRebuilt(t.path, v);
  }
}

TEST_CASE("cache: links, FIFOs, directories and oversized files at an entry are misses") {
  TempPath t("kinds");
  UseCache use(t.path);
  Victim v = plantVictim(t.path);

  SUBCASE("a FIFO: no hang, replaced") {
    fs::remove(v.entry);
    REQUIRE(::mkfifo(v.entry.c_str(), 0600) == 0);
    checkRebuilt(t.path, v);
  }
  SUBCASE("an empty directory: replaced") {
    fs::remove(v.entry);
    fs::create_directory(v.entry);
    checkRebuilt(t.path, v);
  }
  SUBCASE("a directory with files: a miss every time, the kernel still runs") {
    fs::remove(v.entry);
    fs::create_directories(v.entry / "inside");
    for (int rep = 0; rep < 2; ++rep) {
      const auto before = DiskCache::instance().stats();
      einjit::clearCaches();
      CHECK(close(runBoth(kVictim), expected(kVictim)));
      CHECK(DiskCache::instance().stats().rejected >= before.rejected + 1);
    }
    CHECK(fs::is_directory(v.entry / "inside"));
  }
  SUBCASE("a link to /dev/zero: not followed, replaced") {
    fs::remove(v.entry);
    fs::create_symlink("/dev/zero", v.entry);
    checkRebuilt(t.path, v);
  }
  SUBCASE("a link to an authentic copy of the entry: still not followed") {
    TempPath elsewhere("link-target");
    fs::create_directories(elsewhere.path);
    spit(elsewhere.path / "copy", v.bytes);
    fs::remove(v.entry);
    fs::create_symlink(elsewhere.path / "copy", v.entry);
    checkRebuilt(t.path, v);
  }
  SUBCASE("a dangling link: replaced") {
    fs::remove(v.entry);
    fs::create_symlink(t.path / "nowhere", v.entry);
    checkRebuilt(t.path, v);
  }
  SUBCASE("a file over the size cap: rejected without reading it") {
    fs::remove(v.entry);
    int fd = ::open(v.entry.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, v.bytes.data(), v.bytes.size()) == static_cast<ssize_t>(v.bytes.size()));
    REQUIRE(::ftruncate(fd, static_cast<off_t>(einjit::runtime::kMaxEntryBytes + 1)) == 0);
    ::close(fd);
    auto t0 = std::chrono::steady_clock::now();
    checkRebuilt(t.path, v);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  }
}

TEST_CASE("cache: truncated and mutated entries are misses that rebuild") {
  TempPath t("mutate");
  UseCache use(t.path);
  Victim v = plantVictim(t.path);
  const std::size_t n = v.bytes.size();
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{23},
                          std::size_t{24}, std::size_t{56}, n / 2, n - 33, n - 1}) {
    CAPTURE(len);
    spit(v.entry, v.bytes.substr(0, len));
    checkRebuilt(t.path, v);
  }
  // One byte flipped: in the magic, each length, the key, the payload, the MAC; and one byte
  // appended.
  const std::size_t keyLen = v.parsed.key.size();
  for (std::size_t at : {std::size_t{0}, std::size_t{9}, std::size_t{17}, std::size_t{24 + 5},
                         24 + keyLen + 100, n / 2, n - 40, n - 32, n - 1}) {
    CAPTURE(at);
    std::string bad = v.bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    spit(v.entry, bad);
    checkRebuilt(t.path, v);
  }
  spit(v.entry, v.bytes + "x");
  checkRebuilt(t.path, v);
  // 200 random mutations of 1-8 bytes: never loaded (the kernel keeps computing the right
  // values).
  std::mt19937_64 rng(11);
  for (int rep = 0; rep < 200; ++rep) {
    std::string bad = v.bytes;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      char& c = bad[rng() % bad.size()];
      c = static_cast<char>(c ^ static_cast<char>(1 + rng() % 255));
    }
    spit(v.entry, bad);
    einjit::clearCaches();
    REQUIRE(close(runBoth(kVictim), expected(kVictim)));
  }
}

TEST_CASE("cache: the secret key is private, and replaced when it is not") {
  TempPath t("secret");
  UseCache use(t.path);
  Victim v = plantVictim(t.path);
  const DiskCache::Secret first = readSecret(t.path);
  // A new process, as far as the cache knows: the victim is rebuilt (its entry was made under
  // the old secret) and stored under the new one.
  auto reopen = [&] {
    DiskCache::instance().setDirectory(t.path.string());
    einjit::clearCaches();
    const std::int64_t builds = compiled();
    CHECK(close(runBoth(kVictim), expected(kVictim)));
    CHECK(compiled() == builds + 1);
  };
  SUBCASE("readable by others: replaced, old entries rebuilt") {
    fs::permissions(t.path / "secret", fs::perms::owner_read | fs::perms::owner_write |
                                           fs::perms::group_read | fs::perms::others_read);
    reopen();
    CHECK((modeOf(t.path / "secret") & 0777) == 0600);
    CHECK(readSecret(t.path) != first);
    checkAuthentic(t.path, v);
  }
  SUBCASE("a link: replaced by a file") {
    spit(t.path / "elsewhere", slurp(t.path / "secret"));
    fs::permissions(t.path / "elsewhere", fs::perms::owner_read | fs::perms::owner_write);
    fs::remove(t.path / "secret");
    fs::create_symlink(t.path / "elsewhere", t.path / "secret");
    reopen();
    CHECK(S_ISREG(modeOf(t.path / "secret")));
    CHECK((modeOf(t.path / "secret") & 0777) == 0600);
    checkAuthentic(t.path, v);
  }
  SUBCASE("the wrong size: replaced") {
    spit(t.path / "secret", "short");
    reopen();
    CHECK(fs::file_size(t.path / "secret") == 32);
    checkAuthentic(t.path, v);
  }
  SUBCASE("a directory: replaced by a file") {
    fs::remove(t.path / "secret");
    fs::create_directory(t.path / "secret");
    reopen();
    CHECK(S_ISREG(modeOf(t.path / "secret")));
    checkAuthentic(t.path, v);
  }
}

TEST_CASE("cache: a directory that others can write, or that is not the user's, is refused") {
  for (unsigned mode : {0777u, 0770u, 0730u, 0703u, 01777u}) {
    CAPTURE(mode);
    TempPath t("open");
    fs::create_directories(t.path);
    REQUIRE(::chmod(t.path.c_str(), mode) == 0);
    UseCache use(t.path);
    for (int rep = 0; rep < 2; ++rep) {
      const std::int64_t builds = compiled();
      einjit::clearCaches();
      CHECK(close(runBoth(kVictim), expected(kVictim)));
      CHECK(compiled() == builds + 1); // compiled each time: no disk cache
    }
    CHECK(einjit::cacheStatus().problem.find("writable by its group or by others") !=
          std::string::npos);
    CHECK(fs::is_empty(t.path)); // nothing written there, not even the secret
  }
  {
    // Owned by someone else: the check takes the expected owner as a parameter.
    TempPath t("owner");
    UseCache use(t.path);
    DiskCache::instance().setExpectedOwner(::geteuid() + 1);
    CHECK(close(runBoth(kVictim), expected(kVictim)));
    CHECK(einjit::cacheStatus().problem.find("belongs to uid") != std::string::npos);
    CHECK(fs::is_empty(t.path));
    struct stat st {};
    st.st_mode = S_IFDIR | 0700;
    st.st_uid = 1000;
    CHECK(DiskCache::checkDirectory(st, 1000).empty());
    CHECK(DiskCache::checkDirectory(st, 1001).find("belongs to uid 1000") != std::string::npos);
    st.st_mode = S_IFDIR | 0720;
    CHECK(!DiskCache::checkDirectory(st, 1000).empty());
    st.st_mode = S_IFREG | 0700;
    CHECK(DiskCache::checkDirectory(st, 1000) == "it is not a directory");
  }
  if (::geteuid() == 0) {
    // As root, a directory really owned by another user.
    TempPath t("chown");
    fs::create_directories(t.path);
    REQUIRE(::chown(t.path.c_str(), 65534, 65534) == 0);
    UseCache use(t.path);
    CHECK(close(runBoth(kVictim), expected(kVictim)));
    CHECK(einjit::cacheStatus().problem.find("belongs to uid 65534") != std::string::npos);
    CHECK(fs::is_empty(t.path));
  }
  {
    // A file where the directory should be.
    TempPath t("file");
    spit(t.path, "not a directory");
    UseCache use(t.path);
    CHECK(close(runBoth(kVictim), expected(kVictim)));
    CHECK(!einjit::cacheStatus().problem.empty());
    std::error_code ec;
    fs::remove(t.path, ec);
  }
}

TEST_CASE("cache: a refused directory is reported once, on stderr") {
  TempPath t("warn");
  fs::create_directories(t.path);
  REQUIRE(::chmod(t.path.c_str(), 0777) == 0);
  TempPath log("warn-log");
  fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(log.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  {
    UseCache use(t.path);
    for (int rep = 0; rep < 3; ++rep) {
      einjit::clearCaches();
      runBoth(kVictim);
      DiskCache::instance().setDirectory(t.path.string());
    }
  }
  fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  const std::string text = slurp(log.path);
  CAPTURE(text);
  const std::string want = "einjit: warning: not using the kernel cache directory '" +
                           t.path.string() + "': it is writable by its group or by others";
  const std::size_t first = text.find(want);
  CHECK(first != std::string::npos);
  CHECK(text.find(want, first + 1) == std::string::npos);
}

TEST_CASE("cache: each kernel keeps at most Options::maxVariants bindings") {
  einjit::Options o = on(Device::cpu());
  o.maxVariants = 4;
  Kernel k = einjit::compile("y[i] := x[i] * 3 - 1", o);
  Kernel ref = einjit::compile("y[i] := x[i] * 3 - 1", on(Device::reference()));
  for (std::int64_t n = 1; n <= 20; ++n) {
    Tensor x = Tensor::random({n}, DType::f64, static_cast<std::uint64_t>(n));
    CHECK(relativeError(k(x), ref(x)) <= 1e-12);
    CHECK(k.cachedVariants() <= 4);
  }
  CHECK(k.cachedVariants() == 4);
  // The most recent binding is still there: no compile, not even a process-cache lookup.
  const auto before = einjit::runtime::jitStats();
  k(Tensor::random({20}, DType::f64, 1));
  const auto after = einjit::runtime::jitStats();
  CHECK(after.compiled == before.compiled);
  CHECK(after.memoryHits == before.memoryHits);
  einjit::clearCaches();
  CHECK(k.cachedVariants() == 0);
  // The default: $EINJIT_KERNEL_VARIANTS, else 64.
  Kernel d = einjit::compile("y[i] := x[i] * 3 - 1", on(Device::cpu()));
  for (std::int64_t n = 1; n <= 70; ++n) d(Tensor::random({n}, DType::f64, 3));
  if (!std::getenv("EINJIT_KERNEL_VARIANTS")) CHECK(d.cachedVariants() == 64);
}

TEST_CASE("cache: the process keeps at most CacheLimits::memoryModules modules") {
  TempPath t("memory");
  UseCache use(t.path);
  einjit::CacheLimits l = einjit::cacheLimits();
  l.memoryModules = 3;
  einjit::setCacheLimits(l);
  for (int i = 0; i < 10; ++i) {
    runBoth("y[i] := x[i] * " + std::to_string(i + 2) + " + 0.25");
    CHECK(einjit::runtime::jitStats().memoryEntries <= 3);
  }
  CHECK(einjit::cacheStatus().memoryModules <= 3);
  einjit::CacheLimits none = l;
  none.memoryModules = 0;
  CHECK_THROWS_WITH_AS(einjit::setCacheLimits(none),
                       "CacheLimits::memoryModules must be at least 1 (got 0)", einjit::Error);
  none = l;
  none.diskBytes = 0;
  CHECK_THROWS_WITH_AS(einjit::setCacheLimits(none),
                       doctest::Contains("CacheLimits::diskBytes must be at least 1 (got 0)"),
                       einjit::Error);
}

TEST_CASE(
    "cache: the disk cache keeps at most CacheLimits::diskBytes; clearCaches(true) empties it") {
  TempPath t("disk");
  UseCache use(t.path);
  runBoth("y[i] := x[i] * 2 + 0.125");
  const std::uint64_t one = fs::file_size(entries(t.path).at(0));
  einjit::CacheLimits l = einjit::cacheLimits();
  l.diskBytes = one * 3 + one / 2;
  einjit::setCacheLimits(l);
  std::vector<std::string> programs;
  for (int i = 0; i < 10; ++i) {
    programs.push_back("y[i] := x[i] * " + std::to_string(i + 3) + " + 0.125");
    runBoth(programs.back());
    const auto s = einjit::cacheStatus();
    CHECK(s.diskBytes <= l.diskBytes + one); // entries differ slightly in size
    CHECK(s.diskEntries >= 1);
    CHECK(s.diskEntries <= 4);
  }
  CHECK(einjit::cacheStatus().diskEvicted >= 6);
  // The most recent entry survived: a hit.
  const std::int64_t hits = diskHits();
  einjit::clearCaches();
  runBoth(programs.back());
  CHECK(diskHits() == hits + 1);
  // Clearing deletes every entry and einjit's temporary files, not the secret and not files
  // einjit did not name.
  const DiskCache::Secret secret = readSecret(t.path);
  spit(t.path / "notes.txt", "mine");
  spit(t.path / "0123456789abcdef.txt", "mine");
  spit(t.path / ".tmp.0123456789abcdef.o", "mine");
  spit(t.path / ".einjit-tmp.0123456789abcdef.o.1.1", "a crashed writer's");
  CHECK(einjit::clearCaches(true) >= 1);
  CHECK(entries(t.path).empty());
  CHECK(fs::exists(t.path / "notes.txt"));
  CHECK(fs::exists(t.path / "0123456789abcdef.txt"));
  CHECK(fs::exists(t.path / ".tmp.0123456789abcdef.o"));
  CHECK(!fs::exists(t.path / ".einjit-tmp.0123456789abcdef.o.1.1"));
  CHECK(einjit::cacheStatus().diskEntries == 0);
  CHECK(readSecret(t.path) == secret);
  const std::int64_t builds = compiled();
  runBoth(programs.back());
  CHECK(compiled() == builds + 1);
}

namespace {

long residentKiB() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

} // namespace

TEST_CASE("cache: distinct compiles keep the resident set flat (each module's JITDylib removed)") {
  // 5,000 distinct small kernels (about 30 s; 1,000 under AddressSanitizer; or
  // $EINJIT_RSS_COMPILES), each compiled, called once and dropped, with the process cache
  // bounded to 16 modules and the disk cache off. Before each module's JITDylib was removed,
  // the resident set grew about 11 KiB a compile (51 MiB over these 4,500).
#if defined(__SANITIZE_ADDRESS__)
  int total = 1000;
#else
  int total = 5000;
#endif
  if (const char* n = std::getenv("EINJIT_RSS_COMPILES")) total = std::max(std::atoi(n), 100);
  UseCache use("");
  einjit::CacheLimits l = einjit::cacheLimits();
  l.memoryModules = 16;
  einjit::setCacheLimits(l);
  Tensor x = Tensor::random({16}, DType::f64, 1);
  const int warm = std::max(total / 10, 50);
  long atWarm = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < total; ++i) {
    if (i == warm) atWarm = residentKiB();
    Kernel k = einjit::compile("y[i] := x[i] * " + std::to_string(i + 1) + ".5", on(Device::cpu()));
    Tensor y = k(x);
    REQUIRE(y.get({3}) == doctest::Approx(x.get({3}) * (i + 1.5)));
  }
  const long grown = residentKiB() - atWarm;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(total << " compiles in " << s << " s; resident set grew " << grown
                << " KiB after the first " << warm);
  // Generous: 4 MiB plus 2 KiB a compile (the leak was 11).
  CHECK(grown < 4 * 1024 + (total - warm) * 2);
}

TEST_CASE("cache: 8 threads compile and call the same and different kernels, evicting as they go") {
  TempPath t("threads");
  UseCache use(t.path);
  einjit::CacheLimits l = einjit::cacheLimits();
  l.memoryModules = 2; // constant eviction in the process cache
  einjit::setCacheLimits(l);
  const std::vector<std::string> programs = {
      "C[i,k] := A[i,j] * B[j,k]",      "y[i] := exp(A[i,j]) * B[j,i]",
      "(max) y[i] := A[i,j] + B[j,i]",  "y[i,j] := (A[k,i] - B[k,j]) ^ 2",
      "y[i] := A[i,j] * 0.75 + B[i,j]", "(min) y[j] := A[i,j] - B[j,i] * 2"};
  const std::vector<std::int64_t> sizes = {9, 17, 24};
  // Reference results from the interpreter.
  std::vector<std::vector<std::vector<double>>> want(programs.size());
  std::vector<Tensor> As, Bs;
  for (std::int64_t n : sizes) {
    As.push_back(Tensor::random({n, n}, DType::f64, static_cast<std::uint64_t>(n)));
    Bs.push_back(Tensor::random({n, n}, DType::f64, static_cast<std::uint64_t>(n + 100)));
  }
  for (std::size_t p = 0; p < programs.size(); ++p)
    for (std::size_t s = 0; s < sizes.size(); ++s)
      want[p].push_back(Tensor(einjit::compile(programs[p], on(Device::reference()))
                                   .call({{"A", As[s]}, {"B", Bs[s]}})[std::size_t{0}])
                            .toVector());
  einjit::Options small = on(Device::cpu());
  small.maxVariants = 2; // constant eviction in the shared kernels too
  std::vector<Kernel> shared;
  for (const auto& p : programs) shared.push_back(einjit::compile(p, small));
  std::atomic<int> bad{0}, calls{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th)
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 24; ++rep) {
        const std::size_t p = static_cast<std::size_t>(th + rep) % programs.size();
        const std::size_t s = static_cast<std::size_t>(th * 7 + rep) % sizes.size();
        // Alternately a kernel shared by every thread and one of the thread's own.
        Kernel own = einjit::compile(programs[p], on(Device::cpu()));
        const Kernel& k = rep % 2 ? shared[p] : own;
        auto got = Tensor(k.call({{"A", As[s]}, {"B", Bs[s]}})[std::size_t{0}]).toVector();
        double worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, std::fabs(got[i] - want[p][s][i]) /
                                      std::max(1.0, std::fabs(want[p][s][i])));
        if (got.size() != want[p][s].size() || worst > 1e-10) ++bad;
        ++calls;
        if (rep % 8 == 7) einjit::clearCaches();
      }
    });
  for (auto& th : threads) th.join();
  CHECK(calls == 8 * 24);
  CHECK(bad == 0);
  CHECK(einjit::cacheStatus().problem.empty());
}

TEST_CASE("cache: two processes sharing one disk cache compute the interpreter's results") {
  TempPath t("procs");
  const std::vector<std::string> programs = {
      "y[i] := x[i] * 3.5 - x[i]", "y[i] := x[i,j] * w[j]", "(max) y[i] := x[i,j] + w[j]",
      "y[i] := exp(x[i]) + w[i]", "y[i,j] := x[i,j] * w[j] - 2"};
  const std::vector<std::string> shapes = {
      "--shape x=40", "--shape x=30x20 --shape w=20", "--shape x=30x20 --shape w=20",
      "--shape x=50 --shape w=50", "--shape x=12x9 --shape w=9"};
  // Each process runs every program twice with --check (the JIT against the float64
  // interpreter) in its own order; both start at once on an empty cache.
  std::string script = "export EINJIT_CACHE_DIR='" + t.path.string() + "'; ";
  for (int proc = 0; proc < 2; ++proc) {
    script += "( ";
    for (int rep = 0; rep < 2; ++rep)
      for (std::size_t i = 0; i < programs.size(); ++i) {
        const std::size_t p = proc == 0 ? i : programs.size() - 1 - i;
        script += std::string(EINJIT_CLI) + " run --dtype f64 --check '" + programs[p] + "' " +
                  shapes[p] + " >>'" + t.path.string() + ".log" + std::to_string(proc) +
                  "' 2>&1 || echo FAILED >>'" + t.path.string() + ".log" + std::to_string(proc) +
                  "'; ";
      }
    script += ") & ";
  }
  script += "wait";
  REQUIRE(std::system(("bash -c \"" + script + "\"").c_str()) == 0);
  for (int proc = 0; proc < 2; ++proc) {
    const fs::path log = t.path.string() + ".log" + std::to_string(proc);
    const std::string text = slurp(log);
    CAPTURE(text);
    CHECK(text.find("FAILED") == std::string::npos);
    CHECK(text.find("warning") == std::string::npos);
    std::size_t passes = 0;
    for (std::size_t at = text.find("check: PASS"); at != std::string::npos;
         at = text.find("check: PASS", at + 1))
      ++passes;
    CHECK(passes == 2 * programs.size());
    fs::remove(log);
  }
  // Every program left one authentic entry, which a third process loads.
  CHECK(entries(t.path).size() == programs.size());
  Shell third = runShell("EINJIT_CACHE_DIR='" + t.path.string() + "' " + std::string(EINJIT_CLI) +
                         " explain --dtype f64 '" + programs[1] + "' " + shapes[1]);
  CHECK(third.status == 0);
  CHECK(third.out.find("# code: disk cache") != std::string::npos);
}

#endif // EINJIT_HAVE_LLVM

TEST_CASE("cache: builds without a keyed hash say so and do not use the disk") {
  std::string why;
  const bool ok = DiskCache::supported(&why);
#if EINJIT_HAVE_LLVM
  CHECK(ok);
  CHECK(why.empty());
#else
  CHECK(!ok);
  CHECK(why.find("keyed hash") != std::string::npos);
  TempPath t("nohash");
  UseCache use(t.path);
  CHECK(DiskCache::instance().read("o", "k").empty());
  DiskCache::instance().write("o", "k", "payload");
  CHECK(!fs::exists(t.path));
  CHECK(einjit::cacheStatus().problem == why);
#endif
}

TEST_CASE("cache: einjit cache info and clear; limits from the environment") {
  TempPath t("cli");
  const std::string cli = "EINJIT_CACHE_DIR='" + t.path.string() + "' " + std::string(EINJIT_CLI);
  Shell info = runShell("EINJIT_CACHE_MEMORY=7 EINJIT_CACHE_DISK_MB=3 " + cli + " cache info");
  CHECK(info.status == 0);
  CHECK(info.out.find("directory: " + t.path.string() + "\n") != std::string::npos);
  CHECK(info.out.find("(limit 3145728)") != std::string::npos);
  CHECK(info.out.find("in-memory modules per backend: at most 7") != std::string::npos);
  std::string why;
  if (DiskCache::supported(&why)) {
    CHECK(info.out.find("not used") == std::string::npos);
#if EINJIT_HAVE_LLVM
    CHECK(runShell(cli + " run 'y[i] := x[i] * 5.5' --shape x=9").status == 0);
    CHECK(entries(t.path).size() == 1);
    Shell clear = runShell(cli + " cache clear");
    CHECK(clear.status == 0);
    CHECK(clear.out == "deleted 1 entry from " + t.path.string() + "\n");
    CHECK(entries(t.path).empty());
#endif
  } else {
    CHECK(info.out.find("not used: " + why) != std::string::npos);
    Shell clear = runShell(cli + " cache clear");
    CHECK(clear.status == 1);
    CHECK(clear.out.find("the disk cache is not used: " + why) != std::string::npos);
  }
  // A limit that is not a positive whole number: one warning, the default.
  Shell bad = runShell("EINJIT_CACHE_MEMORY=lots " + cli + " cache info");
  CHECK(bad.status == 0);
  CHECK(bad.out.find("einjit: warning: EINJIT_CACHE_MEMORY='lots' is not a whole number from 1 "
                     "to 1073741824; using 256") != std::string::npos);
  CHECK(bad.out.find("in-memory modules per backend: at most 256") != std::string::npos);
  Shell zero = runShell("EINJIT_CACHE_DISK_MB=0 " + cli + " cache info");
  CHECK(zero.out.find("EINJIT_CACHE_DISK_MB='0' is not a whole number") != std::string::npos);
  Shell off = runShell("EINJIT_CACHE_DIR=off " + std::string(EINJIT_CLI) + " cache clear");
  CHECK(off.status == 0);
  CHECK(off.out == "the disk cache is off (EINJIT_CACHE_DIR=off): nothing to delete\n");
  Shell wrong = runShell(cli + " cache purge");
  CHECK(wrong.status == 2);
  CHECK(wrong.out == "einjit cache takes 'info' or 'clear'\n");
}
