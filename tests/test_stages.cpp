// Statements that do not depend on each other run at once on the CPU (runtime/CpuStages.h): the
// stages and their dependences as read off the lowered IR, and programs of independent and
// dependent statements (chains, diamonds, in-place updates, a statement reading another's
// output, intermediates, one tensor written twice) against the interpreter on 1 and 2 threads,
// bit-identical between them; a call whose check fails writes nothing.
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "runtime/CallLayout.h"
#include "runtime/CpuStages.h"
#include "runtime/Jit.h"

#include <doctest/doctest.h>

#if EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#endif

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using einjit::Arg;
using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Outputs;
using einjit::Shape;
using einjit::Tensor;
namespace dsl = einjit::dsl;
namespace runtime = einjit::runtime;

namespace {

struct StageRow {
  const char* what;
  const char* program;
  std::map<std::string, Shape> shapes;
  std::map<std::string, double> scalars;
  // Per stage (statement, or a group lowered together), the stages it waits for directly.
  std::vector<std::vector<std::size_t>> after;
};

std::vector<StageRow> rows() {
  return {
      {"independent: the README demo's gradients (dx, dk)",
       "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:size(x,2), v in 0:size(x,3), "
       "h in max(0, cdiv(u-2, 2)):min(fdiv(size(x,2)-3, 2)+1, fdiv(u,2)+1), "
       "w in max(0, cdiv(v-2, 2)):min(fdiv(size(x,3)-3, 2)+1, fdiv(v,2)+1)\n"
       "dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w]",
       {{"dy", {2, 8, 7, 7}}, {"k", {8, 5, 3, 3}}, {"x", {2, 5, 15, 15}}},
       {},
       {{}, {}}},
      {"independent, then two readers of an intermediate (Linear's gradients)",
       "dt[n,o] := dy[n,o]\ndb[o] := dy[n,o]\ndx[n,i] := dt[n,o] * w[o,i]\n"
       "dw[o,i] := dt[n,o] * x[n,i]",
       {{"dy", {37, 20}}, {"w", {20, 29}}, {"x", {37, 29}}},
       {},
       {{}, {}, {0}, {0}}},
      {"a chain: each statement reads the one before",
       "a[i,j] := x[i,k] * w[k,j]\nb[i,l] := a[i,j] * v[j,l]\nc[i] := b[i,l]",
       {{"x", {33, 17}}, {"w", {17, 21}}, {"v", {21, 19}}},
       {},
       {{}, {0}, {1}}},
      {"a diamond",
       "t[i,j] := x[i,k] * w[k,j]\nu[i,l] := t[i,j] * v[j,l]\nz[i,l] := t[i,j] * q[j,l]\n"
       "o[i] := u[i,l] * z[i,l]",
       {{"x", {31, 12}}, {"w", {12, 18}}, {"v", {18, 23}}, {"q", {18, 23}}},
       {},
       {{}, {0}, {0}, {1, 2}}},
      {"one tensor written twice (':=' then '+='), beside an independent statement",
       "y[i,j] := x[i,k] * w[k,j]\ns[i] := x[i,k]\ny[i,j] += x[i,k] * v[k,j]",
       {{"x", {29, 14}}, {"w", {14, 22}}, {"v", {14, 22}}},
       {},
       {{}, {}, {0}}},
      {"write after read: an argument updated in place after a statement reads it",
       "s[i] := a[i,j] * a[i,j]\na[i,j] = a[i,j] * g\nr[j] := b[i,j]",
       {{"a", {26, 31}}, {"b", {26, 31}}},
       {{"g", 0.5}},
       {{}, {0}, {}}},
      {"in-place updates: two moments, then the parameter that reads both",
       "m[i,j] = b1*m[i,j] + (1-b1)*gr[i,j]\nv[i,j] = b2*v[i,j] + (1-b2)*gr[i,j]*gr[i,j]\n"
       "p[i,j] = p[i,j] - lr*m[i,j] / (sqrt(v[i,j]) + 0.001)",
       {{"m", {40, 24}}, {"gr", {40, 24}}, {"v", {40, 24}}, {"p", {40, 24}}},
       {{"b1", 0.9}, {"b2", 0.99}, {"lr", 0.01}},
       {}}, // lowered as one group of element-wise statements or as three: checked below
  };
}

std::map<std::string, Tensor> inputsFor(const Kernel& k, const StageRow& row, DType dt) {
  std::map<std::string, Tensor> in;
  std::uint64_t seed = 11;
  for (const std::string& name : k.tensorArguments())
    in[name] = Tensor::random(row.shapes.at(name), dt, seed++);
  return in;
}

std::vector<Arg> argsFor(const Kernel& k, const std::map<std::string, Tensor>& in,
                         const std::map<std::string, double>& scalars) {
  std::vector<Arg> args;
  for (const std::string& n : k.tensorArguments()) args.push_back(in.at(n).clone());
  for (const std::string& n : k.scalarArguments()) args.push_back(scalars.at(n));
  return args;
}

// Every value of every output and written argument, as bytes, in order.
std::vector<unsigned char> bits(const Outputs& o) {
  std::vector<unsigned char> b;
  for (const std::string& n : o.names())
    for (double v : o[std::string_view(n)].toVector()) {
      const auto* p = reinterpret_cast<const unsigned char*>(&v);
      b.insert(b.end(), p, p + sizeof v);
    }
  return b;
}

// The stage plan of `program` at the row's shapes; bufferBytes empty: every stage small.
runtime::CpuStagePlan planOf(const StageRow& row, const std::vector<std::size_t>& bufferBytes) {
  const dsl::Program p = dsl::check(row.program);
  std::vector<dsl::ArgSpec> args;
  std::vector<std::vector<std::int64_t>> argStrides;
  for (int id : p.arguments) {
    const Shape& s = row.shapes.at(p.tensors[static_cast<std::size_t>(id)].name);
    args.push_back({DType::f64, s});
    argStrides.push_back(einjit::contiguousStrides(s));
  }
  std::vector<double> params;
  for (const auto& prm : p.params) params.push_back(row.scalars.at(prm.name));
  const dsl::BoundProgram b = dsl::bind(p, args, params);
  const einjit::codegen::LoweredProgram lowered =
      einjit::codegen::lower(p, b, runtime::callStrides(p, b, argStrides), runtime::hostTarget());
  return runtime::planCpuStages(lowered, bufferBytes);
}

std::vector<std::vector<std::size_t>> afterLists(const runtime::CpuStagePlan& plan) {
  std::vector<std::vector<std::size_t>> after;
  for (const runtime::CpuStage& s : plan.stages) {
    std::vector<std::size_t> a = s.after;
    std::sort(a.begin(), a.end());
    after.push_back(a);
  }
  return after;
}

} // namespace

