#include "codegen/schedule/GemmKnobs.h"

#include <algorithm>
#include <cstdlib>

namespace einjit::codegen {

namespace {

std::int64_t number(const char* name, std::int64_t none) {
  const char* e = std::getenv(name);
  if (!e || !*e) return none;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  return end && *end == '\0' ? v : none;
}

GemmKnobs read() {
  GemmKnobs k;
  k.mr = static_cast<int>(std::max<std::int64_t>(number("EINJIT_GEMM_MR", 0), 0));
  const std::int64_t nrv = number("EINJIT_GEMM_NR_VECTORS", 0);
  k.nrVectors = nrv >= 1 && nrv <= 3 ? static_cast<int>(nrv) : 0;
  k.kc = std::max<std::int64_t>(number("EINJIT_GEMM_KC", 0), 0);
  const std::int64_t sets = number("EINJIT_GEMM_KSETS", 0);
  k.kSets = sets >= 1 && sets <= 4 ? static_cast<int>(sets) : 0;
  k.packB = number("EINJIT_GEMM_PACK_B", 0) == 1;
  k.prefetchOut = number("EINJIT_GEMM_PREFETCH_OUT", 1) != 0;
  k.prefetchNext = number("EINJIT_GEMM_PREFETCH_NEXT", 1) != 0;
  k.stage = static_cast<int>(number("EINJIT_GEMM_STAGE", -1));
  k.strideTwoInPlace = number("EINJIT_GEMM_S2_IN_PLACE", 1) != 0;
  k.strideTwoTile = number("EINJIT_GEMM_S2_TILE", 1) != 0;
  const std::int64_t pa = number("EINJIT_GEMM_PREFETCH_A", -1);
  k.prefetchA = pa == 0 || pa == 1 ? static_cast<int>(pa) : -1;
  const std::int64_t tw = number("EINJIT_GEMM_TRANSPOSE", -1);
  k.transpose = tw == 0 || (tw >= 2 && tw <= 16 && (tw & (tw - 1)) == 0) ? static_cast<int>(tw) : -1;
  return k;
}

} // namespace

std::string GemmKnobs::note() const {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : " ") + x; };
  if (mr > 0) add("MR=" + std::to_string(mr));
  if (nrVectors > 0) add("NR_VECTORS=" + std::to_string(nrVectors));
  if (kc > 0) add("KC=" + std::to_string(kc));
  if (kSets > 0) add("KSETS=" + std::to_string(kSets));
  if (packB) add("PACK_B=1");
  if (!prefetchOut) add("PREFETCH_OUT=0");
  if (!prefetchNext) add("PREFETCH_NEXT=0");
  if (stage >= 0) add("STAGE=" + std::to_string(stage));
  if (!strideTwoInPlace) add("S2_IN_PLACE=0");
  if (!strideTwoTile) add("S2_TILE=0");
  if (transpose >= 0) add("TRANSPOSE=" + std::to_string(transpose));
  if (prefetchA >= 0) add("PREFETCH_A=" + std::to_string(prefetchA));
  return s.empty() ? s : " [knobs " + s + "]";
}

const GemmKnobs& gemmKnobs() {
  static const GemmKnobs k = read();
  return k;
}

} // namespace einjit::codegen
