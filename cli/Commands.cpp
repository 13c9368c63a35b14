#include "Commands.h"

#include "Arguments.h"
#include "Comparison.h"
#include "Inputs.h"
#include "Npy.h"

#include "codegen/Interpreter.h"
#include "dsl/Binding.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace einjit::cli {

namespace {

std::string checksum(const Tensor& t) {
  double sum = 0, abs = 0;
  for (double v : t.toVector()) {
    sum += v;
    abs += std::fabs(v);
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "sum=%.9g abs_sum=%.9g", sum, abs);
  return buf;
}

// The ranges of every index with numbers, from the given shapes.
std::string concreteRanges(const dsl::Program& prog, const dsl::BoundProgram& b) {
  std::ostringstream os;
  for (std::size_t k = 0; k < prog.stmts.size(); ++k) {
    const auto& st = prog.stmts[k];
    os << dsl::printStmt(st.ast) << '\n';
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      os << "  " << st.vars[v].name << " in ";
      if (st.vars[v].dependent)
        os << dsl::printBound(st.vars[v].loBound, st) << ':'
           << dsl::printBound(st.vars[v].hiBound, st) << " (within " << b.stmts[k].lo[v] << ':'
           << b.stmts[k].hi[v] << ")\n";
      else
        os << b.stmts[k].lo[v] << ':' << b.stmts[k].hi[v] << '\n';
    }
    if (st.assign == dsl::Assign::Define) {
      const auto& shape = b.tensors[static_cast<std::size_t>(st.output)].shape;
      os << "  " << prog.tensors[static_cast<std::size_t>(st.output)].name << " has shape "
         << (shape.empty() ? std::string("scalar") : Tensor::empty(shape).shapeString()) << '\n';
    }
  }
  return os.str();
}

// What `check` cannot decide without shapes: the checks Binding makes per call, listed for
// this program, so that a program that checks clean is not taken for one that runs.
std::string pendingChecks(const dsl::Program& prog) {
  std::ostringstream os;
  os << "checked without shapes; these checks run once shapes are known (--shape NAME=AxB):\n";
  for (std::size_t k = 0; k < prog.stmts.size(); ++k) {
    const dsl::Statement& st = prog.stmts[k];
    const std::string where = "  statement " + std::to_string(k + 1) + ": ";
    std::vector<int> bareSeen;
    for (const dsl::BareUse& u : st.bareUses) {
      const dsl::IndexVar& iv = st.vars[static_cast<std::size_t>(u.var)];
      if (iv.fromWhere) continue;
      if (std::find(bareSeen.begin(), bareSeen.end(), u.var) != bareSeen.end())
        os << where << "every bare use of '" << iv.name << "' has the same extent\n";
      bareSeen.push_back(u.var);
    }
    for (const dsl::BoundsCheck& c : st.boundsChecks) {
      auto bare = c.sub->bareVar();
      // A bare use of an index whose range it fixes is in bounds by construction.
      if (bare && !st.vars[static_cast<std::size_t>(*bare)].fromWhere) continue;
      std::string text(prog.source->slice(c.sub->range));
      // A subscript over an index inferred from it is in bounds by construction too.
      bool dependent = false, inferred = false;
      for (std::size_t v = 0; v < c.sub->coef.size(); ++v) {
        if (c.sub->coef[v] == 0) continue;
        dependent = dependent || st.vars[v].dependent;
        bool fixedByBare =
            std::any_of(st.bareUses.begin(), st.bareUses.end(),
                        [&](const dsl::BareUse& u) { return u.var == static_cast<int>(v); });
        inferred = inferred || (!st.vars[v].fromWhere && !fixedByBare);
      }
      if (inferred && !dependent) continue;
      os << where << "subscript '" << text << "' of '"
         << prog.tensors[static_cast<std::size_t>(c.tensor)].name << "' (dimension " << c.dim
         << ") stays in bounds" << (dependent ? " (checked while running)" : "") << '\n';
    }
    if (st.assign == dsl::Assign::Define)
      for (int v : st.lhsVars) {
        const dsl::IndexVar& iv = st.vars[static_cast<std::size_t>(v)];
        std::int64_t lo = 0;
        if (!dsl::symIsConst(iv.lo, &lo))
          os << where << "output index '" << iv.name << "' does not start below 0 ("
             << dsl::symPrint(iv.lo) << ")\n";
      }
  }
  os << "  arguments: ranks, dtypes, size(t, d) dimensions, integer parameters in subscripts\n"
        "  while running: gather indices stay in bounds\n";
  return os.str();
}

} // namespace

