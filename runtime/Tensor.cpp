#include "einjit/Tensor.h"

#include "einjit/Error.h"
#include "runtime/HostMemory.h"

#if EINJIT_HAVE_CUDA
#include "runtime/CudaDriver.h"
#endif

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <sstream>
#include <type_traits>
#include <utility>

namespace einjit {

struct Tensor::Storage {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  // Owned buffers: the allocation itself, freed by its deleter. Views: whatever the caller asked
  // to keep alive, or null.
  std::shared_ptr<void> owner;
  DeviceKind kind = DeviceKind::cpu;
  int device = 0;
};

namespace {

std::string joinShape(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

template <class T>
std::string listString(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string numberString(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::int64_t mulChecked(std::int64_t a, std::int64_t b, const char* where) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw Error(std::string(where) + ": tensor is too large");
  return r;
}

std::int64_t addChecked(std::int64_t a, std::int64_t b, const char* where) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Error(std::string(where) + ": tensor is too large");
  return r;
}

// Rejects negative extents and element counts that overflow; returns the element count.
std::int64_t checkShape(const Shape& shape, DType dtype, const char* where) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      throw Error(std::string(where) + ": negative extent " + std::to_string(shape[d]) +
                  " in dimension " + std::to_string(d) + " of shape " + listString(shape));
    n = mulChecked(n, shape[d], where);
  }
  mulChecked(n, static_cast<std::int64_t>(dtypeSize(dtype)), where);
  return n;
}

// Calls f(T{}) with T the C++ type of `t`.
template <class F>
decltype(auto) visitDType(DType t, F&& f) {
  switch (t) {
  case DType::f32: return f(float{});
  case DType::f64: return f(double{});
  case DType::i32: return f(std::int32_t{});
  case DType::i64: return f(std::int64_t{});
  case DType::bf16: return f(bf16{});
  }
  throw InternalError("einjit: invalid DType value");
}

// Element conversion. Integer destinations truncate toward zero; NaN or out-of-range sources
// would be undefined behavior in static_cast, so they throw instead.
template <class To, class From>
To convertElement(From v) {
  if constexpr (std::is_same_v<From, bf16>) {
    return convertElement<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return bf16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_floating_point_v<From>) {
    // Both bounds are powers of two, so exact in double.
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = -lo;
    const double t = std::trunc(static_cast<double>(v));
    if (!(t >= lo && t < hi))
      throw Error("value " + numberString(static_cast<double>(v)) + " does not fit in " +
                  std::string(dtypeName(dtypeOf<To>())));
    return static_cast<To>(t);
  } else {
    if (!std::in_range<To>(v))
      throw Error("value " + std::to_string(v) + " does not fit in " +
                  std::string(dtypeName(dtypeOf<To>())));
    return static_cast<To>(v);
  }
}

// Calls f(offset) for every element in row-major order; offsets are in elements.
template <class F>
void forEachOffset(const Shape& shape, const Shape& strides, F&& f) {
  for (std::int64_t e : shape)
    if (e == 0) return;
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t offset = 0;
  for (;;) {
    f(offset);
    std::size_t d = rank;
    for (;;) {
      if (d == 0) return; // carried out of the outermost dimension (or rank 0): done
      --d;
      if (++index[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= (shape[d] - 1) * strides[d];
      index[d] = 0;
    }
  }
}

// Copies `src` (any strides) into the contiguous tensor `dst` of the same shape, converting.
void copyInto(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.isContiguous()) {
    const auto n = static_cast<std::size_t>(src.numel()) * dtypeSize(src.dtype());
    if (n) std::memcpy(dst.data(), src.data(), n);
    return;
  }
  visitDType(src.dtype(), [&](auto s) {
    using S = decltype(s);
    visitDType(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      const S* in = src.data<S>();
      D* out = dst.data<D>();
      forEachOffset(src.shape(), src.strides(),
                    [&](std::int64_t off) { *out++ = convertElement<D>(in[off]); });
    });
  });
}

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and identical on every platform.
class SplitMix64 {
public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits, exactly representable.
  double nextUnit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::uint64_t state_;
};

} // namespace

Shape contiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    // Zero-size dimensions do not zero the outer strides (they address nothing anyway).
    s *= std::max<std::int64_t>(shape[d], 1);
  }
  return strides;
}

