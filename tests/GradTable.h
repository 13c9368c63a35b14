#pragma once
// The gradients' table of programs (tests/test_grad.cpp), shared with the JIT tests
// (tests/test_jit.cpp), which run every forward and gradient program on both devices.
#include "einjit/einjit.h"

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace einjit::test {

using einjit::Shape;

struct GradRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  std::map<std::string, double> scalars = {};
  std::vector<std::string> wrt = {};
};

inline const std::vector<GradRow> kGradRows = {
    // contractions
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {3, 4}}, {"B", {4, 5}}}},
    {"C[i,k] := A[j,i] * B[j,k]", {{"A", {4, 3}}, {"B", {4, 5}}}},
    {"C[i,k] := A[i,j] * B[k,j]", {{"A", {3, 4}}, {"B", {5, 4}}}},
    {"C[i,k] := A[j,i] * B[k,j]", {{"A", {4, 3}}, {"B", {5, 4}}}},
    {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {2, 3, 4}}, {"B", {2, 4, 3}}}},
    {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {3, 4, 2}}, {"B", {2, 5, 4}}}},
    {"s := A[i,i]", {{"A", {4, 4}}}},
    {"y[i] := A[i,i]", {{"A", {5, 5}}}},
    {"y[i] := A[i,i] * v[i]", {{"A", {3, 3}}, {"v", {3}}}},
    {"y[i,j] := a[i] * b[j]", {{"a", {3}}, {"b", {4}}}},
    {"y[i] := x[i,j] * w[j]", {{"x", {3, 5}}, {"w", {5}}}},
    {"s := x[i,j] * x[i,j]", {{"x", {3, 4}}}},
    {"y[j,i] := x[i,j]", {{"x", {3, 4}}}},
    // convolutions: stride, dilation, padding, several indices in one dimension
    {"y[i] := x[i+k] * w[k]", {{"x", {9}}, {"w", {3}}}},
    {"y[i] := x[2i+k] * w[k]", {{"x", {11}}, {"w", {3}}}},
    {"y[i] := x[3i+k] * w[k]", {{"x", {13}}, {"w", {4}}}},
    {"y[i] := x[i+2k] * w[k]", {{"x", {10}}, {"w", {3}}}},
    {"y[i] := x[2i+2k] * w[k]", {{"x", {12}}, {"w", {3}}}},
    {"y[i] := x[2i+3k] * w[k]", {{"x", {14}}, {"w", {3}}}},
    {"y[i] := x[3i+2k] * w[k]", {{"x", {17}}, {"w", {4}}}},
    // Operands of unequal extents: the gradient 'da0[u] := dy[u-2k] * a1[u]' runs u over a0's
    // extent 3 but reads a1 (extent 2) only where k's range is not empty (a differential
    // finding: Binding used to reject the gradient program).
    {"y[i] := a0[i+2k] * a1[i+2k] where k in 0:1", {{"a0", {3}}, {"a1", {2}}}},
    {"y[n,o,h,w] := x[n,c,2h+3a,2w+3b] * k[o,c,a,b]", {{"x", {1, 2, 11, 12}}, {"k", {2, 2, 3, 2}}}},
    {"y[i] := x[2i+1]", {{"x", {8}}}},
    {"y[i] := x[i+j-k] * w[j,k]", {{"x", {9}}, {"w", {3, 2}}}},
    {"y[i,j] := x[i-j] * w[j]", {{"x", {8}}, {"w", {3}}}},
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{"x", {2, 2, 6, 5}}, {"k", {3, 2, 3, 2}}}},
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {{"x", {2, 3, 7, 8}}, {"k", {2, 3, 3, 2}}}},
    {"y[i] := x[pad(i+k-1)] * w[k] where i in 0:size(x,0)", {{"x", {7}}, {"w", {3}}}},
    {"y[n,o,h,w] := x[n,c,pad(2h+a-1),pad(2w+b-1)] * k[o,c,a,b] "
     "where h in 0:fdiv(size(x,2)-1,2)+1, w in 0:fdiv(size(x,3)-1,2)+1",
     {{"x", {1, 2, 6, 7}}, {"k", {2, 2, 3, 3}}}},
    // clamp (edges and interior) and wrap (solved over one period, or masked)
    {"y[i] := x[clamp(i-1)] * w[i] + x[wrap(i+2)] where i in 0:size(x,0)",
     {{"x", {5}}, {"w", {5}}}},
    {"y[i] := x[clamp(i+k-1)] * w[k] where i in 0:size(x,0)", {{"x", {6}}, {"w", {3}}}},
    {"y[i] := x[clamp(2i+k-1), clamp(i-k)] * w[k] where i in 0:size(x,0)",
     {{"x", {7, 4}}, {"w", {3}}}},
    {"y[i] := x[clamp(i-2)] * w[i] where i in 0:size(w,0)", {{"x", {1}}, {"w", {4}}}},
    {"y[i] := x[wrap(i+k-1)] * w[k] where i in 0:size(x,0)", {{"x", {7}}, {"w", {3}}}},
    {"y[i,j] := x[wrap(i+k-1), wrap(j+l-2)] * w[k,l] where i in 0:size(x,0), j in 0:size(x,1)",
     {{"x", {5, 6}}, {"w", {3, 4}}}},
    {"y[i] := x[wrap(k-i)]^2 * w[k] where i in 0:size(x,0)", {{"x", {5}}, {"w", {7}}}},
    {"y[n,i] := x[n,wrap(i+k-2)] * w[k] + x[n,i] where i in 0:size(x,1)",
     {{"x", {2, 6}}, {"w", {5}}}},
    {"y[i] := x[wrap(2i+k)] * w[k] where i in 0:size(x,0)", {{"x", {5}}, {"w", {3}}}},
    {"y[i] := x[wrap(i-3)] * w[i] where i in 0:size(w,0)", {{"x", {3}}, {"w", {8}}}},
    {"y[i] := x[wrap(i+k)] * w[k] * g[i] where i in 0:size(x,0)",
     {{"x", {4}}, {"w", {3}}, {"g", {4}}}},
    // transposed convolution in its gather form (pad: each o meets only the taps that exist)
    {"y[o] := x[i] * w[pad(o + 1 - 2i)] where o in 0:2*size(x,0)-1+size(w,0)-2",
     {{"x", {4}}, {"w", {3}}}},
    // shifts and subsampling
    {"y[i] := x[2i]", {{"x", {7}}}},
    {"y[i] := x[i+1] - x[i] where i in 0:size(x,0)-1", {{"x", {6}}}},
    {"y[i] := x[N-1-i]", {{"x", {5}}}, {{"N", 5}}},
    {"y[i] := x[i+S] * alpha where i in 0:size(x,0)-S", {{"x", {6}}}, {{"S", 2}, {"alpha", 1.5}}},
    // elementwise functions and their derivatives
    {"y[i] := exp(x[i]) + log(x[i] + 2) + sqrt(x[i] + 2) + tanh(x[i]) + sigmoid(x[i])",
     {{"x", {5}}}},
    {"y[i] := sin(x[i]) * cos(x[i]) + erf(x[i]) + abs(x[i] - 0.3) + relu(x[i] - 0.1)",
     {{"x", {6}}}},
    {"y[i] := x[i] ^ 3 + pow(x[i] + 2, w[i]) + (x[i] + 2) ^ w[i]", {{"x", {4}}, {"w", {4}}}},
    {"y[i] := atan(x[i]) + atan2(x[i], w[i] + 2) + atan2(w[i], x[i] - 2) + log2(x[i] + 2) + "
     "log10(w[i] + 2) + log1p(x[i] + 1) + expm1(x[i]) + cbrt(x[i] + 2)",
     {{"x", {5}}, {"w", {5}}}},
    {"y[i] := 0.5 * x[i] * (1 + erf(x[i] / sqrt(2)))", {{"x", {6}}}}, // GELU
    // round and sign are piecewise constant: their derivative is 0 (away from the jumps).
    {"y[i] := round(x[i] * 3) * x[i] + sign(x[i]) * x[i] ^ 2", {{"x", {6}}}},
    {"y[i] := x[i] / (w[i] + 3) - w[i] / (x[i] + 3)", {{"x", {4}}, {"w", {4}}}},
    {"y[i] := min(x[i], w[i]) + max(x[i], 0.2 * w[i])", {{"x", {6}}, {"w", {6}}}},
    {"y[i] := x[i] * 2 + floor(x[i]) + i32(x[i] * 4) + ceil(x[i]) * x[i]", {{"x", {5}}}},
    {"y[i,j] := (i <= j) ? a[i,j] * b[j] : -a[i,j]", {{"a", {4, 4}}, {"b", {4}}}},
    {"y[i] := (x[i] > 0 && w[i] < 0.5) ? x[i] * w[i] : x[i] - w[i]", {{"x", {6}}, {"w", {6}}}},
    {"y[i] := x[i] * i + size(x, 0)", {{"x", {4}}}},
    {"y[i] := (x[i] % 0.7) * 3", {{"x", {5}}}},
    // multi-statement programs: the chain rule through intermediates
    {"t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]",
     {{"w", {3, 4}}, {"x", {3, 5}}, {"b", {4}}}},
    {"y[i,j] := (w[k,i] - x[k,j]) ^ 2", {{"w", {3, 4}}, {"x", {3, 5}}}},
    {"s[i] := exp(x[i,j])\ny[i] := log(s[i])", {{"x", {3, 4}}}},
    {"e[i,j] := exp(x[i,j])\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]", {{"x", {3, 4}}}},
    {"mu[i] := x[i,j] / size(x,1)\nd[i,j] := x[i,j] - mu[i]\nv[i] := d[i,j] ^ 2 / size(x,1)\n"
     "y[i,j] := d[i,j] / sqrt(v[i] + 0.00001) * g[j] + b[j]",
     {{"x", {3, 5}}, {"g", {5}}, {"b", {5}}}},
    {"q[t,d] := x[t,e] * wq[e,d]\nk[t,d] := x[t,e] * wk[e,d]\ns[t,u] := q[t,d] * k[u,d]\n"
     "p[t,u] := exp(s[t,u])\nz[t] := p[t,u]\ny[t,d] := p[t,u] / z[t] * x[u,d]",
     {{"x", {3, 4}}, {"wq", {4, 4}}, {"wk", {4, 4}}}},
    {"h[i] := tanh(w1[i,j] * x[j])\ny := w2[i] * h[i]", {{"w1", {4, 3}}, {"x", {3}}, {"w2", {4}}}},
    // Element-wise calls whose derivative is a function of their value: the gradient reads the
    // stored value (t, s, r, c, u) instead of calling the function again ...
    {"t[i] := tanh(x[i] * w[i])\ns[i] := sigmoid(x[i] - w[i])\nr[i] := sqrt(x[i] * x[i] + 1)\n"
     "c[i] := cbrt(x[i] + 3)\nu[i,j] := exp(x[i] - w[j])\ny[i] := t[i] * s[i] + r[i] * c[i] + "
     "u[i,j]",
     {{"x", {4}}, {"w", {4}}}},
    // ... but not where the tensor holds something else at the end: a second writer, a sum.
    {"e[i] := exp(x[i])\ne[i] += x[i]\ny[i] := e[i] * e[i]", {{"x", {5}}}},
    {"e[i] := exp(x[i,j])\ny[i] := e[i] * x[i,0]", {{"x", {3, 4}}}},
    {"a[i] := x[i] * 2\nb[i] := x[i] * a[i]\ny[i] := a[i] + b[i]", {{"x", {5}}}},
    // gathers: the scatter of an embedding's gradient, with repeated indices
    {"y[b,d] := E[tok[b], d] * s[b]", {{"E", {4, 3}}, {"tok", {6}}, {"s", {6}}}, {}, {"E", "s"}},
    // selections and products
    {"(max) y[i] := x[i,j]", {{"x", {3, 4}}}},
    {"(min) y[i] := x[i+k] * w[k]", {{"x", {7}}, {"w", {3}}}},
    {"(max) y[i,j] := x[2i+a, 2j+b] where a in 0:2, b in 0:2", {{"x", {6, 7}}}},
    {"(max) y[i,j] := x[2i+a, 2j+b] where a in 0:3, b in 0:3", {{"x", {7, 9}}}},
    {"(max) s := x[i] * w[i]", {{"x", {5}}, {"w", {5}}}},
    // summands that round (stored once by the gradient), windows clipped at the borders
    {"(max) y[i] := x[i,j] * w[j] + b[i]", {{"x", {3, 5}}, {"w", {5}}, {"b", {3}}}},
    {"(max) y[i] := x[2i+a-1] * w[a] where i in 0:fdiv(size(x,0)+1, 2), "
     "a in max(0, 1-2i):min(3, size(x,0)+1-2i)",
     {{"x", {9}}, {"w", {3}}},
     {},
     {"x"}}, // (the scatter-form reference cannot express dw over a's range)
    {"(min) y[i] := x[pad(i+k)] * w[k+1] where i in 0:size(x,0), k in -1:2",
     {{"x", {6}}, {"w", {3}}}},
    {"(max) y[i,j] := x[2i+a-1, 2j+b-1] where i in 0:fdiv(size(x,0)+1, 2), "
     "j in 0:fdiv(size(x,1)+1, 2), a in max(0, 1-2i):min(3, size(x,0)+1-2i), "
     "b in max(0, 1-2j):min(3, size(x,1)+1-2j)",
     {{"x", {7, 8}}}},
    // the (max) output changed by a later statement: its extreme is recomputed, not read back
    {"(max) y[i] := x[i,j]\ny[i] += z[i]", {{"x", {3, 4}}, {"z", {3}}}},
    {"(*) y[i] := x[i,j]", {{"x", {3, 4}}}},
    {"(*) y[i] := x[i,j] + w[j]", {{"x", {2, 3}}, {"w", {3}}}},
    {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]",
     {{"x", {3, 4}}}},
    {"(max) m[i] := x[i,j]\ns[i] := exp(x[i,j] - m[i])\ny[i] := log(s[i]) + m[i]", {{"x", {3, 5}}}},
    {"q[t,d] := x[t,e] * wq[e,d]\ns[t,u] := q[t,d] * x[u,d]\n(max) m[t] := s[t,u]\n"
     "p[t,u] := exp(s[t,u] - m[t])\nz[t] := p[t,u]\ny[t,d] := p[t,u] / z[t] * x[u,d]",
     {{"x", {3, 4}}, {"wq", {4, 4}}}},
    // the requested subset only
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {3, 4}}, {"B", {4, 5}}}, {}, {"B"}},
};

