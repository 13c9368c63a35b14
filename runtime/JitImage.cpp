#include "runtime/JitImage.h"

#include "einjit/Error.h"

#include <cstdint>

namespace einjit::runtime {

namespace {

constexpr std::string_view kMagic = "ejobjs";

void putU64(std::string& out, std::uint64_t v) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

} // namespace

std::string packObjects(const std::vector<std::string>& objects) {
  std::string out(kMagic);
  putU64(out, objects.size());
  for (const std::string& o : objects) {
    putU64(out, o.size());
    out += o;
  }
  return out;
}

std::vector<std::string_view> unpackObjects(std::string_view image) {
  auto bad = [] { return Error("LLVM JIT: a compiled-code image is malformed"); };
  if (image.substr(0, kMagic.size()) != kMagic) throw bad();
  std::size_t at = kMagic.size();
  auto getU64 = [&] {
    if (image.size() - at < 8) throw bad();
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < 8; ++b)
      v |= std::uint64_t{static_cast<unsigned char>(image[at + b])} << (8 * b);
    at += 8;
    return v;
  };
  const std::uint64_t n = getU64();
  if (n > image.size()) throw bad(); // each object takes at least its length's 8 bytes
  std::vector<std::string_view> objects;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t len = getU64();
    if (len > image.size() - at) throw bad();
    objects.push_back(image.substr(at, len));
    at += len;
  }
  if (at != image.size()) throw bad();
  return objects;
}

} // namespace einjit::runtime
