#include "Npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

namespace einjit::cli {

// Data is copied as the host holds it and labelled little-endian.
static_assert(std::endian::native == std::endian::little,
              "einjit's .npy I/O assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw Error(path + ": " + why);
}

// The value of 'key' in the header's Python dict literal, as written ("'<f4'", "False",
// "(3, 4)"); nullopt when the key is absent.
std::optional<std::string> field(const std::string& header, const std::string& key) {
  std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return std::nullopt;
  at = header.find(':', at);
  if (at == std::string::npos) return std::nullopt;
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  std::size_t end = at;
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos) return std::nullopt;
    ++end;
  } else if (at < header.size() && (header[at] == '\'' || header[at] == '"')) {
    end = header.find(header[at], at + 1);
    if (end == std::string::npos) return std::nullopt;
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  std::string v = header.substr(at, end - at);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

Shape parseShape(const std::string& path, const std::string& text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    bad(path, "the header's shape " + text + " is not a tuple");
  Shape s;
  std::size_t i = 1;
  while (i + 1 < text.size()) {
    while (i + 1 < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i + 1 >= text.size()) break;
    std::size_t j = i;
    std::int64_t v = 0;
    while (j + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
      if (v > (std::int64_t{1} << 50))
        bad(path, "an extent in the shape " + text + " is too large");
      v = v * 10 + (text[j] - '0');
      ++j;
    }
    if (j == i) bad(path, "the header's shape " + text + " is not a tuple of integers");
    s.push_back(v);
    i = j;
  }
  return s;
}

struct Descr {
  DType dtype;
  bool bigEndian;
};

Descr parseDescr(const std::string& path, const std::string& quoted) {
  std::string d = quoted.size() >= 2 ? quoted.substr(1, quoted.size() - 2) : quoted;
  if (d.size() == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    bool big = d[0] == '>';
    std::string t = d.substr(1);
    if (t == "f4") return {DType::f32, big};
    if (t == "f8") return {DType::f64, big};
    if (t == "i4") return {DType::i32, big};
    if (t == "i8") return {DType::i64, big};
    if (t == "V2") return {DType::bf16, false};
  }
  bad(path, "dtype '" + d +
                "' is not supported; einjit reads '<f4' (f32), '<f8' (f64), '<i4' (i32), '<i8' "
                "(i64) and '|V2' (bf16 bits), little- or big-endian");
}

std::string descrOf(DType t) {
  switch (t) {
  case DType::f32: return "<f4";
  case DType::f64: return "<f8";
  case DType::i32: return "<i4";
  case DType::i64: return "<i8";
  case DType::bf16: return "|V2";
  }
  return "?";
}

} // namespace

Tensor readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open it (") + std::strerror(errno) + ")");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) bad(path, "cannot read it");
  if (bytes.size() < kMagicSize + 4 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0)
    bad(path, "not a NumPy .npy file (it does not start with \\x93NUMPY)");
  auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i]));
  };
  const std::size_t major = byte(6);
  std::size_t headerLen = 0, start = 0;
  if (major == 1) {
    headerLen = byte(8) | byte(9) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(path, "the file ends inside its header");
    headerLen = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    start = 12;
  } else {
    bad(path, ".npy format version " + std::to_string(major) + " is not supported (1 to 3 are)");
  }
  if (bytes.size() < start + headerLen) bad(path, "the file ends inside its header");
  const std::string header = bytes.substr(start, headerLen);
  auto descr = field(header, "descr");
  auto order = field(header, "fortran_order");
  auto shapeText = field(header, "shape");
  if (!descr || !order || !shapeText)
    bad(path, "the header lacks 'descr', 'fortran_order' or 'shape'");
  if (*order != "False")
    bad(path, "the array is in Fortran order; save it in C order (np.ascontiguousarray)");
  Descr d = parseDescr(path, *descr);
  Shape shape = parseShape(path, *shapeText);
  std::size_t n = 1;
  for (std::int64_t e : shape) {
    if (e != 0 && n > (std::size_t{1} << 50) / static_cast<std::size_t>(e))
      bad(path, "the array has too many elements");
    n *= static_cast<std::size_t>(e);
  }
  const std::size_t size = dtypeSize(d.dtype);
  const std::size_t have = bytes.size() - start - headerLen;
  if (have != n * size)
    bad(path, "the data holds " + std::to_string(have) + " bytes but shape " + *shapeText + " of " +
                  std::string(dtypeName(d.dtype)) + " needs " + std::to_string(n * size));
  Tensor t = Tensor::empty(shape, d.dtype);
  if (n > 0) {
    auto* out = static_cast<unsigned char*>(t.data());
    std::memcpy(out, bytes.data() + start + headerLen, n * size);
    if (d.bigEndian)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t a = 0, b = size - 1; a < b; ++a, --b)
          std::swap(out[i * size + a], out[i * size + b]);
  }
  return t;
}

void writeNpy(const std::string& path, const Tensor& tensor) {
  Tensor t = tensor.cpu().contiguous();
  std::string shape = "(";
  for (std::size_t d = 0; d < t.shape().size(); ++d)
    shape += std::to_string(t.shape()[d]) + (t.shape().size() == 1      ? ","
                                             : d + 1 < t.shape().size() ? ", "
                                                                        : "");
  shape += ")";
  std::string header =
      "{'descr': '" + descrOf(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version, length, header and '\n' together are a multiple of 64 bytes.
  bool v2 = header.size() + 11 > 65535;
  std::size_t prefix = kMagicSize + 2 + (v2 ? 4 : 2);
  std::size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  std::size_t len = header.size();
  for (int b = 0; b < (v2 ? 4 : 2); ++b) out += static_cast<char>((len >> (8 * b)) & 0xff);
  out += header;
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * dtypeSize(t.dtype());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) bad(path, std::string("cannot create it (") + std::strerror(errno) + ")");
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (bytes > 0) f.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(bytes));
  f.close();
  if (!f) bad(path, "cannot write it");
}

} // namespace einjit::cli