// bf16 programs (f32 arithmetic, bf16 storage; contractions of two bf16 reads run on tensor cores
// on the GPU): the JIT and CUDA tests run them forward and gradient against the interpreter.
inline const std::vector<GradRow> kBf16Rows = {
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {257, 131}}, {"B", {131, 129}}}},
    {"C[i,k] := A[j,i] * B[j,k]", {{"A", {67, 200}}, {"B", {67, 190}}}},
    {"C[i,k] := A[i,j] * B[k,j]", {{"A", {150, 77}}, {"B", {33, 77}}}},
    {"C[i,k] := A[j,i] * B[k,j]", {{"A", {45, 129}}, {"B", {140, 45}}}},
    {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {65, 40, 3}}, {"B", {3, 70, 40}}}},
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{"x", {2, 5, 21, 19}}, {"k", {12, 5, 3, 3}}}},
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {{"x", {3, 4, 23, 21}}, {"k", {9, 4, 3, 3}}}},
    {"t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]",
     {{"w", {49, 70}}, {"x", {49, 300}}, {"b", {70}}}},
    {"e[i,j] := exp(x[i,j])\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]", {{"x", {13, 40}}}},
    {"(max) y[i,j] := x[2i+a, 2j+b] where a in 0:3, b in 0:3", {{"x", {17, 19}}}},
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {40, 3001}}, {"B", {3001, 50}}}}, // split-K
    // at most 64 rows: the GPU's 64 x 256 tile, split along the reduction
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {50, 1100}}, {"B", {1100, 260}}}},
    // ... with a batch index: one 64 x 256 tile row per b (GPU)
    {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {40, 70, 2}}, {"B", {2, 300, 70}}}},
    // 64 channels: slices of the reduction within one filter tap (GPU)
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{"x", {2, 64, 12, 11}}, {"k", {64, 64, 3, 3}}}},
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
     {{"x", {2, 64, 13, 11}}, {"k", {64, 64, 3, 3}}}},
    // 16 images: the stride-2 weight gradient reduces over copies with n fastest (GPU)
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {{"x", {16, 8, 11, 9}}, {"k", {8, 8, 3, 3}}}},
};

