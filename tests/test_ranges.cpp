// Range inference: a table of programs, argument shapes and scalars, with the concrete index
// ranges worked out by hand from the rules of the language (DESIGN.md, "The language"):
//   - a bare index in dimension d of x ranges over 0:size(x,d), and all bare uses must agree;
//     its other uses never narrow that range: an access it pushes out of bounds is an error;
//   - an index with neither a bare use nor a 'where' takes the largest range for which every
//     affine access is in bounds for all values of the other indices (the intersection);
//   - 'where i in lo:hi' is authoritative (half-open); an access it pushes out of bounds is an
//     error unless that dimension is wrapped in pad/clamp/wrap;
//   - pad/clamp/wrap dimensions and gathered dimensions do not bound an index;
//   - an index that cannot be inferred is an error naming it;
//   - a ':=' output index whose (non-empty) range starts below 0 is an error;
//   - a range may be empty (hi <= lo); the output extent is then max(hi, 0).
// For a subset of rows the symbolic text of describeRanges is checked too (its printed form
// was taken from einjit; that it evaluates to the hand-derived numbers is checked by bind).
#include "TestSupport.h"

#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "dsl/SymExpr.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Shape;

namespace {

struct RangeRow {
  const char* program;
  // Argument shapes by tensor name (dtype f32 unless named in `ints`).
  std::vector<std::pair<std::string, Shape>> shapes;
  std::vector<std::pair<std::string, double>> scalars = {};
  // Per statement "i=lo:hi k=lo:hi", statements separated by " ; ". Hand-derived.
  const char* ranges = "";
  // ':=' outputs in statement order, "y=8x3" ("y=scalar" for rank 0). Hand-derived.
  const char* outputs = "";
  // When set, the exact text of describeRanges(check(program)).
  const char* symbolic = nullptr;
  // When set, check() or bind() must throw an einjit::Error whose message contains it.
  const char* error = nullptr;
  // Tensors that are integer gather indices (passed as i64).
  std::vector<std::string> ints = {};
};

// clang-format off
const std::vector<RangeRow> kRows = {
  // --- bare uses ---------------------------------------------------------------------------
  {.program = "y[i,j] := a[i,j] + b[i,j]",
   .shapes = {{"a", {3, 4}}, {"b", {3, 4}}},
   .ranges = "i=0:3 j=0:4", .outputs = "y=3x4",
   .symbolic = "y[i, j] := a[i, j] + b[i, j]\n"
               "  i in 0:size(a,0)\n"
               "  j in 0:size(a,1)\n"},
  {.program = "c[i,j] := a[i,k] * b[k,j]",
   .shapes = {{"a", {2, 5}}, {"b", {5, 7}}},
   .ranges = "i=0:2 j=0:7 k=0:5", .outputs = "c=2x7",
   .symbolic = "c[i, j] := a[i, k] * b[k, j]\n"
               "  i in 0:size(a,0)\n"
               "  j in 0:size(b,1)\n"
               "  k in 0:size(a,1)\n"},
  {.program = "c[i,j] := a[i,k] * b[k,j]",
   .shapes = {{"a", {2, 5}}, {"b", {4, 7}}},
   .error = "index 'k' ranges over 4 (dimension 0 of 'b') here but over 5 (dimension 1 of 'a')"},
  {.program = "y[i] := x[i,i]",
   .shapes = {{"x", {4, 5}}},
   .error = "index 'i' ranges over 5 (dimension 1 of 'x') here but over 4 (dimension 0 of 'x')"},
  {.program = "y[i] := x[i,i]",
   .shapes = {{"x", {4, 4}}},
   .ranges = "i=0:4", .outputs = "y=4"},
  {.program = "y[j,i] := x[i,j]",
   .shapes = {{"x", {3, 5}}},
   .ranges = "j=0:5 i=0:3", .outputs = "y=5x3",
   .symbolic = "y[j, i] := x[i, j]\n"
               "  j in 0:size(x,1)\n"
               "  i in 0:size(x,0)\n"},
  {.program = "c[b,i,j] := a[b,i,k] * d[b,k,j]",
   .shapes = {{"a", {2, 3, 4}}, {"d", {2, 4, 5}}},
   .ranges = "b=0:2 i=0:3 j=0:5 k=0:4", .outputs = "c=2x3x5"},

  // --- affine subscripts -------------------------------------------------------------------
  // 0 <= i+k <= 9 for k in 0:3: i in 0:8.
  {.program = "y[i] := x[i+k]*w[k]",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:8 k=0:3", .outputs = "y=8",
   .symbolic = "y[i] := x[i + k] * w[k]\n"
               "  i in 0:size(x,0) - size(w,0) + 1\n"
               "  k in 0:size(w,0)\n"},
  // 2i+2 <= 9: i <= 3.
  {.program = "y[i] := x[2i+k]*w[k]",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:4 k=0:3", .outputs = "y=4",
   .symbolic = "y[i] := x[2i + k] * w[k]\n"
               "  i in 0:fdiv(size(x,0) - size(w,0), 2) + 1\n"
               "  k in 0:size(w,0)\n"},
  // 2i+2 <= 10: i <= 4.
  {.program = "y[i] := x[2i+k]*w[k]",
   .shapes = {{"x", {11}}, {"w", {3}}},
   .ranges = "i=0:5 k=0:3", .outputs = "y=5"},
  // 2i+3*3 <= 19: i <= 5.
  {.program = "y[i] := x[2i+3k]*w[k]",
   .shapes = {{"x", {20}}, {"w", {4}}},
   .ranges = "i=0:6 k=0:4", .outputs = "y=6",
   .symbolic = "y[i] := x[2i + 3k] * w[k]\n"
               "  i in 0:fdiv(size(x,0) - 3*size(w,0) + 2, 2) + 1\n"
               "  k in 0:size(w,0)\n"},
  // Dilation: i+2*2 <= 9: i <= 5.
  {.program = "y[i] := x[i+2k]*w[k]",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:6 k=0:3", .outputs = "y=6",
   .symbolic = "y[i] := x[i + 2k] * w[k]\n"
               "  i in 0:size(x,0) - 2*size(w,0) + 2\n"
               "  k in 0:size(w,0)\n"},
  // 2i <= 7: i <= 3.
  {.program = "y[i] := x[2i]",
   .shapes = {{"x", {8}}},
   .ranges = "i=0:4", .outputs = "y=4",
   .symbolic = "y[i] := x[2i]\n"
               "  i in 0:fdiv(size(x,0) - 1, 2) + 1\n"},
  // 2i <= -1: no i at all, the range is empty.
  {.program = "y[i] := x[2i]",
   .shapes = {{"x", {0}}},
   .ranges = "i=0:0", .outputs = "y=0"},
  // 0 <= 10-2i <= 7: 3/2 <= i <= 5.
  {.program = "y[i] := x[10 - 2i]",
   .shapes = {{"x", {8}}},
   .ranges = "i=2:6", .outputs = "y=6"},
  // 0 <= -i <= 4: i in -4:1, fine for a reduction index...
  {.program = "s := x[-i]",
   .shapes = {{"x", {5}}},
   .ranges = "i=-4:1", .outputs = "s=scalar",
   .symbolic = "s := x[-i]\n"
               "  i in -size(x,0) + 1:1\n"},
  // ...an error for an output index...
  {.program = "y[i] := x[-i]",
   .shapes = {{"x", {5}}},
   .error = "the range of output index 'i' starts at -4, below 0"},
  // ...unless the tensor has one element.
  {.program = "y[i] := x[-i]",
   .shapes = {{"x", {1}}},
   .ranges = "i=0:1", .outputs = "y=1"},
  // 0 <= N-1-i <= 4 with N = 5: i in 0:5.
  {.program = "y[i] := x[N-1-i]",
   .shapes = {{"x", {5}}}, .scalars = {{"N", 5}},
   .ranges = "i=0:5", .outputs = "y=5",
   .symbolic = "y[i] := x[N - 1 - i]\n"
               "  i in N - size(x,0):N\n"},
  // 0 <= 4-i <= 2: i in 2:5, the output keeps index identity (extent 5).
  {.program = "y[i] := x[N-1-i]",
   .shapes = {{"x", {3}}}, .scalars = {{"N", 5}},
   .ranges = "i=2:5", .outputs = "y=5"},
  // 4-i <= 7: i >= -3.
  {.program = "y[i] := x[N-1-i]",
   .shapes = {{"x", {8}}}, .scalars = {{"N", 5}},
   .error = "the range of output index 'i' starts at -3, below 0"},
  // 0 <= i-N <= 9 with N = 2: i in 2:12.
  {.program = "y[i] := x[i - N]",
   .shapes = {{"x", {10}}}, .scalars = {{"N", 2}},
   .ranges = "i=2:12", .outputs = "y=12",
   .symbolic = "y[i] := x[i - N]\n"
               "  i in N:N + size(x,0)\n"},
  {.program = "s := x[i + N]",
   .shapes = {{"x", {10}}}, .scalars = {{"N", 2}},
   .ranges = "i=-2:8", .outputs = "s=scalar"},
  // 0 <= i-j <= 9 for j in 0:4: i in 3:10.
  {.program = "y[i,j] := x[i-j]*w[j]",
   .shapes = {{"x", {10}}, {"w", {4}}},
   .ranges = "i=3:10 j=0:4", .outputs = "y=10x4",
   .symbolic = "y[i, j] := x[i - j] * w[j]\n"
               "  i in size(w,0) - 1:size(x,0)\n"
               "  j in 0:size(w,0)\n"},
  // i+j-k: smallest i+0-1 >= 0, largest i+2-0 <= 9.
  {.program = "y[i] := x[i+j-k]*w[j,k]",
   .shapes = {{"x", {10}}, {"w", {3, 2}}},
   .ranges = "i=1:8 j=0:3 k=0:2", .outputs = "y=8",
   .symbolic = "y[i] := x[i + j - k] * w[j, k]\n"
               "  i in size(w,1) - 1:size(x,0) - size(w,0) + 1\n"
               "  j in 0:size(w,0)\n"
               "  k in 0:size(w,1)\n"},
  // --- a bare use fixes the range: other uses never narrow it --------------------------------
  // x[i] fixes i to 0:10, so x[i+1] reads x[10]: an error, not a shorter y.
  {.program = "y[i] := x[i+1] - x[i]",
   .shapes = {{"x", {10}}},
   .error = "subscript 'i+1' goes out of bounds: it reaches 10 but dimension 0 of 'x' has "
            "extent 10"},
  {.program = "y[i] := x[i+1] - x[i]",
   .shapes = {{"x", {10}}},
   .error = "note: a bare use fixes the range: i in 0:10"},
  {.program = "y[i] := x[i+1] - x[i] where i in 0:size(x,0)-1",
   .shapes = {{"x", {10}}},
   .ranges = "i=0:9", .outputs = "y=9",
   .symbolic = "y[i] := x[i + 1] - x[i] where i in 0:size(x, 0) - 1\n"
               "  i in 0:size(x,0) - 1\n"},
  // Without a bare use, shifted uses intersect.
  {.program = "y[i] := x[i-1] + x[i+1]",
   .shapes = {{"x", {10}}},
   .ranges = "i=1:9", .outputs = "y=9",
   .symbolic = "y[i] := x[i - 1] + x[i + 1]\n"
               "  i in 1:size(x,0) - 1\n"},
  {.program = "y[i] := x[i] + z[i+1]",
   .shapes = {{"x", {10}}, {"z", {5}}},
   .error = "subscript 'i+1' goes out of bounds: it reaches 10 but dimension 0 of 'z' has "
            "extent 5"},
  // Fits: i in 0:4 from x, i+1 <= 4.
  {.program = "y[i] := x[i] + z[i+1]",
   .shapes = {{"x", {4}}, {"z", {5}}},
   .ranges = "i=0:4", .outputs = "y=4",
   .symbolic = "y[i] := x[i] + z[i + 1]\n"
               "  i in 0:size(x,0)\n"},
  {.program = "y[i] := x[i] * z[2i]",
   .shapes = {{"x", {10}}, {"z", {10}}},
   .error = "subscript '2i' goes out of bounds: it reaches 18 but dimension 0 of 'z' has "
            "extent 10"},
  {.program = "y[i] := x[i] * z[2i]",
   .shapes = {{"x", {5}}, {"z", {10}}},
   .ranges = "i=0:5", .outputs = "y=5"},
  // The five-point stencil: x[i,j-1] fixes i to all rows, so x[i-1,j] leaves the tensor.
  {.program = "y[i,j] := x[i-1,j] + x[i+1,j] + x[i,j-1] + x[i,j+1]",
   .shapes = {{"x", {5, 6}}},
   .error = "subscript 'i-1' goes out of bounds: it reaches -1 but dimension 0 of 'x' has "
            "extent 5"},
  {.program = "y[i,j] := x[i-1,j] + x[i+1,j] + x[i,j-1] + x[i,j+1] "
              "where i in 1:size(x,0)-1, j in 1:size(x,1)-1",
   .shapes = {{"x", {5, 6}}},
   .ranges = "i=1:4 j=1:5", .outputs = "y=4x5"},
  {.program = "y[i,j] := x[i+1,j] - x[i,j+1]",
   .shapes = {{"x", {5, 6}}},
   .error = "subscript 'i+1' goes out of bounds: it reaches 5"},
  // The example: 'where' fixes i, w[k] fixes k; x[i+k] would need a narrower k.
  {.program = "y[i] := x[i+k]*w[k] where i in 0:size(x,0)",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .error = "subscript 'i+k' goes out of bounds: it reaches 11 but dimension 0 of 'x' has "
            "extent 10"},
  {.program = "y[i] := x[i+k]*w[k] where i in 0:size(x,0)",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .error = "note: a bare use fixes the range: k in 0:3"},
  // A gather fixes nothing, its index tensor's bare use does: tok[i] fixes i, x[i+1] leaves x.
  {.program = "y[i] := E[tok[i]] * x[i+1]",
   .shapes = {{"E", {10}}, {"tok", {4}}, {"x", {4}}},
   .error = "subscript 'i+1' goes out of bounds: it reaches 4 but dimension 0 of 'x' has "
            "extent 4",
   .ints = {"tok"}},
  // k is bounded only through i once i is known: 0 <= i+k <= 9 for i in 0:4.
  {.program = "y[i] := x[i] * z[i+k]",
   .shapes = {{"x", {4}}, {"z", {10}}},
   .ranges = "i=0:4 k=0:7", .outputs = "y=4",
   .symbolic = "y[i] := x[i] * z[i + k]\n"
               "  i in 0:size(x,0)\n"
               "  k in 0:size(z,0) - size(x,0) + 1\n"},
  // k bare in w[k] ranges over all of w (0:3), i bare in a over all of a (0:9): x[i+k]
  // reaches 10, an error (narrowing either would silently drop terms).
  {.program = "y[i] := a[i] * x[i+k] * w[k]",
   .shapes = {{"a", {9}}, {"x", {10}}, {"w", {3}}},
   .error = "subscript 'i+k' goes out of bounds: it reaches 10 but dimension 0 of 'x' has "
            "extent 10"},
  {.program = "y[i] := a[i] * x[i+k] * w[k]",
   .shapes = {{"a", {8}}, {"x", {10}}, {"w", {3}}},
   .ranges = "i=0:8 k=0:3", .outputs = "y=8"},
  // Strided 2-d convolution, NCHW: 2h+2 <= 8 gives h <= 3; 2w+1 <= 9 gives w <= 4.
  {.program = "y[n,o,h,w] := x[n,c,2h+a,2w+b]*k[o,c,a,b]",
   .shapes = {{"x", {2, 3, 9, 10}}, {"k", {4, 3, 3, 2}}},
   .ranges = "n=0:2 o=0:4 h=0:4 w=0:5 c=0:3 a=0:3 b=0:2", .outputs = "y=2x4x4x5",
   .symbolic = "y[n, o, h, w] := x[n, c, 2h + a, 2w + b] * k[o, c, a, b]\n"
               "  n in 0:size(x,0)\n"
               "  o in 0:size(k,0)\n"
               "  h in 0:fdiv(size(x,2) - size(k,2), 2) + 1\n"
               "  w in 0:fdiv(size(x,3) - size(k,3), 2) + 1\n"
               "  c in 0:size(x,1)\n"
               "  a in 0:size(k,2)\n"
               "  b in 0:size(k,3)\n"},

  // --- gathers: the gathered dimension does not bound ---------------------------------------
  {.program = "y[b,t,d] := E[tok[b,t], d]",
   .shapes = {{"E", {100, 16}}, {"tok", {2, 5}}},
   .ranges = "b=0:2 t=0:5 d=0:16", .outputs = "y=2x5x16",
   .symbolic = "y[b, t, d] := E[tok[b, t], d]\n"
               "  b in 0:size(tok,0)\n"
               "  t in 0:size(tok,1)\n"
               "  d in 0:size(E,1)\n",
   .ints = {"tok"}},
  {.program = "y[i,d] := E[tok[i] + 1, d]",
   .shapes = {{"E", {10, 3}}, {"tok", {5}}},
   .ranges = "i=0:5 d=0:3", .outputs = "y=5x3", .ints = {"tok"}},
  // The index tensor's own subscript bounds as usual: 2i <= 6.
  {.program = "y[i] := E[tok[2i]]",
   .shapes = {{"E", {10}}, {"tok", {7}}},
   .ranges = "i=0:4", .outputs = "y=4", .ints = {"tok"}},

  // --- pad / clamp / wrap and 'where' --------------------------------------------------------
  {.program = "y[i] := x[pad(i+k-1)] * w[k] where i in 0:size(x,0)",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:10 k=0:3", .outputs = "y=10",
   .symbolic = "y[i] := x[pad(i + k - 1)] * w[k] where i in 0:size(x, 0)\n"
               "  i in 0:size(x,0)\n"
               "  k in 0:size(w,0)\n"},
  {.program = "y[i,j] := x[pad(i+a-1), pad(j+b-1)] * k[a,b] "
              "where i in 0:size(x,0), j in 0:size(x,1)",
   .shapes = {{"x", {6, 7}}, {"k", {3, 3}}},
   .ranges = "i=0:6 j=0:7 a=0:3 b=0:3", .outputs = "y=6x7"},
  {.program = "y[i] := x[clamp(i-1)] + x[i]",
   .shapes = {{"x", {10}}},
   .ranges = "i=0:10", .outputs = "y=10"},
  {.program = "y[i] := x[wrap(i+1)] - x[i]",
   .shapes = {{"x", {10}}},
   .ranges = "i=0:10", .outputs = "y=10"},
  // 'where' is authoritative: a narrower range than inference would give...
  {.program = "y[i] := x[i] where i in 2:5",
   .shapes = {{"x", {10}}},
   .ranges = "i=2:5", .outputs = "y=5",
   .symbolic = "y[i] := x[i] where i in 2:5\n"
               "  i in 2:5\n"},
  {.program = "y[i] := x[i+k] * w[k] where i in 0:3",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:3 k=0:3", .outputs = "y=3"},
  {.program = "y[i] := x[pad(i)] where i in 3:6",
   .shapes = {{"x", {4}}},
   .ranges = "i=3:6", .outputs = "y=6"},
  // ...a range below 0 for a reduction index under pad...
  {.program = "s := x[pad(i)] where i in -2:12",
   .shapes = {{"x", {10}}},
   .ranges = "i=-2:12", .outputs = "s=scalar"},
  // ...and a 'where' range on one index drives the inference of another: i-1 >= 0, i+1 <= 9.
  {.program = "y[i] := x[i+k] where k in -1:2",
   .shapes = {{"x", {10}}},
   .ranges = "i=1:9 k=-1:2", .outputs = "y=9",
   .symbolic = "y[i] := x[i + k] where k in -1:2\n"
               "  i in 1:size(x,0) - 1\n"
               "  k in -1:2\n"},
  // Max pooling, window 2 stride 2: 2i+1 <= 8.
  {.program = "(max) y[i] := x[2i+k] where k in 0:2",
   .shapes = {{"x", {9}}},
   .ranges = "i=0:4 k=0:2", .outputs = "y=4",
   .symbolic = "(max) y[i] := x[2i + k] where k in 0:2\n"
               "  i in 0:fdiv(size(x,0) - 2, 2) + 1\n"
               "  k in 0:2\n"},
  // 'where' pushing an access out of bounds is an error.
  {.program = "y[i] := x[i+1] where i in 0:10",
   .shapes = {{"x", {10}}},
   .error = "subscript 'i+1' goes out of bounds: it reaches 10 but dimension 0 of 'x' has "
            "extent 10"},
  {.program = "s := x[i-1] where i in 0:3",
   .shapes = {{"x", {10}}},
   .error = "subscript 'i-1' goes out of bounds: it reaches -1"},
  {.program = "y[i] := x[pad(i)] where i in -2:12",
   .shapes = {{"x", {10}}},
   .error = "the range of output index 'i' starts at -2, below 0"},
  // size() and scalar parameters in 'where' bounds.
  {.program = "y[i] := x[i] + x[i+1] where i in 0:size(x,0)-1",
   .shapes = {{"x", {10}}},
   .ranges = "i=0:9", .outputs = "y=9",
   .symbolic = "y[i] := x[i] + x[i + 1] where i in 0:size(x, 0) - 1\n"
               "  i in 0:size(x,0) - 1\n"},
  {.program = "y[i] := x[i+N] where i in 0:size(x,0)-N",
   .shapes = {{"x", {10}}}, .scalars = {{"N", 3}},
   .ranges = "i=0:7", .outputs = "y=7",
   .symbolic = "y[i] := x[i + N] where i in 0:size(x, 0) - N\n"
               "  i in 0:size(x,0) - N\n"},
  {.program = "y[i] := x[i] where i in N:M",
   .shapes = {{"x", {10}}}, .scalars = {{"N", 2}, {"M", 6}},
   .ranges = "i=2:6", .outputs = "y=6",
   .symbolic = "y[i] := x[i] where i in N:M\n"
               "  i in N:M\n"},
  {.program = "y[i] := x[i] where i in 0:N",
   .shapes = {{"x", {10}}}, .scalars = {{"N", 12}},
   .error = "subscript 'i' goes out of bounds: it reaches 11 but dimension 0 of 'x' has "
            "extent 10"},

  // --- errors found without shapes ------------------------------------------------------------
  {.program = "y[i] := x[pad(i)]", .shapes = {},
   .error = "cannot infer the range of index 'i'"},
  {.program = "y[i] := x[i] * w[clamp(k)]", .shapes = {},
   .error = "cannot infer the range of index 'k'"},
  {.program = "y[i,j] := x[i+j]", .shapes = {},
   .error = "cannot infer the range of index 'i'"},
  {.program = "y[i] := 1.0", .shapes = {},
   .error = "cannot infer the range of index 'i'"},
  {.program = "y[i] := x[i+1]", .shapes = {},
   .error = "the range of output index 'i' starts at -1, below 0"},

  // --- empty ranges -------------------------------------------------------------------------
  // 0:10-5+1: empty, the output has no element.
  {.program = "y[i] := x[i+k]*w[k]",
   .shapes = {{"x", {2}}, {"w", {5}}},
   .ranges = "i=0:-2 k=0:5", .outputs = "y=0"},
  {.program = "s := x[i+k]*w[k]",
   .shapes = {{"x", {2}}, {"w", {5}}},
   .ranges = "i=0:-2 k=0:5", .outputs = "s=scalar"},
  {.program = "y[i] := x[i-1] + x[i+1]",
   .shapes = {{"x", {1}}},
   .ranges = "i=1:0", .outputs = "y=0"},
  {.program = "y[i] := x[i]",
   .shapes = {{"x", {0}}},
   .ranges = "i=0:0", .outputs = "y=0"},
  // x[-i] gives -4:1, w[i+3] gives -3:-3: empty, so starting below 0 is no error.
  {.program = "y[i] := x[-i] * w[i+3]",
   .shapes = {{"x", {5}}, {"w", {0}}},
   .ranges = "i=-3:-3", .outputs = "y=0"},

  // --- several statements ------------------------------------------------------------------
  // t has extent 8; then 1 <= i <= 8-2.
  {.program = "t[i] := x[i+k]*w[k]; y[i] := t[i-1] + t[i+1]",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:8 k=0:3 ; i=1:7", .outputs = "t=8 y=7",
   .symbolic = "t[i] := x[i + k] * w[k]\n"
               "  i in 0:size(x,0) - size(w,0) + 1\n"
               "  k in 0:size(w,0)\n"
               "y[i] := t[i - 1] + t[i + 1]\n"
               "  i in 1:size(t,0) - 1\n"},
  // a: 2i <= 8 gives 5; b: 0:4; c sums b.
  {.program = "a[i] := x[2i]; b[i] := a[i] * a[i+1] where i in 0:size(a,0)-1; c := b[i]",
   .shapes = {{"x", {9}}},
   .ranges = "i=0:5 ; i=0:4 ; i=0:4", .outputs = "a=5 b=4 c=scalar"},
  {.program = "t[i] := x[i+k]*w[k]\ny[i] := t[pad(i-1)] where i in 0:size(t,0)+2",
   .shapes = {{"x", {10}}, {"w", {3}}},
   .ranges = "i=0:8 k=0:3 ; i=0:10", .outputs = "t=8 y=10"},
  // A later '=' statement: y (4) and t[i+1] (t has 6) both bound i.
  {.program = "t[i] := x[i]*2; y[i] = t[i+1]",
   .shapes = {{"x", {6}}, {"y", {4}}},
   .ranges = "i=0:6 ; i=0:4", .outputs = "t=6"},

  // --- '=' outputs: their shape constrains the range --------------------------------------
  {.program = "y[i] = x[i+k]*w[k]",
   .shapes = {{"y", {5}}, {"x", {10}}, {"w", {3}}},
   .ranges = "i=0:5 k=0:3"},
  // The left-hand side is a bare use: all of y is written, or it is an error (a narrower i
  // would leave y[8] with its old value).
  {.program = "y[i] = x[i+k]*w[k]",
   .shapes = {{"y", {9}}, {"x", {10}}, {"w", {3}}},
   .error = "subscript 'i+k' goes out of bounds: it reaches 10"},
  {.program = "y[i] = x[i+1]",
   .shapes = {{"y", {10}}, {"x", {10}}},
   .error = "note: a bare use fixes the range: i in 0:10"},
  {.program = "y[i] = x[i+1]",
   .shapes = {{"y", {9}}, {"x", {10}}},
   .ranges = "i=0:9",
   .symbolic = "y[i] = x[i + 1]\n"
               "  i in 0:size(y,0)\n"},
  {.program = "y[i] = x[i]",
   .shapes = {{"y", {4}}, {"x", {5}}},
   .error = "index 'i' ranges over 5 (dimension 0 of 'x') here but over 4 (dimension 0 of 'y')"},
  {.program = "y[i,j] += a[i,k] * b[k,j]",
   .shapes = {{"y", {2, 7}}, {"a", {2, 5}}, {"b", {5, 7}}},
   .ranges = "i=0:2 j=0:7 k=0:5"},
  {.program = "y := x[0] * 2",
   .shapes = {{"x", {3}}},
   .ranges = "", .outputs = "y=scalar"},
};
// clang-format on

std::string shapeText(const std::vector<std::int64_t>& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

std::string rangesText(const einjit::dsl::Program& p, const einjit::dsl::BoundProgram& b) {
  std::string out;
  for (std::size_t s = 0; s < p.stmts.size(); ++s) {
    if (s) out += " ; ";
    const auto& st = p.stmts[s];
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      if (v) out += ' ';
      out += st.vars[v].name + "=" + std::to_string(b.stmts[s].lo[v]) + ":" +
             std::to_string(b.stmts[s].hi[v]);
    }
  }
  return out;
}

std::string outputsText(const einjit::dsl::Program& p, const einjit::dsl::BoundProgram& b) {
  std::string out;
  for (const auto& st : p.stmts) {
    if (st.assign != einjit::dsl::Assign::Define) continue;
    if (!out.empty()) out += ' ';
    const auto& t = p.tensors[static_cast<std::size_t>(st.output)];
    out += t.name + "=" + shapeText(b.tensors[static_cast<std::size_t>(st.output)].shape);
  }
  return out;
}

bool isInt(const RangeRow& row, const std::string& name) {
  for (const auto& n : row.ints)
    if (n == name) return true;
  return false;
}

std::vector<einjit::dsl::ArgSpec> argSpecs(const RangeRow& row, const einjit::dsl::Program& p) {
  std::vector<einjit::dsl::ArgSpec> args;
  for (int id : p.arguments) {
    const std::string& name = p.tensors[static_cast<std::size_t>(id)].name;
    bool found = false;
    for (const auto& [n, shape] : row.shapes)
      if (n == name) {
        args.push_back({isInt(row, name) ? DType::i64 : DType::f32, shape});
        found = true;
      }
    REQUIRE_MESSAGE(found, "the row gives no shape for argument '" << name << "'");
  }
  return args;
}

std::vector<double> paramValues(const RangeRow& row, const einjit::dsl::Program& p) {
  std::vector<double> params;
  for (const auto& prm : p.params) {
    bool found = false;
    for (const auto& [n, v] : row.scalars)
      if (n == prm.name) {
        params.push_back(v);
        found = true;
      }
    REQUIRE_MESSAGE(found, "the row gives no value for parameter '" << prm.name << "'");
  }
  return params;
}

} // namespace

TEST_CASE("range table: every statement prints and reparses to the same tree") {
  for (const RangeRow& row : kRows) einjit::test::checkRoundTrip(row.program);
}

TEST_CASE("range table: the table is big enough and covers its kinds") {
  CHECK(kRows.size() >= 34);
  int errors = 0, symbolic = 0;
  for (const auto& r : kRows) {
    errors += r.error ? 1 : 0;
    symbolic += r.symbolic ? 1 : 0;
  }
  CHECK(errors >= 10);
  CHECK(symbolic >= 20);
}

TEST_CASE("range table: concrete ranges, output shapes and symbolic ranges") {
  for (const RangeRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    if (row.error) {
      std::string message;
      try {
        einjit::dsl::Program p = einjit::dsl::check(row.program);
        einjit::dsl::bind(p, argSpecs(row, p), paramValues(row, p));
      } catch (const einjit::Error& e) {
        message = e.what();
        CHECK(e.line() >= 1);
        CHECK(e.column() >= 1);
      }
      CAPTURE(message);
      CHECK_MESSAGE(message.find(row.error) != std::string::npos,
                    "expected an error containing: " << std::string(row.error));
      continue;
    }
    einjit::dsl::Program p;
    REQUIRE_NOTHROW(p = einjit::dsl::check(row.program));
    if (row.symbolic) CHECK(einjit::dsl::describeRanges(p) == std::string(row.symbolic));
    einjit::dsl::BoundProgram b;
    try {
      b = einjit::dsl::bind(p, argSpecs(row, p), paramValues(row, p));
    } catch (const einjit::Error& e) {
      FAIL_CHECK("bind failed: " << std::string(e.what()));
      continue;
    }
    CHECK(rangesText(p, b) == std::string(row.ranges));
    CHECK(outputsText(p, b) == std::string(row.outputs));
    // BoundStatement::empty agrees with the ranges.
    for (std::size_t s = 0; s < b.stmts.size(); ++s) {
      bool empty = false;
      for (std::size_t v = 0; v < b.stmts[s].lo.size(); ++v)
        empty = empty || b.stmts[s].hi[v] <= b.stmts[s].lo[v];
      CHECK(b.stmts[s].empty == empty);
    }
  }
}

TEST_CASE("range table: the symbolic bounds evaluate to the concrete ones") {
  for (const RangeRow& row : kRows) {
    if (row.error) continue;
    std::string program = row.program;
    CAPTURE(program);
    einjit::dsl::Program p = einjit::dsl::check(row.program);
    einjit::dsl::BoundProgram b;
    try {
      b = einjit::dsl::bind(p, argSpecs(row, p), paramValues(row, p));
    } catch (const einjit::Error&) {
      continue; // reported by the test above
    }
    for (std::size_t s = 0; s < p.stmts.size(); ++s)
      for (std::size_t v = 0; v < p.stmts[s].vars.size(); ++v) {
        const auto& iv = p.stmts[s].vars[v];
        CAPTURE(iv.name);
        CAPTURE(einjit::dsl::symPrint(iv.lo));
        CAPTURE(einjit::dsl::symPrint(iv.hi));
        CHECK(b.eval(p, iv.lo) == b.stmts[s].lo[v]);
        CHECK(b.eval(p, iv.hi) == b.stmts[s].hi[v]);
      }
  }
}

TEST_CASE("range table: a kernel call allocates ':=' outputs with the inferred shapes") {
  for (const RangeRow& row : kRows) {
    if (row.error || !row.ints.empty()) continue;
    std::string program = row.program;
    CAPTURE(program);
    einjit::Options keep; // every assigned tensor's shape is checked
    keep.keepIntermediates = true;
    einjit::Kernel k = einjit::compile(row.program, keep);
    const einjit::dsl::Program& p = k.program();
    std::map<std::string, einjit::Tensor> tensors;
    std::uint64_t seed = 1;
    for (const auto& [name, shape] : row.shapes)
      tensors[name] = einjit::Tensor::random(shape, DType::f32, seed++);
    std::map<std::string, double> scalars(row.scalars.begin(), row.scalars.end());
    einjit::Outputs out;
    try {
      out = k.call(tensors, scalars);
    } catch (const einjit::Error& e) {
      FAIL_CHECK("call failed: " << std::string(e.what()));
      continue;
    }
    std::string shapes;
    for (const auto& st : p.stmts) {
      if (st.assign != einjit::dsl::Assign::Define) continue;
      const std::string& name = p.tensors[static_cast<std::size_t>(st.output)].name;
      if (!shapes.empty()) shapes += ' ';
      shapes += name + "=" + shapeText(out[name].shape());
    }
    CHECK(shapes == std::string(row.outputs));
  }
}

TEST_CASE("an output index range that starts above 0 leaves the elements below it zero") {
  // y[i,j] := x[i-j]*w[j] has i in 3:10 (x = 10, w = 4): rows 0..2 are zero, the rest hold
  // the products.
  einjit::Kernel k = einjit::compile("y[i,j] := x[i-j]*w[j]");
  einjit::Tensor x = einjit::Tensor::random({10}, DType::f64, 7);
  einjit::Tensor w = einjit::Tensor::random({4}, DType::f64, 8);
  einjit::Tensor y = k(x, w);
  REQUIRE(y.shape() == Shape{10, 4});
  for (std::int64_t i = 0; i < 10; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      double want = i >= 3 ? x.get({i - j}) * w.get({j}) : 0.0;
      CHECK(y.get({i, j}) == doctest::Approx(want));
    }
}

TEST_CASE("x[N-1-i] reverses: i in 2:5 for x of 3 and N = 5") {
  einjit::Kernel k = einjit::compile("y[i] := x[N-1-i]");
  einjit::Tensor x = einjit::Tensor::fromValues({3}, {1, 2, 3}, DType::f64);
  einjit::Tensor y = k(x, 5);
  CHECK(y.toVector() == std::vector<double>{0, 0, 3, 2, 1});
  // The reduction form sums every element once: i in -4:1 for x[-i].
  einjit::Kernel s = einjit::compile("s := x[-i]");
  einjit::Tensor t = s(einjit::Tensor::fromValues({5}, {1, 2, 3, 4, 5}, DType::f64));
  CHECK(t.toVector() == std::vector<double>{15});
}