int cache(const Words& words, std::ostream& out, std::ostream& err) {
  const std::string what = words.empty() ? "info" : words[0];
  if (words.size() > 1 || (what != "info" && what != "clear")) {
    err << "einjit cache takes 'info' or 'clear'\n";
    return 2;
  }
  if (what == "clear") {
    const std::int64_t n = clearCaches(true);
    CacheStatus s = cacheStatus();
    if (s.directory.empty()) {
      out << "the disk cache is off (EINJIT_CACHE_DIR=off): nothing to delete\n";
      return 0;
    }
    if (!s.problem.empty()) {
      err << "einjit: the disk cache is not used: " << s.problem << "\n";
      return 1;
    }
    out << "deleted " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << s.directory << "\n";
    return 0;
  }
  CacheStatus s = cacheStatus();
  CacheLimits l = cacheLimits();
  out << "directory: " << (s.directory.empty() ? "off (EINJIT_CACHE_DIR=off)" : s.directory)
      << "\n";
  if (!s.problem.empty()) out << "not used: " << s.problem << "\n";
  out << "entries: " << s.diskEntries << ", " << s.diskBytes << " bytes (limit " << l.diskBytes
      << ")\n";
  out << "in-memory modules per backend: at most " << l.memoryModules << "\n";
  return 0;
}

int check(const Words& words, std::ostream& out, std::ostream&) {
  Arguments args = parseArguments(words);
  Options opt = args.options();
  Kernel k = compile(args.program, opt);
  const dsl::Program& prog = k.program();
  if (args.shapes.empty() && args.scalars.empty()) {
    out << dsl::describeRanges(prog) << pendingChecks(prog);
    return 0;
  }
  Inputs in = makeInputs(prog, args);
  dsl::BoundProgram b = dsl::bind(prog, specsOf(in.tensors), in.scalars, in.dtype);
  out << concreteRanges(prog, b);
  return 0;
}

namespace {
// What run prints, saves and checks: the program's outputs, then the arguments it writes
// with '='/'+=' that are not among them (an optimizer step's m and v, read by later statements).
std::vector<std::pair<std::string, Tensor>> results(const dsl::Program& prog, const Outputs& res) {
  std::vector<std::pair<std::string, Tensor>> all;
  for (std::size_t i = 0; i < res.size(); ++i) all.emplace_back(res.names()[i], res[i]);
  for (const dsl::TensorInfo& t : prog.tensors) {
    if (!t.isArgument || t.writtenBy.empty()) continue;
    const auto& names = res.names();
    if (std::find(names.begin(), names.end(), t.name) == names.end())
      all.emplace_back(t.name, res[std::string_view(t.name)]);
  }
  return all;
}

// The demo's forward and backward times, each round a forward call then a backward call (after
// one warm-up call of each): the medians of the rounds' times and of their
// (forward + backward) / forward. At least `minRounds` rounds, more while they fit in 0.3 s
// (with minRounds > 1).
struct DemoTimes {
  double forwardMs = 0, backMs = 0, ratio = 0;
  int rounds = 0;
};
template <class F, class B>
DemoTimes alternatedTimes(F&& forward, B&& backward, int minRounds) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](auto&& f) {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  forward();
  backward();
  std::vector<double> f, b, r;
  const auto start = Clock::now();
  while (static_cast<int>(f.size()) < minRounds ||
         (minRounds > 1 && f.size() < 1000 &&
          std::chrono::duration<double>(Clock::now() - start).count() < 0.3)) {
    f.push_back(ms(forward));
    b.push_back(ms(backward));
    r.push_back((f.back() + b.back()) / f.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(f), median(b), median(r), static_cast<int>(f.size())};
}
} // namespace

