#include "runtime/DiskCache.h"

#include "runtime/Caches.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#if EINJIT_HAVE_LLVM
#include <llvm-c/blake3.h>
#endif

namespace einjit::runtime {

namespace {

constexpr char kMagic[8] = {'E', 'I', 'N', 'J', 'I', 'T', 'C', '2'};
constexpr std::size_t kHeader = 24; // magic, key length, payload length
constexpr std::size_t kMacBytes = 32;
constexpr const char* kSecretName = "secret";
constexpr const char* kTmpPrefix = ".einjit-tmp.";
constexpr std::time_t kStaleTmpSeconds = 3600;

std::string errnoText(int e) { return std::strerror(e); }

std::string modeText(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

void putU64(std::string& s, std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  s.append(b, 8);
}

std::uint64_t getU64(std::string_view s, std::size_t at) {
  std::uint64_t v = 0;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

// The MAC of an entry's bytes (everything before the MAC) for one kind.
std::array<unsigned char, kMacBytes> mac(const DiskCache::Secret& secret, std::string_view kind,
                                         std::string_view body) {
  std::array<unsigned char, kMacBytes> out{};
#if EINJIT_HAVE_LLVM
  llvm_blake3_hasher h;
  llvm_blake3_hasher_init_keyed(&h, secret.data());
  static constexpr char tag[] = "einjit disk cache entry v2";
  llvm_blake3_hasher_update(&h, tag, sizeof tag); // with its NUL: a separator
  std::string k;
  putU64(k, kind.size());
  k.append(kind);
  llvm_blake3_hasher_update(&h, k.data(), k.size());
  llvm_blake3_hasher_update(&h, body.data(), body.size());
  llvm_blake3_hasher_finalize(&h, out.data(), out.size());
#else
  (void)secret, (void)kind, (void)body;
#endif
  return out;
}

bool sameBytes(const unsigned char* a, const unsigned char* b, std::size_t n) {
  unsigned char diff = 0; // no early exit
  for (std::size_t i = 0; i < n; ++i) diff = static_cast<unsigned char>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

bool readAll(int fd, char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  // The file must end here (it did not grow since fstat).
  char extra;
  ssize_t r;
  do r = ::read(fd, &extra, 1);
  while (r < 0 && errno == EINTR);
  return r == 0;
}

bool writeAll(int fd, const char* data, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

bool randomBytes(unsigned char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  if (got == n) return true;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool ok = true;
  for (got = 0; got < n;) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ok = false;
      break;
    }
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return ok;
}

// The kinds of entry (file suffixes). Listing and clearing touch only files named like an
// entry of a known kind or like einjit's temporaries, so a cache directory pointed at a folder
// with other files leaves them alone.
bool knownKind(std::string_view kind) { return kind == "o" || kind == "cubin"; }

// "<16 lower-case hex digits>.<kind>": an entry's file name.
bool isEntryName(std::string_view name) {
  if (name.size() < 18 || name[16] != '.') return false;
  for (std::size_t i = 0; i < 16; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i])) ||
        std::isupper(static_cast<unsigned char>(name[i])))
      return false;
  return knownKind(name.substr(17));
}

// mkdir -p with mode 0700 for the directories it creates.
void makeDirectories(const std::string& dir) {
  for (std::size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    std::string prefix = dir.substr(0, at);
    if (prefix.empty() || prefix.back() == '/') continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return;
  }
}

} // namespace

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

// --- entry format ---------------------------------------------------------------------------

std::string DiskCache::encode(const Secret& secret, std::string_view kind, const std::string& key,
                              const std::string& payload) {
  std::string s;
  s.reserve(kHeader + key.size() + payload.size() + kMacBytes);
  s.append(kMagic, 8);
  putU64(s, key.size());
  putU64(s, payload.size());
  s += key;
  s += payload;
  auto m = mac(secret, kind, s);
  s.append(reinterpret_cast<const char*>(m.data()), m.size());
  return s;
}

bool DiskCache::decode(const Secret& secret, std::string_view kind, const std::string& key,
                       std::string_view bytes, std::string* payload) {
  if (bytes.size() < kHeader + kMacBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) return false;
  const std::uint64_t keyLen = getU64(bytes, 8), len = getU64(bytes, 16);
  const std::uint64_t room = bytes.size() - kHeader - kMacBytes;
  if (keyLen > room || len != room - keyLen) return false;
  std::string_view body = bytes.substr(0, bytes.size() - kMacBytes);
  auto want = mac(secret, kind, body);
  if (!sameBytes(want.data(), reinterpret_cast<const unsigned char*>(body.data() + body.size()),
                 kMacBytes))
    return false;
  if (bytes.substr(kHeader, keyLen) != key) return false; // another key with the same file name
  if (payload) *payload = std::string(bytes.substr(kHeader + keyLen, len));
  return true;
}

std::string DiskCache::fileName(std::string_view kind, const std::string& key) {
  return hex(fnv1a(key)) + "." + std::string(kind);
}

std::string DiskCache::checkDirectory(const struct stat& st, uid_t uid) {
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != uid)
    return "it belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(uid) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "it is writable by its group or by others (mode " + modeText(st.st_mode) +
           "; make it private with chmod 700)";
  return "";
}

// --- the instance ---------------------------------------------------------------------------

DiskCache& DiskCache::instance() {
  static DiskCache* c = new DiskCache; // never destroyed: kernels may compile during exit
  return *c;
}

DiskCache::DiskCache()
    : dir_(defaultDirectory()), uid_(::geteuid()), maxBytes_(currentLimits().diskBytes) {}

bool DiskCache::supported(std::string* why) {
#if EINJIT_HAVE_LLVM
  if (why) why->clear();
  return true;
#else
  if (why)
    *why = "this build has no keyed hash to authenticate entries with (LLVM's BLAKE3; built "
           "without LLVM), so compiled code is not cached on disk";
  return false;
#endif
}

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

void DiskCache::close() {
  if (dirFd_ >= 0) ::close(dirFd_);
  dirFd_ = -1;
  checked_ = false;
  scanned_ = false;
  problem_.clear();
}

void DiskCache::refuse(const std::string& why) {
  if (dirFd_ >= 0) ::close(dirFd_);
  dirFd_ = -1;
  problem_ = why;
  warnOnce("not using the kernel cache directory '" + dir_ + "': " + why +
           "; kernels are compiled but not cached on disk (see docs/RELIABILITY.md)");
}

bool DiskCache::ready() {
  if (checked_) return dirFd_ >= 0;
  checked_ = true;
  problem_.clear();
  if (dir_.empty()) return false;
  std::string why;
  if (!supported(&why)) {
    problem_ = why; // a property of the build, not worth a warning
    return false;
  }
  makeDirectories(dir_);
  dirFd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd_ < 0) {
    refuse("it cannot be opened (" + errnoText(errno) + ")");
    return false;
  }
  struct stat st;
  if (::fstat(dirFd_, &st) != 0) {
    refuse("fstat failed (" + errnoText(errno) + ")");
    return false;
  }
  if (std::string bad = checkDirectory(st, uid_); !bad.empty()) {
    refuse(bad);
    return false;
  }
  if (!loadSecret(&why)) {
    refuse(why);
    return false;
  }
  return true;
}