// bf16 activations with f32 weights (docs/LANGUAGE.md "dtypes"): the tensors in `f32` are f32,
// the other floating-point ones bf16. Sizes reach the packed GEMM path (10^6 flops and more).
struct MixedRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  std::set<std::string> f32;
};

inline const std::vector<MixedRow> kMixedRows = {
    {"y[b,o] := x[b,i] * w[o,i]", {{"x", {64, 300}}, {"w", {200, 300}}}, {"w"}},
    {"t[b,o] := x[b,i] * w[o,i]\ny[b,o] := t[b,o] + c[o]",
     {{"x", {37, 129}}, {"w", {65, 129}}, {"c", {65}}},
     {"w", "c"}},
    {"C[i,k] := A[i,j] * B[j,k]", {{"A", {257, 131}}, {"B", {131, 129}}}, {"A"}},
    {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
     {{"x", {2, 8, 21, 19}}, {"k", {12, 8, 3, 3}}},
     {"k"}},
    {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
     {{"x", {3, 16, 23, 21}}, {"k", {16, 16, 3, 3}}},
     {"k"}},
    {"e[i,j] := exp(x[i,j] * s[j])\nz[i] := e[i,j]\ny[i,j] := e[i,j] / z[i]",
     {{"x", {13, 40}}, {"s", {40}}},
     {"s"}},
    {"y[b,d] := E[tok[b], d] * g[d]", {{"E", {50, 8}}, {"tok", {16}}, {"g", {8}}}, {"g"}},
    {"y[i] := x[i] * w[i] + x[i]", {{"x", {1000}}, {"w", {1000}}}, {"w"}},
};

