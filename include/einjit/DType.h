#pragma once
// Element types. Shared by every layer (the front end's dtype rules, the interpreter, the
// runtime's tensors), so it depends on nothing.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace einjit {

// bf16 is a storage type: programs over bf16 tensors compute in f32 (accumulators included)
// and round each stored result to bf16.
enum class DType : std::uint8_t { f32, f64, i32, i64, bf16 };

// bfloat16: the top 16 bits of an IEEE-754 float. From float it rounds to nearest even; NaN
// stays a (quiet) NaN.
struct bf16 {
  std::uint16_t bits = 0;
  constexpr bf16() = default;
  constexpr explicit bf16(float f) : bits(round(f)) {}
  constexpr explicit operator float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
  constexpr explicit operator double() const { return static_cast<double>(float(*this)); }
  static constexpr bf16 fromBits(std::uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  static constexpr std::uint16_t round(float f) {
    const auto u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

constexpr std::size_t dtypeSize(DType t) {
  switch (t) {
  case DType::f32: return 4;
  case DType::f64: return 8;
  case DType::i32: return 4;
  case DType::i64: return 8;
  case DType::bf16: return 2;
  }
  return 0;
}

constexpr bool isFloat(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }
// The dtype values are computed in: f32 for bf16 storage, the dtype itself otherwise.
constexpr DType computeDType(DType t) { return t == DType::bf16 ? DType::f32 : t; }
constexpr bool isInteger(DType t) { return t == DType::i32 || t == DType::i64; }

constexpr std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  case DType::bf16: return "bf16";
  }
  return "?";
}

constexpr std::optional<DType> parseDType(std::string_view s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "i32") return DType::i32;
  if (s == "i64") return DType::i64;
  if (s == "bf16") return DType::bf16;
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
template <>
constexpr DType dtypeOf<bf16>() {
  return DType::bf16;
}

} // namespace einjit
