// Dumps what the code generators produce for every program of the test tables and the
// benchmark cases: each statement's schedule note and lowered IR for two fixed CPU targets,
// and the lowered IR and CUDA C for sm_90 and sm_80. The targets are fixed (not the host's), so
// two commits dumped on any machines can be diffed: an empty diff shows that a refactoring
// changed no generated code. Used by tools/dump-generated.sh.
//
//   dump_generated OUT_DIR     one file per case, and a count on stdout
// The tables include doctest (their checking helpers go unused here).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "CudaTables.h"
#include "GeneratedDump.h"
#include "GradTable.h"

#include <filesystem>
#include <fstream>
#include <iostream>

namespace {

using namespace einjit::test::generated;

std::vector<Case> cases() {
  std::vector<Case> out;
  auto withGradients = [&](const Case& c, const std::vector<std::string>& wrt) {
    out.push_back(c);
    out.push_back(gradientCase(c, wrt));
  };
  // The interpreter table, as its rows call it.
  for (const auto& row : einjit::test::interp::rows()) {
    Case c{row.program, {}, {}, DType::f64};
    std::size_t t = 0;
    try {
      const dsl::Program p = dsl::check(row.program);
      for (const einjit::Arg& a : row.args) {
        if (a.isTensor() && t < p.arguments.size()) {
          c.shapes[p.tensors[static_cast<std::size_t>(p.arguments[t++])].name] = a.tensor().shape();
          if (a.tensor().dtype() == DType::f32) c.dtype = DType::f32;
        } else if (!a.isTensor()) {
          c.params.push_back(a.scalar());
        }
      }
    } catch (const std::exception&) {
    }
    out.push_back(c);
    if (c.dtype == DType::f64) {
      c.dtype = DType::f32; // the GPU's main dtype
      out.push_back(c);
    }
  }
  // The gradient table: forward and gradients, f64 and f32; bf16 rows.
  for (const auto& row : einjit::test::kGradRows)
    for (DType dt : {DType::f64, DType::f32}) {
      std::vector<double> params;
      for (const auto& [name, v] : row.scalars) params.push_back(v);
      withGradients({row.program, row.shapes, params, dt}, row.wrt);
    }
  for (const auto& row : einjit::test::kBf16Rows)
    withGradients({row.program, row.shapes, {}, DType::bf16, false, true}, row.wrt);
  // The GPU tile tables, f32 and bf16, forward and gradients.
  for (DType dt : {DType::f32, DType::bf16}) {
    for (const auto& c : einjit::test::kConvGrads)
      withGradients({c.program, {{"x", c.x}, {"k", c.k}}, {}, dt, false, true}, {});
    for (const auto& t : einjit::test::kVectorTiles)
      withGradients({t.program, t.shapes, {}, dt, false, true}, {});
    for (const auto& t : einjit::test::kOddTiles)
      withGradients({t.program, t.shapes, {}, dt, false, true}, {});
    for (const auto& t : einjit::test::kWarpgroupTiles)
      withGradients({t.program, t.shapes, {}, dt, false, true}, {});
  }
  // The benchmark cases (bench/bench_cpu*.cpp, bench/bench_cuda.cpp) at their sizes.
  const char* forms[] = {"C[i,k] := A[i,j] * B[j,k]", "C[i,k] := A[j,i] * B[j,k]",
                         "C[i,k] := A[i,j] * B[k,j]", "C[i,k] := A[j,i] * B[k,j]"};
  for (const char* f : forms)
    for (std::int64_t n : {256, 1000, 1024, 4096})
      out.push_back({f, {{"A", {n, n}}, {"B", {n, n}}}, {}, DType::f32});
  for (DType dt : {DType::f32, DType::bf16}) {
    withGradients({"C[i,k,b] := A[i,j,b] * B[b,k,j]",
                   {{"A", {1024, 1024, 16}}, {"B", {16, 1024, 1024}}},
                   {},
                   dt},
                  {});
    const Shapes linear{{"w", {784, 1024}}, {"x", {784, 4096}}, {"b", {1024}}};
    withGradients({"t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]", linear, {}, dt}, {});
    withGradients({"y[i,j] := (w[k,i] - x[k,j]) ^ 2", linear, {}, dt}, {});
    struct Conv {
      std::int64_t n, c, o, h, k;
      int stride;
    };
    for (const Conv& v : {Conv{8, 64, 64, 56, 3, 1}, Conv{8, 64, 64, 56, 3, 2},
                          Conv{32, 64, 64, 56, 3, 1}, Conv{32, 128, 128, 56, 3, 2},
                          Conv{32, 256, 256, 14, 3, 1}, Conv{32, 64, 256, 56, 1, 1}}) {
      const std::string prog = v.stride == 1 ? "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]"
                                             : "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
      const Case c{prog, {{"x", {v.n, v.c, v.h, v.h}}, {"k", {v.o, v.c, v.k, v.k}}}, {}, dt};
      withGradients(c, {"x"});
      out.push_back(gradientCase(c, {"k"}));
    }
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dump_generated OUT_DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const std::vector<Case> all = cases();
  for (std::size_t i = 0; i < all.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%04zu.txt", i);
    std::ofstream(dir / name) << dump(all[i]);
  }
  std::cout << all.size() << " cases dumped to " << dir.string() << "\n";
  return 0;
}