int run(const Words& words, std::ostream& out, std::ostream&) {
  Arguments args = parseArguments(words);
  Options opt = args.options();
  Kernel k = compile(args.program, opt);
  Inputs in = makeInputs(k.program(), args);
  // '=' and '+=' write their arguments in place: the reference run of --check starts from
  // copies of the inputs as they were before this call.
  Inputs before = in;
  if (args.check)
    for (Tensor& t : before.tensors) t = t.clone();
  Outputs res = k.call(in.positional());
  const auto shown = results(k.program(), res);
  for (const auto& [name, t] : shown)
    out << name << ": shape " << t.shapeString() << ' ' << dtypeName(t.dtype()) << ' '
        << checksum(t) << '\n';
  if (!args.saveDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.saveDir, ec);
    if (ec)
      throw Error("--save " + args.saveDir + ": cannot create the directory (" + ec.message() +
                  ")");
    for (const auto& [name, t] : shown) {
      std::string path = (std::filesystem::path(args.saveDir) / (name + ".npy")).string();
      writeNpy(path, t);
      out << "saved " << path << '\n';
    }
  }
  if (!args.check) return 0;
  // The same inputs through the reference interpreter.
  opt.device = Device::reference();
  Outputs ref = compile(args.program, opt).call(before.positional());
  Comparison all;
  for (const auto& [name, t] : shown) all.add(compare(t, ref[std::string_view(name)]));
  const double tol = toleranceFor(in.dtype);
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "max relative error vs the reference interpreter: %.3g over %lld element(s) "
                "(tolerance %.0e for %s)\n",
                all.relativeError, static_cast<long long>(all.elements), tol,
                std::string(dtypeName(in.dtype)).c_str());
  out << buf;
  const std::string why = all.failure(tol);
  if (why.empty())
    out << "check: PASS\n";
  else if (all.elements == 0)
    out << "check: EMPTY (" << why << ")\n";
  else
    out << "check: FAIL (" << why << ")\n";
  return why.empty() ? 0 : 1;
}