// ---- construction ----

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  const std::int64_t n = checkShape(shape, dtype, "Tensor::empty");
  const std::size_t bytes = static_cast<std::size_t>(n) * dtypeSize(dtype);
  auto storage = std::make_shared<Storage>();
  try {
    // Never a zero-size request, so even empty tensors have a unique non-null base.
    void* p = runtime::allocateHost(bytes);
    storage->owner = std::shared_ptr<void>(p, [bytes](void* q) { runtime::freeHost(q, bytes); });
    storage->base = static_cast<std::byte*>(p);
  } catch (const std::bad_alloc&) {
    throw Error("Tensor::empty: cannot allocate " + std::to_string(bytes) + " bytes for a " +
                joinShape(shape) + " " + std::string(dtypeName(dtype)) + " tensor");
  }
  storage->bytes = bytes;
  return contiguousOver(std::move(storage), dtype, shape);
}

Tensor Tensor::contiguousOver(std::shared_ptr<Storage> storage, DType dtype, const Shape& shape) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguousStrides(shape);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  // All-zero bytes are 0 in every dtype.
  std::memset(t.data(), 0, t.storage_->bytes);
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v{};
    try {
      v = convertElement<T>(value);
    } catch (const Error& e) {
      throw Error(std::string("Tensor::full: ") + e.what());
    }
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = v;
  });
  return t;
}

Tensor Tensor::random(const Shape& shape, DType dtype, std::uint64_t seed, double lo, double hi) {
  const std::string range = "[" + numberString(lo) + ", " + numberString(hi) + ")";
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
    throw Error("Tensor::random: need finite lo < hi, got " + range);
  if (isInteger(dtype)) {
    const double a = std::ceil(lo), b = std::ceil(hi); // the integers in [lo, hi) are [a, b)
    if (!(a < b))
      throw Error("Tensor::random: no integer in " + range + " for dtype " +
                  std::string(dtypeName(dtype)));
    if (a < -0x1.0p63 || b > 0x1.0p63)
      throw Error("Tensor::random: range " + range + " exceeds i64");
    // b == 2^63 is one past INT64_MAX; clamping it drops only that unrepresentable end.
    const auto bi =
        b >= 0x1.0p63 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(b);
    return randomInt(shape, static_cast<std::int64_t>(a), bi, dtype, seed);
  }
  const double width = hi - lo;
  if (!std::isfinite(width)) throw Error("Tensor::random: range " + range + " is too wide");
  Tensor t = empty(shape, dtype);
  SplitMix64 rng(seed);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bf16>) {
      bf16* p = t.data<bf16>();
      for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
        const double u = std::fma(width, rng.nextUnit(), lo);
        bf16 v(static_cast<float>(u));
        // Rounding can land on hi (or below lo): step one bf16 value back inside.
        if (static_cast<double>(v) >= hi)
          v = bf16::fromBits(static_cast<std::uint16_t>(v.bits + (u < 0 ? 1 : -1)));
        if (static_cast<double>(v) < lo)
          v = bf16::fromBits(static_cast<std::uint16_t>(v.bits + (u < 0 ? -1 : 1)));
        if (!(static_cast<double>(v) >= lo && static_cast<double>(v) < hi))
          throw Error("Tensor::random: no bf16 value in " + range);
        p[i] = v;
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      T* p = t.data<T>();
      for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
        // fma rounds once on every platform, unlike a*b+c that compilers may or may not fuse.
        auto v = static_cast<T>(std::fma(width, rng.nextUnit(), lo));
        // Rounding (to double, then to float) can land on hi, or below a non-representable lo.
        if (static_cast<double>(v) >= hi)
          v = std::nextafter(v, -std::numeric_limits<T>::infinity());
        else if (static_cast<double>(v) < lo)
          v = std::nextafter(v, std::numeric_limits<T>::infinity());
        if (!(static_cast<double>(v) >= lo && static_cast<double>(v) < hi))
          throw Error("Tensor::random: no " + std::string(dtypeName(dtype)) + " value in " + range);
        p[i] = v;
      }
    }
  });
  return t;
}

Tensor Tensor::randomInt(const Shape& shape, std::int64_t lo, std::int64_t hi, DType dtype,
                         std::uint64_t seed) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
  if (!isInteger(dtype))
    throw Error("Tensor::randomInt: dtype must be i32 or i64, got " +
                std::string(dtypeName(dtype)));
  if (!(lo < hi)) throw Error("Tensor::randomInt: empty range " + range);
  if (dtype == DType::i32 &&
      (!std::in_range<std::int32_t>(lo) || !std::in_range<std::int32_t>(hi - 1)))
    throw Error("Tensor::randomInt: range " + range + " does not fit in i32");
  Tensor t = empty(shape, dtype);
  const std::uint64_t width = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  // Draws below 2^64 mod width are rejected, so x % width is exactly uniform.
  const std::uint64_t threshold = (0 - width) % width;
  SplitMix64 rng(seed);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      T* p = t.data<T>();
      for (std::int64_t i = 0, n = t.numel(); i < n; ++i) {
        std::uint64_t x = rng.next();
        while (x < threshold) x = rng.next();
        // Unsigned wraparound then conversion back is exact (modular) in C++20.
        p[i] =
            static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % width));
      }
    }
  });
  return t;
}