// A random statement: indices i (output) and k, l (reductions); w reads every index bare so
// that all ranges are inferable; x reads random affine combinations of 1-3 indices with
// coefficients in -3..3, each dimension in pad(), clamp() or wrap(); a random function wraps
// one factor.
inline std::string randomStatement(std::mt19937_64& rng, std::map<std::string, Shape>& shapes) {
  const char* vars[] = {"i", "k", "l"};
  int nv = 2 + static_cast<int>(rng() % 2);
  auto coef = [&] { return static_cast<int>(rng() % 7) - 3; };
  std::string xs;
  int xr = 1 + static_cast<int>(rng() % 2);
  for (int d = 0; d < xr; ++d) {
    std::string sub;
    int used = 0;
    for (int v = 0; v < nv; ++v) {
      int c = coef();
      if (c == 0 || (used == 2 && rng() % 2)) continue;
      sub += (c < 0 ? "-" : (sub.empty() ? "" : "+")) +
             (std::abs(c) == 1 ? "" : std::to_string(std::abs(c))) + vars[v];
      ++used;
    }
    if (sub.empty()) sub = vars[rng() % static_cast<unsigned>(nv)];
    int off = static_cast<int>(rng() % 5) - 2;
    if (off != 0) sub += (off > 0 ? "+" : "-") + std::to_string(std::abs(off));
    const char* modes[] = {"pad(", "pad(", "pad(", "clamp(", "wrap("};
    xs += (d ? "," : "") + std::string(modes[rng() % 5]) + sub + ")";
  }
  std::string ws;
  Shape wshape;
  for (int v = 0; v < nv; ++v) {
    ws += (v ? "," : "") + std::string(vars[v]);
    wshape.push_back(2 + static_cast<std::int64_t>(rng() % 3));
  }
  shapes = {{"w", wshape},
            {"x", Shape(static_cast<std::size_t>(xr), 5 + static_cast<std::int64_t>(rng() % 4))}};
  const char* fns[] = {"", "tanh", "sigmoid", "exp", "sin"};
  std::string f = fns[rng() % 5];
  std::string xread = "x[" + xs + "]";
  if (!f.empty()) xread = f + "(" + xread + ")";
  const char* shapesOfY[] = {"y[i]", "y[i,k]"};
  std::string diag;
  for (int d = 0; d < xr; ++d) diag += d ? ",pad(i)" : "pad(i)";
  return std::string(shapesOfY[rng() % 2]) + " := " + xread + " * w[" + ws + "]" +
         (rng() % 2 ? " + x[" + diag + "] * w[" + ws + "]" : "");
}

} // namespace einjit::test
