// G2c: the coefficients of a row have gcd 1 but none is +-1 (stride 2, dilation 3). A
// unimodular change of two indices a, b (a = x a' - (cb/g) b', b = y a' + (ca/g) b' with
// x ca + y cb = g) leaves coefficient g on a' and 0 on b'; the caller repeats it until one is
// +-1. No modulo appears anywhere: the new indices range over whole integers.
#include "grad/SolveSteps.h"

#include <numeric>
#include <tuple>

namespace einjit::grad::solve {

using namespace einjit::dsl;

bool euclidStep(SolveState& s, std::size_t r) {
  const std::size_t R = s.R, n = s.n;
  const Aff& row = s.rows[r];
  std::size_t a = n, b = n;
  std::int64_t best = 0;
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t w = v + 1; w < n; ++w) {
      std::int64_t cv = row.c[R + v], cw = row.c[R + w];
      if (cv == 0 || cw == 0) continue;
      std::int64_t gg = std::gcd(cv, cw);
      if (a == n || gg < best) a = v, b = w, best = gg;
    }
  if (a == n) return false;
  std::int64_t ca = row.c[R + a], cb = row.c[R + b];
  // Extended Euclid: x ca + y cb = g.
  std::int64_t r0 = ca, r1 = cb, x0 = 1, x1 = 0, y0 = 0, y1 = 1;
  while (r1 != 0) {
    std::int64_t q = r0 / r1;
    std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
    std::tie(x0, x1) = std::pair{x1, x0 - q * x1};
    std::tie(y0, y1) = std::pair{y1, y0 - q * y1};
  }
  if (r0 < 0) r0 = -r0, x0 = -x0, y0 = -y0;
  const std::int64_t gg = r0, x = x0, y = y0;
  auto transform = [&](Aff& f) {
    std::int64_t fa = f.c[R + a], fb = f.c[R + b];
    f.c[R + a] = checkedAdd(checkedMul(fa, x), checkedMul(fb, y));
    f.c[R + b] = checkedAdd(checkedMul(-fa, cb / gg), checkedMul(fb, ca / gg));
  };
  for (std::size_t q = 0; q < R; ++q)
    if (q >= r || s.isEdge(q)) transform(s.rows[q]);
  for (std::size_t v = 0; v < n; ++v) transform(s.sol.varAff[v]);
  s.sol.renamed[a] = s.sol.renamed[b] = true;
  return true;
}

} // namespace einjit::grad::solve
