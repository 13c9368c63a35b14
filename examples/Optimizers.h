#pragma once
// Optimizer steps as einjit programs (one multi-statement program each, every tensor updated
// in place) and the same steps as hand-written loops, for the example, the tests and the
// benchmark. Arguments in order of first appearance: tensors, then scalars.
#include <cmath>
#include <cstddef>

namespace einjit::examples {

// SGD with momentum (PyTorch's form, no dampening): b = mu*b + g; p = p - lr*b.
inline const char* const kSgdMomentum = "b[i] = mu*b[i] + g[i]\n"
                                        "p[i] = p[i] - lr*b[i]";

// Adam; c1 = 1 - b1^t and c2 = 1 - b2^t are the bias corrections of step t.
inline const char* const kAdam = "m[i] = b1*m[i] + (1-b1)*g[i]\n"
                                 "v[i] = b2*v[i] + (1-b2)*g[i]*g[i]\n"
                                 "p[i] = p[i] - lr*(m[i]/c1)/(sqrt(v[i]/c2) + eps)";

// AdamW: Adam with the weight decay applied to p directly (decoupled), before the step.
inline const char* const kAdamW = "m[i] = b1*m[i] + (1-b1)*g[i]\n"
                                  "v[i] = b2*v[i] + (1-b2)*g[i]*g[i]\n"
                                  "p[i] = p[i]*(1 - lr*wd) - lr*(m[i]/c1)/(sqrt(v[i]/c2) + eps)";

// The loops, in the programs' order of operations, in T (float or double) throughout;
// pOnly: the last statement alone, from the given b (or m and v).
template <class T>
void sgdMomentumLoop(T* b, const T* g, T* p, std::size_t n, T mu, T lr, bool pOnly = false) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!pOnly) b[i] = mu * b[i] + g[i];
    p[i] = p[i] - lr * b[i];
  }
}

template <class T>
void adamLoop(T* m, const T* g, T* v, T* p, std::size_t n, T b1, T b2, T lr, T c1, T c2, T eps,
              T wd = 0, bool decoupled = false, bool pOnly = false) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!pOnly) {
      m[i] = b1 * m[i] + (T(1) - b1) * g[i];
      v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    }
    T q = decoupled ? p[i] * (T(1) - lr * wd) : p[i];
    p[i] = q - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

} // namespace einjit::examples
