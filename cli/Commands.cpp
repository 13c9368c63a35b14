#include "Commands.h"

#include "Arguments.h"
#include "Inputs.h"

#include "codegen/Interpreter.h"
#include "dsl/Binding.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>

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

} // namespace

int help(std::ostream& out) {
  out << "usage:\n"
         "  einjit check '<program>' [--shape NAME=AxBxC ...] [--scalar NAME=VALUE ...]\n"
         "      print the canonical program and the range of every index\n"
         "  einjit run '<program>' --shape NAME=AxB ... [--scalar NAME=VALUE] [--seed N]\n"
         "             [--dtype f32|f64|bf16]\n"
         "      run on random inputs; print each output's shape and checksum\n"
         "  einjit grad '<program>' [--wrt x,w]\n"
         "      print the gradient program (gather form) as einjit text\n"
         "  einjit gradcheck '<program>' --shape NAME=AxB ... [--wrt x,w] [--scalar ...] [--seed "
         "N]\n"
         "      the gradient against central finite differences in float64 (status 1 above 1e-6)\n"
         "  einjit demo\n"
         "      a strided convolution layer: parsed, ranges inferred, run, differentiated, "
         "checked\n"
         "  einjit cache [info|clear]\n"
         "      the disk cache of compiled kernels: where, how big, whether it is used; or\n"
         "      delete its entries\n";
  return 0;
}

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
    out << dsl::describeRanges(prog);
    return 0;
  }
  Inputs in = makeInputs(prog, args);
  dsl::BoundProgram b = dsl::bind(prog, specsOf(in.tensors), in.scalars, args.dtype);
  out << concreteRanges(prog, b);
  return 0;
}

int run(const Words& words, std::ostream& out, std::ostream&) {
  Arguments args = parseArguments(words);
  Options opt = args.options();
  Kernel k = compile(args.program, opt);
  Inputs in = makeInputs(k.program(), args);
  Outputs res = k.call(in.positional());
  for (std::size_t i = 0; i < res.size(); ++i)
    out << res.names()[i] << ": shape " << res[i].shapeString() << ' ' << dtypeName(res[i].dtype())
        << ' ' << checksum(res[i]) << '\n';
  if (!args.check) return 0;
  // The same inputs through the reference interpreter.
  opt.device = Device::reference();
  Outputs ref = compile(args.program, opt).call(in.positional());
  double worst = 0;
  for (std::size_t i = 0; i < res.size(); ++i)
    worst = std::max(worst, relativeError(res[i], ref[i]));
  const double tol = toleranceFor(args.dtype);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "max relative error vs the reference interpreter: %.3g (tolerance %.0e for %s)\n",
                worst, tol, std::string(dtypeName(args.dtype)).c_str());
  out << buf << (worst <= tol ? "check: PASS\n" : "check: FAIL\n");
  return worst <= tol ? 0 : 1;
}

int demo(const Words&, std::ostream& out, std::ostream&) {
  using Clock = std::chrono::steady_clock;
  const std::string src = "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
  const Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
  out << "einjit demo: a 3x3 convolution with stride 2 (NCHW), forward and backward\n\n  " << src
      << "\n\n";
  Options refOpt;
  refOpt.device = Device::reference();
  Kernel conv = compile(src); // the CPU JIT
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
          maxErr = std::max(maxErr, std::fabs(acc - got));
          maxRef = std::max(maxRef, std::fabs(acc));
        }
  const double flops = 2.0 * static_cast<double>(N * O * OH * OW * C * KH * KW);
  const double jitMs = 1e3 * medianSeconds([&] { conv(x, w); }, 7);
  const double refMs = 1e3 * medianSeconds([&] { convRef(x, w); }, 1);
  char buf[400];
  std::snprintf(
      buf, sizeof buf,
      "forward: y %s, max |y - hand-written loops| = %.3g (max |y| = %.3g)\n"
      "  CPU JIT: first call %.1f ms (lower + LLVM O3 + run, or a cache hit), then %.3f ms "
      "(%.2f GFLOP/s)\n  reference interpreter: %.1f ms (%.3f GFLOP/s)\n",
      y.shapeString().c_str(), maxErr, maxRef, firstMs, jitMs, flops / (jitMs * 1e6), refMs,
      flops / (refMs * 1e6));
  out << buf;
  bool ok = maxErr <= 1e-4 * std::max(1.0, maxRef) && y.shape() == Shape{N, O, OH, OW};
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
  double gErr = 0;
  for (std::size_t i = 0; i < g.size(); ++i) gErr = std::max(gErr, relativeError(g[i], gr[i]));
  const double backMs = 1e3 * medianSeconds([&] { back.call(gin); }, 7);
  std::snprintf(buf, sizeof buf,
                "backward (dx, dk) on the CPU JIT: %.3f ms, (forward + backward) / forward = %.2f\n"
                "  max relative difference from the float64 interpreter: %.3g\n",
                backMs, (jitMs + backMs) / jitMs, gErr);
  out << buf;
  ok = ok && gErr <= toleranceFor(DType::f32);
  GradCheckResult gc = einjit::gradcheck(src, {{"x", {1, 2, 7, 8}}, {"k", {3, 2, 3, 3}}});
  for (std::size_t i = 0; i < gc.inputs.size(); ++i) {
    std::snprintf(buf, sizeof buf,
                  "gradcheck d%s on the JIT: max relative error %.3g (float64, central "
                  "differences)\n",
                  gc.inputs[i].c_str(), gc.maxRelativeError[i]);
    out << buf;
  }
  ok = ok && gc.passed;
  out << (ok ? "demo: PASS\n" : "demo: FAIL\n");
  return ok ? 0 : 1;
}

} // namespace einjit::cli