Tensor Tensor::fromValues(const Shape& shape, const std::vector<double>& values, DType dtype) {
  const std::int64_t n = checkShape(shape, dtype, "Tensor::fromValues");
  if (static_cast<std::size_t>(n) != values.size())
    throw Error("Tensor::fromValues: shape " + joinShape(shape) + " has " + std::to_string(n) +
                " elements but " + std::to_string(values.size()) + " values were given");
  Tensor t = empty(shape, dtype);
  visitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      try {
        p[i] = convertElement<T>(values[i]);
      } catch (const Error& e) {
        throw Error("Tensor::fromValues: values[" + std::to_string(i) + "]: " + e.what());
      }
    }
  });
  return t;
}

Tensor Tensor::view(void* data, DType dtype, const Shape& shape, const Shape& strides) {
  return view(data, dtype, shape, strides, nullptr);
}

Tensor Tensor::view(void* data, DType dtype, const Shape& shape, const Shape& strides,
                    std::shared_ptr<void> keepAlive) {
  const char* where = "Tensor::view";
  const std::int64_t n = checkShape(shape, dtype, where);
  Shape st = strides.empty() ? contiguousStrides(shape) : strides;
  if (st.size() != shape.size())
    throw Error("Tensor::view: " + std::to_string(st.size()) + " strides given for the rank-" +
                std::to_string(shape.size()) + " shape " + joinShape(shape));
  std::int64_t last = 0; // offset of the last element, in elements
  for (std::size_t d = 0; d < st.size(); ++d) {
    if (st[d] < 0)
      throw Error("Tensor::view: negative stride " + std::to_string(st[d]) + " in dimension " +
                  std::to_string(d));
    if (shape[d] > 0) last = addChecked(last, mulChecked(shape[d] - 1, st[d], where), where);
  }
  if (n > 0 && data == nullptr)
    throw Error("Tensor::view: null data pointer for a non-empty " + joinShape(shape) + " tensor");
  if (reinterpret_cast<std::uintptr_t>(data) % dtypeSize(dtype) != 0)
    throw Error("Tensor::view: data pointer is not aligned for " + std::string(dtypeName(dtype)));
  std::size_t bytes = 0;
  if (n > 0) {
    const auto itemSize = static_cast<std::int64_t>(dtypeSize(dtype));
    bytes = static_cast<std::size_t>(mulChecked(addChecked(last, 1, where), itemSize, where));
  }
  auto storage = std::make_shared<Storage>();
  storage->base = static_cast<std::byte*>(data);
  storage->bytes = bytes;
  storage->owner = std::move(keepAlive);
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = std::move(st);
  return t;
}

// ---- queries ----

namespace {
void requireDefined(bool defined, const char* where) {
  if (!defined) throw Error(std::string(where) + ": the tensor is undefined");
}

void requireHost(const Tensor& t, const char* where) {
  requireDefined(t.defined(), where);
  if (t.device() != DeviceKind::cpu)
    throw Error(std::string(where) + ": the tensor is on cuda:" + std::to_string(t.deviceIndex()) +
                "; copy it to the host with cpu() first");
}

void checkDim(int d, int rank, const char* where) {
  if (d < 0 || d >= rank)
    throw Error(std::string(where) + ": dimension " + std::to_string(d) +
                " is out of range for a rank-" + std::to_string(rank) + " tensor");
}
} // namespace

std::int64_t Tensor::dim(int d) const {
  checkDim(d, rank(), "Tensor::dim");
  return shape_[static_cast<std::size_t>(d)];
}

std::int64_t Tensor::numel() const {
  if (!defined()) return 0;
  std::int64_t n = 1;
  for (std::int64_t e : shape_) n *= e;
  return n;
}