int demo(const Words&, std::ostream& out, std::ostream&) {
  using Clock = std::chrono::steady_clock;
  const std::string src = "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
  const Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
  out << "einjit demo: a 3x3 convolution with stride 2 (NCHW), forward and backward\n\n  " << src
      << "\n\n";
  Options refOpt;
  refOpt.device = Device::reference();
  // Without LLVM the CPU device is the interpreter: the demo still checks everything, and times
  // each pass once rather than seven times (its times then say nothing about the JIT).
#if EINJIT_HAVE_LLVM
  const char* device = "CPU JIT";
  const int reps = 7;
#else
  const char* device = "interpreter (this build has no LLVM)";
  const int reps = 1;
#endif
  Kernel conv = compile(src); // the CPU device
  Kernel convRef = compile(src, refOpt);
  out << "canonical form and inferred ranges (symbolic):\n" << conv.ranges() << '\n';

  Tensor x = Tensor::random(xs, DType::f32, 1), w = Tensor::random(ks, DType::f32, 2);
  dsl::BoundProgram b = dsl::bind(conv.program(), specsOf({x, w}), {});
  out << "with x " << x.shapeString() << " and k " << w.shapeString() << ":\n"
      << concreteRanges(conv.program(), b) << '\n';

  auto t0 = Clock::now();
  Tensor y = conv(x, w);
  double firstMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  // The same convolution written out by hand, in double precision.
  const std::int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ks[0], KH = ks[2], KW = ks[3];
  const std::int64_t OH = (H - KH) / 2 + 1, OW = (W - KW) / 2 + 1;
  std::vector<double> xv = x.toVector(), wv = w.toVector(), yv = y.toVector();
  double maxErr = 0, maxRef = 0;
  bool finite = true; // std::max would skip a NaN
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t h = 0; h < OH; ++h)
        for (std::int64_t ww = 0; ww < OW; ++ww) {
          double acc = 0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t a = 0; a < KH; ++a)
              for (std::int64_t bb = 0; bb < KW; ++bb)
                acc +=
                    xv[static_cast<std::size_t>(((n * C + c) * H + 2 * h + a) * W + 2 * ww + bb)] *
                    wv[static_cast<std::size_t>(((o * C + c) * KH + a) * KW + bb)];
          double got = yv[static_cast<std::size_t>(((n * O + o) * OH + h) * OW + ww)];
          finite = finite && std::isfinite(got);
          maxErr = std::max(maxErr, std::fabs(acc - got));
          maxRef = std::max(maxRef, std::fabs(acc));
        }
  const double flops = 2.0 * static_cast<double>(N * O * OH * OW * C * KH * KW);
  const double jitMs = 1e3 * medianSeconds([&] { conv(x, w); }, reps);
  const double refMs = 1e3 * medianSeconds([&] { convRef(x, w); }, 1);
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "forward: y %s, max |y - hand-written loops| = %.3g (max |y| = %.3g)\n"
                "  %s: first call %.1f ms (lower + LLVM O3 + run, or a cache hit), then %.3f ms "
                "(%.2f GFLOP/s)\n  reference interpreter: %.1f ms (%.3f GFLOP/s)\n",
                y.shapeString().c_str(), maxErr, maxRef, device, firstMs, jitMs,
                flops / (jitMs * 1e6), refMs, flops / (refMs * 1e6));
  out << buf;
  bool ok = finite && maxErr <= 1e-4 * std::max(1.0, maxRef) && y.shape() == Shape{N, O, OH, OW};
  out << (ok ? "forward check: PASS\n" : "forward check: FAIL\n");

  // The backward pass: one gather-form statement per gradient, compiled like any program.
  Kernel back = conv.gradient({"x", "k"});
  Kernel backRef = compile(back.source(), refOpt);
  out << "\ngradient program (" << back.gradientInputs()[0] << " in; " << back.gradientOutputs()[0]
      << ", " << back.gradientOutputs()[1] << " out):\n"
      << back.source() << '\n';
  Tensor dy = Tensor::random(y.shape(), DType::f32, 3);
  std::map<std::string, Tensor> gin{{"dy", dy}, {"x", x}, {"k", w}};
  Outputs g = back.call(gin), gr = backRef.call(gin);
  Comparison gCmp;
  for (std::size_t i = 0; i < g.size(); ++i) gCmp.add(compare(g[i], gr[i]));
  const double gErr = gCmp.relativeError;
  // The ratio from forward and backward calls alternated in rounds, the median of the rounds'
  // ratios: two medians taken minutes apart (seven calls each) swung 3.4-5.0 on a shared
  // machine, where a round's two calls see the same load.
  const DemoTimes t = alternatedTimes([&] { conv(x, w); }, [&] { back.call(gin); }, reps);
  std::snprintf(buf, sizeof buf,
                "backward (dx, dk) on the %s: %.3f ms, (forward + backward) / forward = %.2f\n"
                "  (forward %.3f ms; medians of %d rounds of a forward and a backward call)\n"
                "  max relative difference from the float64 interpreter: %.3g\n",
                device, t.backMs, t.ratio, t.forwardMs, t.rounds, gErr);
  out << buf;
  ok = ok && gCmp.failure(toleranceFor(DType::f32)).empty();
  GradCheckResult gc = einjit::gradcheck(src, {{"x", {1, 2, 7, 8}}, {"k", {3, 2, 3, 3}}});
  for (std::size_t i = 0; i < gc.inputs.size(); ++i) {
    std::snprintf(buf, sizeof buf,
                  "gradcheck d%s on the CPU device: max relative error %.3g (float64, central "
                  "differences)\n",
                  gc.inputs[i].c_str(), gc.maxRelativeError[i]);
    out << buf;
  }
  ok = ok && gc.passed;
  out << (ok ? "demo: PASS\n" : "demo: FAIL\n");
  return ok ? 0 : 1;
}

} // namespace einjit::cli
