#pragma once
// einjit::Tensor: an n-dimensional strided array with shared ownership.
//
// A Tensor is a cheap handle (copying it shares the storage). It owns its buffer
// (Tensor::empty/zeros/random...) or views memory the caller owns (Tensor::view), in which
// case the caller keeps that memory alive. Strides are in elements, may be any non-negative
// values (transposed and sliced views), and a rank-0 tensor holds one scalar.
//
// A tensor lives on the host or on a CUDA device (cuda(), emptyCuda()). Views (transpose,
// permute, slice) work on both; element access, clone(), contiguous() and to() are host
// operations: on a device tensor they throw, except toVector(), which copies to the host. A
// Kernel compiled for Device::cuda() takes device tensors (and returns device tensors, with
// no copies) or host tensors (copied to the device and back for the call).
//
// Every user mistake (bad dimension or index, negative extent, mismatched sizes, a value that
// does not fit the dtype) throws einjit::Error.
#include "einjit/DType.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace einjit {

using Shape = std::vector<std::int64_t>;

enum class DeviceKind : std::uint8_t { cpu, cuda };

class Tensor {
public:
  Tensor() = default; // an undefined tensor: defined() is false

  // Owned, contiguous row-major storage, 64-byte aligned. empty() leaves it uninitialized.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  // Uniform in [lo, hi) from a seeded generator (same seed, same values, on every platform):
  // element i (row-major) is lo + (hi - lo) * u_i rounded once (fma), u_i the top 53 bits of the
  // i-th splitmix64 output as a fraction. Integer dtypes draw randomInt over the integers in
  // [lo, hi) instead.
  static Tensor random(const Shape& shape, DType dtype = DType::f32, std::uint64_t seed = 0,
                       double lo = -1.0, double hi = 1.0);
  // Uniform integers in [lo, hi) (for gather index tensors); dtype i32 or i64. Unbiased
  // (rejection sampling on splitmix64), and platform-independent like random().
  static Tensor randomInt(const Shape& shape, std::int64_t lo, std::int64_t hi,
                          DType dtype = DType::i64, std::uint64_t seed = 0);
  // A copy of `values` (row-major) with the given shape; values.size() must match.
  static Tensor fromValues(const Shape& shape, const std::vector<double>& values,
                           DType dtype = DType::f32);

  // Zero-copy view of caller-owned memory. Strides default to row-major contiguous. `data` must
  // be aligned for the dtype; it may be null only when the shape has no elements.
  static Tensor view(void* data, DType dtype, const Shape& shape, const Shape& strides = {});
  // Same, but the view (and every view derived from it) holds `keepAlive`, so memory owned by
  // something else (a shared buffer, a foreign array object) lives as long as the view.
  static Tensor view(void* data, DType dtype, const Shape& shape, const Shape& strides,
                     std::shared_ptr<void> keepAlive);
  template <class T>
  static Tensor view(T* data, const Shape& shape, const Shape& strides = {}) {
    return view(static_cast<void*>(data), dtypeOf<T>(), shape, strides);
  }

  // Zero-copy view of caller-owned memory on CUDA device `index` (a device address, e.g. from
  // another library's tensor), checked like view(); the memory is used in the order of the
  // device's legacy default stream, where every einjit CUDA call runs. An error in a build
  // without CUDA.
  static Tensor viewCuda(void* data, DType dtype, const Shape& shape, const Shape& strides,
                         std::shared_ptr<void> keepAlive, int index = 0);
  // Uninitialized contiguous storage on CUDA device `index` (an error without a device).
  static Tensor emptyCuda(const Shape& shape, DType dtype = DType::f32, int index = 0);
  // A contiguous copy on CUDA device `index` / on the host; *this when already there (and,
  // for cuda(), contiguous).
  Tensor cuda(int index = 0) const;
  Tensor cpu() const;

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  DeviceKind device() const;
  int deviceIndex() const; // the CUDA device's index; 0 on the host
  int rank() const { return static_cast<int>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  std::int64_t dim(int d) const; // extent of dimension d, 0 <= d < rank()
  std::int64_t numel() const;    // 1 for rank 0, 0 for an undefined tensor
  // Row-major with no gaps; strides of extent-1 dimensions are ignored and empty tensors count
  // as contiguous (nothing to address). An undefined tensor is not contiguous.
  bool isContiguous() const;
  std::string shapeString() const; // "4x5x6", "scalar" for rank 0, "undefined"

  // Pointer to element (0,...,0); null for an undefined tensor or an empty view of null. For a
  // device tensor, a device address.
  void* data() const;
  template <class T>
  T* data() const {
    return static_cast<T*>(data());
  }
  // Byte range [lo, hi) this tensor's elements can touch, for overlap (aliasing) checks; empty
  // (lo == hi) when the tensor has no elements.
  std::pair<const std::byte*, const std::byte*> byteExtent() const;
  // Whether the byte ranges intersect (never for tensors on different devices). Conservative:
  // interleaved views (even and odd slices of one buffer) overlap by this test although they share
  // no element.
  bool overlaps(const Tensor& other) const;

  // Element access by multi-index, converted to/from double (tests, tools, reference code).
  // set() on an integer tensor truncates toward zero; NaN or out-of-range values throw.
  double get(const std::vector<std::int64_t>& index) const;
  void set(const std::vector<std::int64_t>& index, double value);
  // All elements in row-major order, as doubles.
  std::vector<double> toVector() const;

  // Views sharing storage. permute: result dim i is this tensor's dim order[i]. slice: elements
  // begin, begin+step, ... below end, with 0 <= begin <= end <= dim(dim) and step >= 1.
  Tensor transpose(int a, int b) const;
  Tensor permute(const std::vector<int>& order) const;
  Tensor slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;
  // Contiguous owned copy (optionally converted). contiguous() returns *this when already
  // contiguous; clone() and to() always copy. to() converts like set().
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;

private:
  struct Storage;
  // A contiguous tensor over fresh storage.
  static Tensor contiguousOver(std::shared_ptr<Storage> storage, DType dtype, const Shape& shape);
  std::shared_ptr<Storage> storage_;
  std::int64_t offset_ = 0; // in elements, from the storage base
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
};

// Contiguous row-major strides for a shape (a zero extent counts as 1, so strides stay nonzero).
Shape contiguousStrides(const Shape& shape);

} // namespace einjit