bool Tensor::isContiguous() const {
  if (!defined()) return false;
  if (numel() == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

std::string Tensor::shapeString() const { return defined() ? joinShape(shape_) : "undefined"; }

void* Tensor::data() const {
  if (!storage_ || !storage_->base) return nullptr;
  return storage_->base + offset_ * static_cast<std::int64_t>(dtypeSize(dtype_));
}

DeviceKind Tensor::device() const { return storage_ ? storage_->kind : DeviceKind::cpu; }
int Tensor::deviceIndex() const { return storage_ ? storage_->device : 0; }

std::pair<const std::byte*, const std::byte*> Tensor::byteExtent() const {
  const auto* lo = static_cast<const std::byte*>(data());
  if (numel() == 0) return {lo, lo};
  std::int64_t last = 0;
  for (std::size_t d = 0; d < shape_.size(); ++d) last += (shape_[d] - 1) * strides_[d];
  return {lo, lo + (last + 1) * static_cast<std::int64_t>(dtypeSize(dtype_))};
}

bool Tensor::overlaps(const Tensor& other) const {
  if (device() != other.device() || deviceIndex() != other.deviceIndex()) return false;
  const auto [a0, a1] = byteExtent();
  const auto [b0, b1] = other.byteExtent();
  if (a0 == a1 || b0 == b1) return false;
  // std::less: a total order even for pointers into different allocations.
  const std::less<const std::byte*> less;
  return less(a0, b1) && less(b0, a1);
}

// ---- element access ----

namespace {
// Element offset of `index` relative to data(), after bounds checks.
std::int64_t elementOffset(const Shape& shape, const Shape& strides,
                           const std::vector<std::int64_t>& index, const char* where) {
  if (index.size() != shape.size())
    throw Error(std::string(where) + ": index " + listString(index) + " has " +
                std::to_string(index.size()) + " entries but the tensor has rank " +
                std::to_string(shape.size()));
  std::int64_t off = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape[d])
      throw Error(std::string(where) + ": index " + listString(index) +
                  " is out of range for shape " + joinShape(shape));
    off += index[d] * strides[d];
  }
  return off;
}
} // namespace

double Tensor::get(const std::vector<std::int64_t>& index) const {
  requireHost(*this, "Tensor::get");
  const std::int64_t off = elementOffset(shape_, strides_, index, "Tensor::get");
  return visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(data<T>()[off]);
  });
}

void Tensor::set(const std::vector<std::int64_t>& index, double value) {
  requireHost(*this, "Tensor::set");
  const std::int64_t off = elementOffset(shape_, strides_, index, "Tensor::set");
  visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    try {
      data<T>()[off] = convertElement<T>(value);
    } catch (const Error& e) {
      throw Error(std::string("Tensor::set: ") + e.what());
    }
  });
}

std::vector<double> Tensor::toVector() const {
  requireDefined(defined(), "Tensor::toVector");
  if (device() != DeviceKind::cpu) return cpu().toVector();
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(numel()));
  visitDType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* p = data<T>();
    forEachOffset(shape_, strides_,
                  [&](std::int64_t off) { out.push_back(static_cast<double>(p[off])); });
  });
  return out;
}

// ---- views ----

Tensor Tensor::transpose(int a, int b) const {
  requireDefined(defined(), "Tensor::transpose");
  checkDim(a, rank(), "Tensor::transpose");
  checkDim(b, rank(), "Tensor::transpose");
  Tensor t = *this;
  std::swap(t.shape_[static_cast<std::size_t>(a)], t.shape_[static_cast<std::size_t>(b)]);
  std::swap(t.strides_[static_cast<std::size_t>(a)], t.strides_[static_cast<std::size_t>(b)]);
  return t;
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  requireDefined(defined(), "Tensor::permute");
  const std::size_t r = shape_.size();
  std::vector<bool> seen(r, false);
  bool ok = order.size() == r;
  for (std::size_t i = 0; ok && i < r; ++i) {
    const int d = order[i];
    ok = d >= 0 && static_cast<std::size_t>(d) < r && !seen[static_cast<std::size_t>(d)];
    if (ok) seen[static_cast<std::size_t>(d)] = true;
  }
  if (!ok)
    throw Error("Tensor::permute: " + listString(order) + " is not a permutation of the " +
                std::to_string(r) + " dimensions of a " + shapeString() + " tensor");
  Tensor t = *this;
  for (std::size_t i = 0; i < r; ++i) {
    t.shape_[i] = shape_[static_cast<std::size_t>(order[i])];
    t.strides_[i] = strides_[static_cast<std::size_t>(order[i])];
  }
  return t;
}