TEST_CASE("stages: each statement a stage, its dependences from what its functions read and "
          "write") {
  for (const StageRow& row : rows()) {
    INFO(row.what);
    const runtime::CpuStagePlan plan = planOf(row, {});
    if (row.after.empty()) {
      // The optimizer's three statements: one element-wise group (one stage), or three stages
      // where p waits for both moments and the moments for nothing.
      const auto after = afterLists(plan);
      if (plan.stages.size() == 3)
        CHECK(after == std::vector<std::vector<std::size_t>>{{}, {}, {0, 1}});
      else
        CHECK(plan.stages.size() == 1);
      continue;
    }
    CHECK(afterLists(plan) == row.after);
    // Concurrent exactly where two stages are not ordered.
    bool independent = false;
    for (std::size_t j = 0; j < row.after.size(); ++j)
      for (std::size_t i = 0; i < j; ++i) {
        // i reaches j through the after lists
        std::vector<bool> seen(row.after.size(), false);
        std::vector<std::size_t> pending{j};
        while (!pending.empty()) {
          const std::size_t s = pending.back();
          pending.pop_back();
          for (std::size_t a : row.after[s])
            if (!seen[a]) {
              seen[a] = true;
              pending.push_back(a);
            }
        }
        independent = independent || !seen[i];
      }
    CHECK(plan.concurrent == independent);
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      CHECK(plan.stages[s].from < plan.stages[s].to);
      if (s > 0) CHECK(plan.stages[s].from == plan.stages[s - 1].to);
      for (std::size_t a : plan.stages[s].after) {
        const auto& next = plan.stages[a].next;
        CHECK(std::find(next.begin(), next.end(), s) != next.end());
      }
    }
  }
}

TEST_CASE("stages: large stages wait for the large ones before them") {
  const StageRow row = rows()[1]; // Linear's gradients: dt, db, dx, dw
  // Every tensor and scratch buffer 8 MiB: every stage large, so they run in program order
  // (dx after db, dw after dx) besides their own dependences.
  const runtime::CpuStagePlan plan = planOf(row, std::vector<std::size_t>(64, 8u << 20));
  REQUIRE(plan.stages.size() == 4);
  CHECK(!plan.concurrent);
  CHECK(afterLists(plan) == std::vector<std::vector<std::size_t>>{{}, {0}, {0, 1}, {0, 2}});
  for (const runtime::CpuStage& s : plan.stages) CHECK(s.bytes > runtime::kSmallStageBytes);
}

