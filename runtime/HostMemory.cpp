#include "runtime/HostMemory.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EINJIT_KEEP_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EINJIT_KEEP_BLOCKS 0
#endif
#endif
#ifndef EINJIT_KEEP_BLOCKS
#define EINJIT_KEEP_BLOCKS 1
#endif

namespace einjit::runtime {

namespace {

constexpr std::size_t kAlignment = 64; // a cache line, and any vector load emitted
constexpr std::size_t kPage = 4096;    // sizes are rounded to pages before matching
// Smaller blocks: the C library reuses them. Its threshold for mapping a block of its own (and
// for giving the top of the heap back) starts at 128 KiB: a 64-256 KiB output (the README
// demo's y and dx) was mapped or trimmed and faulted in again at every call.
constexpr std::size_t kKeepMin = 64 << 10;
constexpr std::size_t kKeepMax = 256u << 20; // bytes kept in all

struct Block {
  void* p;
  std::size_t bytes;
};

struct Kept {
  std::mutex mu;
  std::vector<Block> blocks; // least recently freed first
  std::size_t bytes = 0;
};

Kept& kept() {
  static Kept* k = new Kept; // never destroyed: tensors may be freed during static destruction
  return *k;
}

std::size_t rounded(std::size_t bytes) {
  const std::size_t b = std::max<std::size_t>(bytes, 1);
  return b >= kKeepMin ? (b + kPage - 1) / kPage * kPage : b;
}

void release(const Block& b) { ::operator delete (b.p, std::align_val_t{kAlignment}); }

} // namespace

void* allocateHost(std::size_t bytes) {
  const std::size_t size = rounded(bytes);
  if (EINJIT_KEEP_BLOCKS && size >= kKeepMin) {
    Kept& k = kept();
    std::lock_guard lock(k.mu);
    for (std::size_t q = k.blocks.size(); q-- > 0;)
      if (k.blocks[q].bytes == size) {
        void* p = k.blocks[q].p;
        k.bytes -= size;
        k.blocks.erase(k.blocks.begin() + static_cast<std::ptrdiff_t>(q));
        return p;
      }
  }
  return ::operator new (size, std::align_val_t{kAlignment});
}

void freeHost(void* p, std::size_t bytes) noexcept {
  const std::size_t size = rounded(bytes);
  if (!EINJIT_KEEP_BLOCKS || size < kKeepMin || size > kKeepMax) {
    release({p, size});
    return;
  }
  std::vector<Block> drop;
  {
    Kept& k = kept();
    std::lock_guard lock(k.mu);
    try {
      k.blocks.push_back({p, size});
    } catch (...) {
      drop.push_back({p, size}); // no room to remember it: give it back
    }
    if (drop.empty()) k.bytes += size;
    std::size_t n = 0;
    while (k.bytes > kKeepMax && n < k.blocks.size()) k.bytes -= k.blocks[n++].bytes;
    for (std::size_t q = 0; q < n; ++q) release(k.blocks[q]);
    k.blocks.erase(k.blocks.begin(), k.blocks.begin() + static_cast<std::ptrdiff_t>(n));
  }
  for (const Block& b : drop) release(b);
}

void releaseHostBlocks() noexcept {
  std::vector<Block> all;
  {
    Kept& k = kept();
    std::lock_guard lock(k.mu);
    all.swap(k.blocks);
    k.bytes = 0;
  }
  for (const Block& b : all) release(b);
}

std::size_t keptHostBytes() noexcept {
  Kept& k = kept();
  std::lock_guard lock(k.mu);
  return k.bytes;
}

} // namespace einjit::runtime
