// The row programs and helpers shared by the row-block tests (test_row_blocks, test_row_plans):
// softmax and layernorm as a user writes them, the CPU options of a gradient kernel
// (intermediates not kept) and a oneTBB thread limit.
#pragma once

#include "einjit/einjit.h"

#ifdef EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#endif

#include <cstddef>

namespace einjit::test {

inline const char* const kSoftmax =
    "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\ny[i,j] := e[i,j] / z[i]";
inline const char* const kLayernorm = "mu[i] := x[i,j] / size(x,1)\nd[i,j] := x[i,j] - mu[i]\n"
                                      "var[i] := d[i,j]^2 / size(x,1)\n"
                                      "y[i,j] := d[i,j] / sqrt(var[i] + eps) * g[j] + b[j]";

// Runs f with oneTBB limited to `threads` workers (1 and 2 threads must agree bit for bit).
template <class F>
void withThreads(int threads, F&& f) {
#ifdef EINJIT_HAVE_TBB
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(threads));
#endif
  f();
}

// The CPU with intermediates not kept (as a gradient kernel has them): those that are no
// output may live in scratch.
inline einjit::Options cpu(einjit::DType dt) {
  einjit::Options o;
  o.device = einjit::Device::cpu();
  o.defaultDType = dt;
  o.keepIntermediates = false;
  return o;
}

} // namespace einjit::test
