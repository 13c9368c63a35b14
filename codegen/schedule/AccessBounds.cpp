#include "codegen/schedule/AccessBounds.h"

#include <algorithm>

namespace einjit::codegen {

IndexInterval subscriptInterval(const dsl::Subscript& s, std::int64_t constant,
                                const std::vector<IndexInterval>& vars) {
  IndexInterval r{true, constant, constant};
  if (s.gather) return {false, 0, 0};
  for (std::size_t v = 0; v < s.coef.size(); ++v) {
    const std::int64_t c = s.coef[v];
    if (c == 0) continue;
    const IndexInterval& x = vars[v];
    if (!x.known) return {false, 0, 0};
    const std::int64_t a = c * x.lo, e = c * x.hi;
    r.lo += std::min(a, e);
    r.hi += std::max(a, e);
  }
  return r;
}

bool subscriptInside(const dsl::Program& p, const dsl::BoundProgram& b,
                     const std::vector<IndexInterval>& vars, const dsl::CExpr& e, std::size_t d) {
  const dsl::Subscript& sub = e.subs[d];
  const IndexInterval iv = subscriptInterval(sub, b.eval(p, sub.constant), vars);
  return iv.known && iv.lo >= 0 && iv.hi < b.tensors[static_cast<std::size_t>(e.tensor)].shape[d];
}

std::vector<IndexInterval> boxIntervals(const Box& r) {
  std::vector<IndexInterval> vars;
  for (const auto& [lo, hi] : r) vars.push_back({hi > lo, lo, hi - 1});
  return vars;
}

} // namespace einjit::codegen