TEST_CASE("stages: programs of dependent and independent statements against the interpreter, "
          "1 and 2 threads bit-identical") {
  for (const StageRow& row : rows())
    for (DType dt : {DType::f64, DType::f32}) {
      INFO(row.what << " " << einjit::dtypeName(dt));
      einjit::Options ro, jo;
      ro.device = Device::reference();
      ro.defaultDType = jo.defaultDType = dt;
      Kernel ref = einjit::compile(row.program, ro), jit = einjit::compile(row.program, jo);
      const auto in = inputsFor(ref, row, dt);
      const Outputs want = ref.call(argsFor(ref, in, row.scalars));
      const Outputs got = jit.call(argsFor(jit, in, row.scalars));
      REQUIRE(got.names() == want.names());
      for (const std::string& n : want.names()) {
        INFO(n);
        const auto a = got[std::string_view(n)].toVector(),
                   b = want[std::string_view(n)].toVector();
        REQUIRE(a.size() == b.size());
        double err = 0, scale = 1;
        for (std::size_t i = 0; i < a.size(); ++i) {
          err = std::max(err, std::fabs(a[i] - b[i]));
          scale = std::max(scale, std::fabs(b[i]));
        }
        CHECK(err <= (dt == DType::f64 ? 1e-12 : 1e-4) * scale);
      }
#if EINJIT_HAVE_TBB
      // On one thread the stages run in order; on two (where the host has them) at once.
      std::vector<unsigned char> one;
      {
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
        tbb::task_arena arena(1);
        arena.execute([&] { one = bits(jit.call(argsFor(jit, in, row.scalars))); });
      }
      CHECK(one == bits(got));
      // Many calls on two threads: whichever stage finishes first, the same bits.
      for (int rep = 0; rep < 20; ++rep)
        CHECK(bits(jit.call(argsFor(jit, in, row.scalars))) == bits(got));
#endif
    }
}

TEST_CASE("stages: a call whose check fails writes nothing, whichever statement checks") {
  // E's gather is checked: first (hoisted: tok is an argument no statement writes) or late
  // (through t, which the program computes); W and the independent statement's output beside it.
  const char* programs[] = {
      "E[tok[b], d] += dy[b, d]\nW[i,j] = W[i,j] - 0.5*G[i,j]",
      "W[i,j] = W[i,j] - 0.5*G[i,j]\nE[tok[b], d] += dy[b, d]",
      "t[b] := tok[b] + 0\nW[i,j] = W[i,j] - 0.5*G[i,j]\nE[t[b], d] += dy[b, d]",
  };
  for (const char* program : programs) {
    INFO(program);
    Kernel k = einjit::compile(program);
    for (bool bad : {false, true}) {
      INFO("out of bounds: " << bad);
      Tensor E = Tensor::random({10, 16}, DType::f32, 1),
             dy = Tensor::random({12, 16}, DType::f32, 2);
      Tensor W = Tensor::random({24, 20}, DType::f32, 3),
             G = Tensor::random({24, 20}, DType::f32, 4);
      Tensor tok = Tensor::randomInt({12}, 0, 10, DType::i64, 5);
      if (bad) tok = Tensor::fromValues({12}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1}, DType::i64);
      const auto e0 = E.toVector(), w0 = W.toVector();
      std::map<std::string, Tensor> args{{"E", E}, {"dy", dy}, {"W", W}, {"G", G}, {"tok", tok}};
      if (bad) {
        CHECK_THROWS_WITH_AS(k.call(args), doctest::Contains("out of bounds"), einjit::Error);
        CHECK(E.toVector() == e0);
        CHECK(W.toVector() == w0);
      } else {
        k.call(args);
        const auto e1 = E.toVector(), w1 = W.toVector(), g = G.toVector(), d = dy.toVector();
        const auto tv = tok.toVector();
        std::vector<double> e = e0;
        for (std::size_t b = 0; b < 12; ++b)
          for (std::size_t j = 0; j < 16; ++j)
            e[static_cast<std::size_t>(tv[b]) * 16 + j] += d[b * 16 + j];
        for (std::size_t i = 0; i < e.size(); ++i) CHECK(std::fabs(e1[i] - e[i]) <= 1e-5);
        for (std::size_t i = 0; i < w0.size(); ++i)
          CHECK(std::fabs(w1[i] - (w0[i] - 0.5 * g[i])) <= 1e-6);
      }
    }
  }
}
