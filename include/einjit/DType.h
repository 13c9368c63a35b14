#pragma once
// Element types. Shared by every layer (the front end's dtype rules, the interpreter, the
// runtime's tensors), so it depends on nothing.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace einjit {

enum class DType : std::uint8_t { f32, f64, i32, i64 };

constexpr std::size_t dtypeSize(DType t) {
  switch (t) {
  case DType::f32: return 4;
  case DType::f64: return 8;
  case DType::i32: return 4;
  case DType::i64: return 8;
  }
  return 0;
}

constexpr bool isFloat(DType t) { return t == DType::f32 || t == DType::f64; }
constexpr bool isInteger(DType t) { return t == DType::i32 || t == DType::i64; }

constexpr std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  }
  return "?";
}

constexpr std::optional<DType> parseDType(std::string_view s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "i32") return DType::i32;
  if (s == "i64") return DType::i64;
  return std::nullopt;
}

template <class T>
constexpr DType dtypeOf();
template <>
constexpr DType dtypeOf<float>() {
  return DType::f32;
}
template <>
constexpr DType dtypeOf<double>() {
  return DType::f64;
}
template <>
constexpr DType dtypeOf<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtypeOf<std::int64_t>() {
  return DType::i64;
}

} // namespace einjit