Tensor Tensor::slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step) const {
  requireDefined(defined(), "Tensor::slice");
  checkDim(dim, rank(), "Tensor::slice");
  const auto d = static_cast<std::size_t>(dim);
  if (step <= 0) throw Error("Tensor::slice: step must be positive, got " + std::to_string(step));
  if (begin < 0 || begin > end || end > shape_[d])
    throw Error("Tensor::slice: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is out of range for dimension " + std::to_string(dim) + " of extent " +
                std::to_string(shape_[d]));
  // Written to avoid overflow for huge steps.
  const std::int64_t count = begin == end ? 0 : 1 + (end - begin - 1) / step;
  Tensor t = *this;
  t.shape_[d] = count;
  // An empty slice keeps the offset so data() never points past the buffer; a single element
  // keeps the stride so stride * step cannot overflow.
  if (count > 0) t.offset_ += begin * strides_[d];
  if (count > 1) t.strides_[d] = strides_[d] * step;
  return t;
}

// ---- copies ----

Tensor Tensor::contiguous() const {
  requireHost(*this, "Tensor::contiguous");
  return isContiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  requireHost(*this, "Tensor::clone");
  Tensor out = empty(shape_, dtype_);
  copyInto(*this, out);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  requireHost(*this, "Tensor::to");
  Tensor out = empty(shape_, dtype);
  try {
    copyInto(*this, out);
  } catch (const Error& e) {
    throw Error("Tensor::to(" + std::string(dtypeName(dtype)) + "): " + e.what());
  }
  return out;
}

// ---- devices ----

Tensor Tensor::emptyCuda(const Shape& shape, DType dtype, int index) {
  const std::int64_t n = checkShape(shape, dtype, "Tensor::emptyCuda");
#if EINJIT_HAVE_CUDA
  const std::size_t bytes = static_cast<std::size_t>(n) * dtypeSize(dtype);
  auto storage = std::make_shared<Storage>();
  // Never a zero-size allocation, so every tensor has a unique non-null base.
  const runtime::cuda::DevicePtr p =
      runtime::cuda::allocate(index, std::max<std::size_t>(bytes, 256));
  storage->owner = std::shared_ptr<void>(reinterpret_cast<void*>(p), [index](void* q) {
    try {
      runtime::cuda::release(index, reinterpret_cast<runtime::cuda::DevicePtr>(q));
    } catch (...) { // a context torn down at exit: nothing to free
    }
  });
  storage->base = reinterpret_cast<std::byte*>(p);
  storage->bytes = bytes;
  storage->kind = DeviceKind::cuda;
  storage->device = index;
  return contiguousOver(std::move(storage), dtype, shape);
#else
  (void)n;
  (void)index;
  throw Error("Tensor::emptyCuda: this build of einjit has no CUDA support");
#endif
}

Tensor Tensor::viewCuda(void* data, DType dtype, const Shape& shape, const Shape& strides,
                        std::shared_ptr<void> keepAlive, int index) {
#if EINJIT_HAVE_CUDA
  if (index < 0) throw Error("Tensor::viewCuda: negative device index " + std::to_string(index));
  Tensor t = view(data, dtype, shape, strides, std::move(keepAlive));
  t.storage_->kind = DeviceKind::cuda;
  t.storage_->device = index;
  return t;
#else
  (void)data;
  (void)dtype;
  (void)shape;
  (void)strides;
  (void)keepAlive;
  (void)index;
  throw Error("Tensor::viewCuda: this build of einjit has no CUDA support");
#endif
}

Tensor Tensor::cuda(int index) const {
  requireDefined(defined(), "Tensor::cuda");
  if (device() == DeviceKind::cuda) {
    if (deviceIndex() == index && isContiguous()) return *this;
    return cpu().cuda(index);
  }
  Tensor host = contiguous();
  Tensor out = emptyCuda(shape_, dtype_, index);
#if EINJIT_HAVE_CUDA
  runtime::cuda::copyToDevice(index, reinterpret_cast<runtime::cuda::DevicePtr>(out.data()),
                              host.data(), out.storage_->bytes);
#endif
  return out;
}

Tensor Tensor::cpu() const {
  requireDefined(defined(), "Tensor::cpu");
  if (device() == DeviceKind::cpu) return *this;
#if EINJIT_HAVE_CUDA
  // The bytes the view spans, then a host view with the same strides, made contiguous.
  const auto [lo, hi] = byteExtent();
  const auto bytes = static_cast<std::size_t>(hi - lo);
  auto buf = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]);
  runtime::cuda::copyToHost(deviceIndex(), buf.get(),
                            reinterpret_cast<runtime::cuda::DevicePtr>(lo), bytes);
  Tensor v = view(buf.get(), dtype_, shape_, strides_, buf);
  return v.clone();
#else
  throw InternalError("a device tensor in a build without CUDA");
#endif
}

} // namespace einjit
