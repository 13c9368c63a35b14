#pragma once
// A packed GEMM plan's micro-kernel height (MR) for an M and the target's tallest tile: the
// rows a shorter tile saves against its cost (docs/CPU_SCHEDULES.md, "fittedRows").
#include <cstdint>

namespace einjit::codegen {

// 32 vector registers (AVX-512): the tallest tile, one at most a quarter shorter, or the
// tallest tile's count of equal tiles of at least `chainRows` rows.
std::int64_t fittedRows(std::int64_t m, std::int64_t mrMax, std::int64_t minRows,
                        std::int64_t chainRows);
// 16 vector registers (AVX2): the tallest tile or one down to `lowest` rows.
std::int64_t fittedRowsFew(std::int64_t m, std::int64_t mrMax, std::int64_t lowest);

} // namespace einjit::codegen
