#pragma once
// Zero-copy interop between einjit::Tensor and Eigen (header-only; include it only where Eigen
// is available).
//
//   einjit::view(x)            Eigen dense object / Eigen::Tensor / TensorMap -> Tensor view
//   einjit::asEigenMatrix<T>   rank-2 Tensor -> strided Eigen::Map (any strides)
//   einjit::asEigenTensor<T,R> contiguous Tensor -> row-major Eigen::TensorMap
//
// Views alias the Eigen object's memory: it must outlive them, and resizing it invalidates them.
// Views of const objects are accepted (kernels take inputs as Tensors, which carry no
// const-ness); writing through such a view is the caller's responsibility. Views of owning
// temporaries (an rvalue Eigen::Matrix or Eigen::Tensor) would dangle and do not compile.
#include "einjit/Error.h"
#include "einjit/Tensor.h"

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

#include <array>
#include <string>
#include <type_traits>

namespace einjit {

namespace detail {

template <class T>
void* mutableData(T* p) {
  return const_cast<void*>(static_cast<const void*>(p));
}

// Shape and strides of an Eigen::Tensor-style dense block: dims in Eigen's index order,
// strides from its layout (ColMajor: dim 0 varies fastest).
template <class Scalar, class Dims>
Tensor tensorView(Scalar* data, const Dims& dims, int rank, bool rowMajor) {
  Shape shape(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) shape[static_cast<std::size_t>(d)] = dims[d];
  Shape strides = contiguousStrides(shape);
  if (!rowMajor) {
    std::int64_t s = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      strides[d] = s;
      s *= shape[d] > 0 ? shape[d] : 1;
    }
  }
  using T = std::remove_const_t<Scalar>;
  return Tensor::view(mutableData(data), dtypeOf<T>(), shape, strides);
}

template <class T>
void checkEigenTarget(const Tensor& t, int rank, const char* where) {
  if (!t.defined()) throw Error(std::string(where) + ": the tensor is undefined");
  if (t.dtype() != dtypeOf<T>())
    throw Error(std::string(where) + ": tensor has dtype " + std::string(dtypeName(t.dtype())) +
                " but the Eigen scalar type is " + std::string(dtypeName(dtypeOf<T>())));
  if (t.rank() != rank)
    throw Error(std::string(where) + ": tensor has rank " + std::to_string(t.rank()) + " (" +
                t.shapeString() + ") but rank " + std::to_string(rank) + " was requested");
}

} // namespace detail

// Eigen dense object with direct access (Matrix, Array, Map, Ref, Block, Transpose of those).
// Compile-time vectors give rank-1 views; everything else a rank-2 {rows, cols} view with the
// object's real strides (ColMajor m x n: strides {1, m}).
template <class Derived>
Tensor view(const Eigen::DenseBase<Derived>& x) {
  constexpr bool direct = (int(Derived::Flags) & Eigen::DirectAccessBit) != 0;
  static_assert(direct, "einjit::view needs an Eigen expression with direct memory access; "
                        "evaluate the expression into a matrix first");
  const Derived& m = x.derived();
  using T = std::remove_const_t<typename Derived::Scalar>;
  if constexpr (!direct) {
    return Tensor(); // unreachable; keeps the static_assert the only error
  } else if constexpr (Derived::IsVectorAtCompileTime) {
    return Tensor::view(detail::mutableData(m.data()), dtypeOf<T>(), {std::int64_t(m.size())},
                        {std::int64_t(m.innerStride())});
  } else {
    const std::int64_t rowStride = Derived::IsRowMajor ? m.outerStride() : m.innerStride();
    const std::int64_t colStride = Derived::IsRowMajor ? m.innerStride() : m.outerStride();
    const Shape shape{std::int64_t(m.rows()), std::int64_t(m.cols())};
    return Tensor::view(detail::mutableData(m.data()), dtypeOf<T>(), shape, {rowStride, colStride});
  }
}
template <class Derived>
Tensor view(Eigen::PlainObjectBase<Derived>&&) = delete;

// Eigen::Tensor. RowMajor maps directly; ColMajor (Eigen's default) keeps Eigen's index order,
// shape {d0, ..., dn-1}, with column-major strides (dim 0 has stride 1).
template <class T, int Rank, int Options, class IndexType>
Tensor view(const Eigen::Tensor<T, Rank, Options, IndexType>& t) {
  return detail::tensorView(t.data(), t.dimensions(), Rank,
                            (Options & Eigen::RowMajor) == Eigen::RowMajor);
}
template <class T, int Rank, int Options, class IndexType>
Tensor view(Eigen::Tensor<T, Rank, Options, IndexType>&&) = delete;

template <class PlainObjectType, int MapOptions, template <class> class MakePointer>
Tensor view(const Eigen::TensorMap<PlainObjectType, MapOptions, MakePointer>& t) {
  using Map = Eigen::TensorMap<PlainObjectType, MapOptions, MakePointer>;
  return detail::tensorView(t.data(), t.dimensions(), static_cast<int>(Map::NumIndices),
                            static_cast<int>(Map::Layout) == static_cast<int>(Eigen::RowMajor));
}

// Rank-2 tensor with any strides as an Eigen matrix view (outer stride = strides[0], inner =
// strides[1]). T must match the dtype. The map does not hold the storage, so the tensor must be
// a named one that outlives it: temporaries (often a fresh .contiguous() copy) do not compile.
template <class T>
using EigenMatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                                  0, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

template <class T>
EigenMatrixMap<T> asEigenMatrix(const Tensor& t) {
  detail::checkEigenTarget<T>(t, 2, "einjit::asEigenMatrix");
  const Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic> stride(t.strides()[0], t.strides()[1]);
  return EigenMatrixMap<T>(t.data<T>(), t.dim(0), t.dim(1), stride);
}
template <class T>
EigenMatrixMap<T> asEigenMatrix(Tensor&&) = delete;

// Contiguous row-major tensor as an Eigen::TensorMap; strided views need .contiguous() first.
// Like asEigenMatrix, only for tensors that outlive the map.
template <class T, int Rank>
Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor>> asEigenTensor(const Tensor& t) {
  detail::checkEigenTarget<T>(t, Rank, "einjit::asEigenTensor");
  if (!t.isContiguous())
    throw Error("einjit::asEigenTensor: the " + t.shapeString() +
                " tensor is not contiguous row-major (call .contiguous() first)");
  std::array<Eigen::Index, Rank> dims{};
  for (int d = 0; d < Rank; ++d) dims[static_cast<std::size_t>(d)] = t.dim(d);
  return Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor>>(t.data<T>(), dims);
}
template <class T, int Rank>
Eigen::TensorMap<Eigen::Tensor<T, Rank, Eigen::RowMajor>> asEigenTensor(Tensor&&) = delete;

} // namespace einjit