// A new secret in a temporary file, then linked into place (replace: renamed over whatever is
// there). Either way the caller reads back what the directory holds.
bool DiskCache::createSecret(bool replace, std::string* why) {
  Secret fresh;
  if (!randomBytes(fresh.data(), fresh.size())) {
    *why = "no random bytes for its secret key (getrandom and /dev/urandom failed)";
    return false;
  }
  const std::string tmp = std::string(kTmpPrefix) + kSecretName + "." + std::to_string(::getpid()) +
                          "." + std::to_string(tmpCounter_++);
  int fd =
      ::openat(dirFd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "its secret key cannot be created (" + errnoText(errno) + ")";
    return false;
  }
  bool ok =
      writeAll(fd, reinterpret_cast<const char*>(fresh.data()), fresh.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (ok) {
    if (replace)
      ok = replaceAt(tmp, kSecretName);
    else
      ok = ::linkat(dirFd_, tmp.c_str(), dirFd_, kSecretName, 0) == 0 || errno == EEXIST;
  }
  const int err = errno;
  ::unlinkat(dirFd_, tmp.c_str(), 0);
  if (!ok) *why = "its secret key cannot be stored (" + errnoText(err) + ")";
  return ok;
}

bool DiskCache::loadSecret(std::string* why) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    int fd = ::openat(dirFd_, kSecretName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno != ENOENT && errno != ELOOP && errno != ENXIO && errno != EACCES) {
        *why = "its secret key cannot be read (" + errnoText(errno) + ")";
        return false;
      }
      // Absent: create it (another process may win; its key is then read back). A link or
      // something unreadable: replace it.
      if (!createSecret(errno != ENOENT, why)) return false;
      continue;
    }
    struct stat st;
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid_ &&
              (st.st_mode & 077) == 0 && st.st_size == static_cast<off_t>(secret_.size()) &&
              readAll(fd, reinterpret_cast<char*>(secret_.data()), secret_.size());
    ::close(fd);
    if (ok) return true;
    // Not a private regular file of this user with 32 bytes: it may have been read by others,
    // so it is replaced (entries made under it become misses and are rebuilt).
    if (!createSecret(true, why)) return false;
  }
  *why = "its secret key keeps changing under it";
  return false;
}

// Renames `from` over `to` in the directory; an empty directory at `to` is removed first.
bool DiskCache::replaceAt(const std::string& from, const std::string& to) {
  if (::renameat(dirFd_, from.c_str(), dirFd_, to.c_str()) == 0) return true;
  if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST) return false;
  if (::unlinkat(dirFd_, to.c_str(), AT_REMOVEDIR) != 0) return false;
  return ::renameat(dirFd_, from.c_str(), dirFd_, to.c_str()) == 0;
}

