#pragma once
// The on-disk cache of compiled code (CPU object files, CUDA cubins), shared by the backends and
// trusted only as far as it is checked (docs/RELIABILITY.md has the whole contract):
//
// - Location: $EINJIT_CACHE_DIR, else $XDG_CACHE_HOME/einjit, else ~/.cache/einjit;
//   EINJIT_CACHE_DIR=off disables it. Missing directories are created 0700. A directory that is
//   not a directory, is not owned by the user, or is writable by its group or others is refused
//   (one warning on stderr) and not used: kernels compile and run, uncached.
// - Authenticity: a per-user secret of 32 random bytes (getrandom) in the directory's file
//   `secret` (0600, created atomically: a temporary file linked into place). Each entry ends with
//   a keyed BLAKE3 MAC under that secret over a domain tag, the entry kind, the header, the whole
//   key (which also fixes the code's symbol names) and the payload: an entry this user's einjit
//   did not write is never loaded. BLAKE3 is LLVM's (llvm-c/blake3.h); a build without LLVM
//   has no keyed hash linked, so its disk cache is off (supported() says so).
// - Reading: entries are opened with O_NOFOLLOW | O_NONBLOCK and fstat'ed; only a regular file
//   owned by the user and at most kMaxEntryBytes long is read. Anything else (a link, a FIFO, a
//   directory, a short, long or altered file, another key's entry) is a miss counted as
//   rejected; the caller rebuilds and write() replaces it.
// - Writing: a temporary file in the same directory (O_CREAT | O_EXCL | O_NOFOLLOW, 0600),
//   renamed over the entry: readers see a whole entry or none.
// - Bound: the least recently used entries (by modification time, which a hit refreshes) are
//   deleted until the directory's entries fit CacheLimits::diskBytes. The directory is listed
//   at a process's first write, every 64th, and whenever its running total would pass the
//   limit; temporary files left by a crashed writer are deleted (after an hour) then.
//
// One process-wide instance; every member is thread-safe and nothing throws (a cache that
// cannot be used only costs compile time).
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>

struct stat;

namespace einjit::runtime {

std::uint64_t fnv1a(std::string_view s);
std::string hex(std::uint64_t v); // 16 lower-case hex digits

// The largest entry read or written (header, key and payload): 64 MiB. A larger object is
// simply not cached.
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{64} << 20;

class DiskCache {
public:
  using Secret = std::array<unsigned char, 32>;

  static DiskCache& instance();
  // Whether this build can authenticate entries (it has a keyed hash); why not otherwise.
  static bool supported(std::string* why = nullptr);
  static std::string defaultDirectory();

  // The payload stored for (kind, key), or empty on a miss. kind names the entry's file suffix:
  // "o" (CPU object) or "cubin" (CUDA image); others are not cached.
  std::string read(std::string_view kind, const std::string& key);
  void write(std::string_view kind, const std::string& key, const std::string& payload);
  // Deletes every entry and stray temporary file (the secret stays); returns how many.
  std::int64_t clear();

  std::string directory();            // the configured directory ("" when off)
  void setDirectory(std::string dir); // "" turns it off; the next use checks it anew
  std::string problem();              // why the configured directory is not used ("" if it is)
  void setMaxBytes(std::uint64_t bytes);
  // Tests: the uid the directory and its files must belong to (default: geteuid()).
  void setExpectedOwner(uid_t uid);

  struct Stats {
    std::int64_t hits = 0, misses = 0, rejected = 0, written = 0, evicted = 0;
    std::int64_t entries = 0; // at the last listing, plus this process's writes since
    std::uint64_t bytes = 0;
  };
  // list: list the directory first (exact entries and bytes; evicts when over the limit).
  Stats stats(bool list = true);

  // The entry format, exposed for tests that forge entries: magic, key and payload lengths,
  // key, payload, then the MAC.
  static std::string encode(const Secret& secret, std::string_view kind, const std::string& key,
                            const std::string& payload);
  // The payload when `bytes` is a valid entry for (kind, key) under `secret`.
  static bool decode(const Secret& secret, std::string_view kind, const std::string& key,
                     std::string_view bytes, std::string* payload);
  static std::string fileName(std::string_view kind, const std::string& key);
  // Why a directory with this status cannot hold the cache for user `uid` ("" when it can).
  static std::string checkDirectory(const struct stat& st, uid_t uid);

private:
  DiskCache();
  bool ready(); // opens and checks the directory and the secret; under mu_
  bool loadSecret(std::string* why);
  bool createSecret(bool replace, std::string* why);
  bool replaceAt(const std::string& from, const std::string& to);
  void refuse(const std::string& why);
  void close();
  void scan(const std::string& keep, bool evictAll);

  std::mutex mu_;
  std::string dir_;
  int dirFd_ = -1;
  bool checked_ = false; // dirFd_/problem_ reflect dir_
  std::string problem_;
  Secret secret_{};
  uid_t uid_;
  std::uint64_t maxBytes_;
  std::uint64_t tmpCounter_ = 0;
  bool scanned_ = false; // the directory was listed since it was opened
  int writesSinceScan_ = 0;
  Stats stats_;
};

} // namespace einjit::runtime
