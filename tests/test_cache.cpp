// The compiled-code caches as an attacker and an unlucky user would meet them
// (docs/RELIABILITY.md): the disk cache's permissions, ownership checks and keyed MAC (forged
// entries are never loaded: a working forgery, accepted under the real secret, computes a
// different result, and every other forgery leaves the kernel computing the interpreter's
// values), entries that are links, FIFOs, directories, truncated, mutated or oversized (a miss
// that rebuilds and replaces, never a hang or an error), the secret key, refused directories.
// A build without LLVM has no keyed hash, hence no disk cache: it checks only that. The bounds,
// threads and processes are in test_cache_limits.cpp.
#include "CacheSupport.h"
#include "runtime/CompileCache.h"

#include <chrono>
#include <fcntl.h>
#include <random>

using namespace einjit::test;

#if EINJIT_HAVE_LLVM

namespace {

// The program whose entry the fault tests attack, and one that computes something else.
const std::string kVictim = "y[i] := x[i] * 1.25 + 0.5";
const std::string kOther = "y[i] := x[i] * 7 + 0.5";

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
  v.bytes = readFile(v.entry);
  v.parsed = parseEntry(v.bytes);
  return v;
}

void checkAuthentic(const fs::path& dir, const Victim& v);

// After a fault: the victim computes the interpreter's values (it was rebuilt), the fault was
// counted as a rejection, and the entry is authentic again so that the next process (here: the
// next load after clearing memory) hits it.
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
  CHECK(DiskCache::decode(readSecret(dir), "o", v.parsed.key, readFile(v.entry), &payload));
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
    Parsed o = parseEntry(readFile(es[0]));
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
    writeFile(v.entry, DiskCache::encode(secret, "o", v.parsed.key, forged));
    einjit::clearCaches();
    CHECK(close(runBoth(kOther), other));
    einjit::clearCaches();
    Tensor x = Tensor::random({37}, DType::f64, 7);
    CHECK(close(Tensor(einjit::compile(kVictim, on(Device::cpu()))(x)).toVector(), other));
  }
  SUBCASE("the old format with a valid FNV checksum") {
    writeFile(v.entry, oldStyleEntry(v.parsed.key, forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("the new format, MAC under another secret") {
    DiskCache::Secret guess{};
    guess[0] = 1;
    writeFile(v.entry, DiskCache::encode(guess, "o", v.parsed.key, forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("the new format, the authentic MAC copied from the real entry") {
    std::string bytes =
        v.bytes.substr(0, 24) + v.parsed.key + forged + v.bytes.substr(v.bytes.size() - 32);
    const std::uint64_t len = forged.size();
    std::memcpy(bytes.data() + 16, &len, 8);
    writeFile(v.entry, bytes);
    checkRebuilt(t.path, v);
  }
  SUBCASE("an authentic entry of another kind (a cubin's MAC) or another key") {
    writeFile(v.entry, DiskCache::encode(secret, "cubin", v.parsed.key, forged));
    checkRebuilt(t.path, v);
    writeFile(v.entry, DiskCache::encode(secret, "o", v.parsed.key + " ", forged));
    checkRebuilt(t.path, v);
  }
  SUBCASE("a random payload with a forged header: rejected and rebuilt, not failing for good") {
    std::mt19937_64 rng(5);
    std::string junk(4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    writeFile(v.entry, oldStyleEntry(v.parsed.key, junk));
    checkRebuilt(t.path, v);
    std::string bytes = DiskCache::encode(secret, "o", v.parsed.key, junk);
    for (std::size_t i = bytes.size() - 32; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(rng());
    writeFile(v.entry, bytes);
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
    writeFile(elsewhere.path / "copy", v.bytes);
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
    writeFile(v.entry, v.bytes.substr(0, len));
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
    writeFile(v.entry, bad);
    checkRebuilt(t.path, v);
  }
  writeFile(v.entry, v.bytes + "x");
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
    writeFile(v.entry, bad);
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
    writeFile(t.path / "elsewhere", readFile(t.path / "secret"));
    fs::permissions(t.path / "elsewhere", fs::perms::owner_read | fs::perms::owner_write);
    fs::remove(t.path / "secret");
    fs::create_symlink(t.path / "elsewhere", t.path / "secret");
    reopen();
    CHECK(S_ISREG(modeOf(t.path / "secret")));
    CHECK((modeOf(t.path / "secret") & 0777) == 0600);
    checkAuthentic(t.path, v);
  }
  SUBCASE("the wrong size: replaced") {
    writeFile(t.path / "secret", "short");
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
    writeFile(t.path, "not a directory");
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
  const std::string text = readFile(log.path);
  CAPTURE(text);
  const std::string want = "einjit: warning: not using the kernel cache directory '" +
                           t.path.string() + "': it is writable by its group or by others";
  const std::size_t first = text.find(want);
  CHECK(first != std::string::npos);
  CHECK(text.find(want, first + 1) == std::string::npos);
}

// A cubin takes the CUDA backend's path through the cache (runtime::CompileCache of kind
// "cubin": read the disk entry or build, then load, rebuilding what does not load), here with a
// loader that, like cuModuleLoadData, accepts only a well-formed image and raises otherwise. So
// it runs without a GPU. Tampered, truncated and forged cubin entries are misses that rebuild
// and replace; an authenticated entry whose image does not load (a compiler changed without the
// key) is rebuilt too. Nothing but the built image is ever loaded, and nothing throws.
TEST_CASE("cache: a tampered, truncated or forged cubin is never loaded: a miss or a rebuild") {
  TempPath t("cubin");
  UseCache use(t.path);
  const std::string key = "einjit cuda codegen test nvrtc 13.0 arch 90\n__global__ void k() {}";
  const std::string image = std::string("\x7f" "ELF cubin sm_90 ") + std::string(300, 'c');
  int builds = 0, loadFailures = 0;
  einjit::runtime::CompileCache<std::string> cache("cubin");
  auto fetch = [&](einjit::runtime::CompileCache<std::string>::Origin* origin) {
    auto lock = cache.lock();
    auto build = [&] {
      ++builds;
      return image;
    };
    std::string got = cache.readOrBuild(key, build, *origin);
    return cache.loadOrRebuild(key, std::move(got), *origin, build, [&](const std::string& img) {
      if (img != image) {
        ++loadFailures;
        throw einjit::Error("CUDA_ERROR_INVALID_IMAGE");
      }
      return std::make_shared<const std::string>(img);
    });
  };
  using Origin = einjit::runtime::CompileCache<std::string>::Origin;
  Origin origin{};
  REQUIRE(*fetch(&origin) == image);
  CHECK(origin == Origin::compiled);
  const fs::path entry = t.path / DiskCache::fileName("cubin", key);
  REQUIRE(fs::is_regular_file(entry));
  const std::string authentic = readFile(entry);
  REQUIRE(*fetch(&origin) == image);
  CHECK(origin == Origin::disk);
  const DiskCache::Secret secret = readSecret(t.path);

  // Each fault: the built image is loaded (never the forged one), and the entry is authentic
  // again afterwards (the next fetch is a disk hit that builds nothing).
  auto check = [&](const std::string& what, const std::string& bytes, bool loadsAndFails) {
    CAPTURE(what);
    writeFile(entry, bytes);
    const int b0 = builds, f0 = loadFailures;
    Origin o{};
    CHECK(*fetch(&o) == image);
    CHECK(o == Origin::compiled);
    CHECK(builds == b0 + 1);
    CHECK(loadFailures == f0 + (loadsAndFails ? 1 : 0));
    CHECK(readFile(entry) == authentic);
    CHECK(*fetch(&o) == image);
    CHECK(o == Origin::disk);
    CHECK(builds == b0 + 1);
  };
  const std::size_t n = authentic.size();
  for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{24},
                          std::size_t{56}, n / 2, n - 33, n - 1})
    check("truncated to " + std::to_string(len), authentic.substr(0, len), false);
  for (std::size_t at : {std::size_t{0}, std::size_t{9}, std::size_t{17}, std::size_t{30},
                         n - 100, n - 40, n - 1}) {
    std::string bad = authentic;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    check("byte " + std::to_string(at) + " flipped", bad, false);
  }
  check("a byte appended", authentic + "x", false);
  const std::string forged = std::string("\x7f" "ELF cubin sm_90 ") + std::string(300, 'f');
  DiskCache::Secret guessed{};
  check("a forged image under a guessed secret", DiskCache::encode(guessed, "cubin", key, forged),
        false);
  check("a forged image with the authentic MAC",
        authentic.substr(0, n - 32 - forged.size()) + forged + authentic.substr(n - 32), false);
  check("an authentic CPU object's entry of the same key",
        DiskCache::encode(secret, "o", key, forged), false);
  // Authenticated (someone with the secret, or a compiler that changed without the key) but
  // not loadable: the load fails, and the image is rebuilt and replaced.
  check("an authenticated image that does not load", DiskCache::encode(secret, "cubin", key, forged),
        true);
  check("an authenticated empty image", DiskCache::encode(secret, "cubin", key, ""), false);
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