std::string DiskCache::read(std::string_view kind, const std::string& key) {
  if (!knownKind(kind)) return "";
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (!ready()) return "";
    const std::string name = fileName(kind, key);
    int fd =
        ::openat(dirFd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      if (errno == ENOENT)
        ++stats_.misses;
      else
        ++stats_.rejected; // a link (ELOOP), a socket (ENXIO), ...
      return "";
    }
    struct stat st;
    std::string data, payload;
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid_ &&
              st.st_size >= 0 && static_cast<std::uint64_t>(st.st_size) <= kMaxEntryBytes;
    if (ok) {
      data.resize(static_cast<std::size_t>(st.st_size));
      ok = readAll(fd, data.data(), data.size()) && decode(secret_, kind, key, data, &payload);
    }
    if (ok) ::futimens(fd, nullptr); // most recently used, for eviction
    ::close(fd);
    if (!ok) {
      ++stats_.rejected;
      return "";
    }
    ++stats_.hits;
    return payload;
  } catch (const std::exception&) { // bad_alloc
    ++stats_.rejected;
    return "";
  }
}

void DiskCache::write(std::string_view kind, const std::string& key, const std::string& payload) {
  if (!knownKind(kind) || kHeader + key.size() + payload.size() + kMacBytes > kMaxEntryBytes)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (!ready()) return;
    const std::string name = fileName(kind, key);
    const std::string bytes = encode(secret_, kind, key, payload);
    const std::string tmp =
        kTmpPrefix + name + "." + std::to_string(::getpid()) + "." + std::to_string(tmpCounter_++);
    int fd =
        ::openat(dirFd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    bool ok = writeAll(fd, bytes.data(), bytes.size());
    ok = ::close(fd) == 0 && ok;
    if (!ok || !replaceAt(tmp, name)) {
      ::unlinkat(dirFd_, tmp.c_str(), 0);
      return;
    }
    ++stats_.written;
    // The directory is listed at this process's first write, every 64th, and whenever the
    // running total would pass the limit (other processes' writes are seen at their scans).
    stats_.bytes += bytes.size();
    ++stats_.entries;
    if (++writesSinceScan_ >= 64 || !scanned_ || stats_.bytes > maxBytes_) scan(name, false);
  } catch (const std::exception&) {
  }
}

// Lists the directory: counts entries and bytes, deletes stale temporaries, and (evictAll, or
// over the limit) deletes entries, least recently used first, never `keep`.
void DiskCache::scan(const std::string& keep, bool evictAll) {
  int fd = ::dup(dirFd_);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  ::rewinddir(d);
  struct Entry {
    std::string name;
    std::uint64_t bytes;
    struct timespec mtime;
  };
  std::vector<Entry> entries;
  std::vector<std::string> stale;
  const std::time_t now = std::time(nullptr);
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    const bool entry = isEntryName(name);
    const bool tmp = name.substr(0, std::strlen(kTmpPrefix)) == kTmpPrefix;
    if (!entry && !tmp) continue;
    struct stat st;
    if (::fstatat(dirFd_, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (tmp) {
      if (evictAll || now - st.st_mtim.tv_sec > kStaleTmpSeconds) stale.emplace_back(name);
      continue;
    }
    if (S_ISDIR(st.st_mode)) continue;
    entries.push_back({std::string(name), static_cast<std::uint64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(d);
  for (const auto& n : stale) ::unlinkat(dirFd_, n.c_str(), 0);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.name < b.name;
  });
  std::int64_t count = static_cast<std::int64_t>(entries.size());
  for (const auto& e : entries) {
    if (!evictAll && total <= maxBytes_) break;
    if (e.name == keep) continue;
    if (::unlinkat(dirFd_, e.name.c_str(), 0) != 0) continue;
    total -= e.bytes;
    --count;
    ++stats_.evicted;
  }
  stats_.entries = count;
  stats_.bytes = total;
  scanned_ = true;
  writesSinceScan_ = 0;
}

std::int64_t DiskCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (!ready()) return 0;
    const std::int64_t before = stats_.evicted;
    scan("", true);
    const std::int64_t n = stats_.evicted - before;
    stats_.evicted = before; // cleared, not evicted
    return n;
  } catch (const std::exception&) {
    return 0;
  }
}

std::string DiskCache::directory() {
  std::lock_guard<std::mutex> lock(mu_);
  return dir_;
}

void DiskCache::setDirectory(std::string dir) {
  std::lock_guard<std::mutex> lock(mu_);
  close();
  dir_ = std::move(dir);
}

std::string DiskCache::problem() {
  std::lock_guard<std::mutex> lock(mu_);
  ready();
  return problem_;
}

void DiskCache::setMaxBytes(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  maxBytes_ = bytes;
}

void DiskCache::setExpectedOwner(uid_t uid) {
  std::lock_guard<std::mutex> lock(mu_);
  close();
  uid_ = uid;
}

DiskCache::Stats DiskCache::stats(bool list) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (list && ready()) scan("", false);
  } catch (const std::exception&) {
  }
  return stats_;
}

} // namespace einjit::runtime
