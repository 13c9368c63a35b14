#include "codegen/schedule/GemmRows.h"

namespace einjit::codegen {

// MR for 32 vector registers (AVX-512): the tallest tile, unless one at most a quarter shorter
// pads M by less. M is often a channel count (64: 14-row tiles compute 70 rows, 28-row ones 84,
// a tenth and a quarter of the FMAs on zeros; 13 and 22 rows compute 65 and 66). A shorter
// tile still keeps more accumulator chains than the FMA pipes need and its broadcasts per FMA
// the same (two vectors) or within a twentieth (one). A gain under 2% of M keeps the tallest
// (fewer kernel calls and tile stores). An M shorter than the tallest tile is one tile of M
// rows from `minRows` up (the one-vector tile: as many rows as the FMA pipes' chains): the
// README demo's input gradient (16 channels, residue phases of 16 and 17 columns) otherwise
// has no packed plan on AVX-512 and runs the generic loops; shorter still, no plan (the
// register tiles).
// Past that quarter, the tiles of the tallest tile's count made equal (M over that count, up):
// as many kernel calls and tile stores, the fewest padded rows any tile of that count leaves,
// taken where they pad less still and keep the FMA pipes' chains (`chainRows` rows). 32
// channels (the README demo's forward on AVX-512) are two tiles of 16 x 1 vector where 21 rows
// computed 42, and 16 channels two of 8 x 2 vectors where 11 rows computed 22.
// With 16 registers (AVX2) the tile is 6 x 16 unless a tile of as few rows as keep the FMA
// pipes' chains busy (4 x 16: 8 chains) pads M by at least a tenth less: 16 and 32 channels
// (the README demo's layer) compute 18 and 36 rows in 6-row tiles. Its broadcasts per FMA rise
// by half, which costs more than a few padded rows where B is read in place (64 channels, a
// stride-1 window: measured slower), so the gain must be large.
std::int64_t fittedRows(std::int64_t m, std::int64_t mrMax, std::int64_t minRows,
                        std::int64_t chainRows) {
  auto padded = [&](std::int64_t mr) { return (m + mr - 1) / mr * mr; };
  if (m < mrMax) return m >= minRows ? m : mrMax;
  std::int64_t best = mrMax;
  for (std::int64_t mr = mrMax - 1; mr * 4 >= mrMax * 3; --mr)
    if (padded(mr) < padded(best)) best = mr;
  const std::int64_t equal = (m + (m + mrMax - 1) / mrMax - 1) / ((m + mrMax - 1) / mrMax);
  if (equal >= chainRows && padded(equal) < padded(best)) best = equal;
  return (padded(mrMax) - padded(best)) * 50 > m ? best : mrMax;
}

std::int64_t fittedRowsFew(std::int64_t m, std::int64_t mrMax, std::int64_t lowest) {
  auto padded = [&](std::int64_t mr) { return (m + mr - 1) / mr * mr; };
  if (m < mrMax) return mrMax;
  std::int64_t best = mrMax;
  for (std::int64_t mr = mrMax - 1; mr >= lowest; --mr)
    if (padded(mr) < padded(best)) best = mr;
  return (padded(mrMax) - padded(best)) * 10 >= m ? best : mrMax;
}

} // namespace einjit::codegen
