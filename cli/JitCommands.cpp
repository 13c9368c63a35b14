// einjit explain and einjit bench.
#include "Commands.h"

#include "Arguments.h"
#include "Flops.h"
#include "Inputs.h"

#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

namespace einjit::cli {

namespace {

std::string line(const char* what, double seconds, FlopCount flop) {
  char buf[240];
  std::snprintf(buf, sizeof buf, "%-22s %10.4f ms  %9.2f GFLOP/s%s\n", what, seconds * 1e3,
                flop.flops / seconds / 1e9,
                flop.exact ? "" : " (at most: dependent ranges counted by their hull)");
  return buf;
}

} // namespace

int explain(const Words& words, std::ostream& out, std::ostream&) {
  Arguments args = parseArguments(words);
  Options opt = args.options();
  Kernel k = compile(args.program, opt);
  Inputs in = makeInputs(k.program(), args);
  const bool cuda = opt.device.kind == Device::Kind::cuda;
  // On CUDA, --ir adds the loop-nest IR to the generated source.
  std::string text = k.explain(in.positional(), cuda ? args.ir : args.llvm);
  if (!args.ir && args.llvm) {
    auto at = text.find("; optimized LLVM IR");
    if (at != std::string::npos) text = text.substr(at);
  }
  out << text;
  return 0;
}

// Median seconds per call. On a GPU one call's wall time is mostly launching and waiting, so
// there a sample is a batch of calls queued back to back and one synchronize (the batch sized to
// about 5 ms of kernels): the kernels' throughput, as bench/bench_cuda times them.
template <class F>
double secondsPerCall(F&& call, const Device& device, int reps) {
  if (device.kind != Device::Kind::cuda) return medianSeconds(call, reps);
  using Clock = std::chrono::steady_clock;
  call(); // compiles for these shapes
  synchronize(device);
  const auto t0 = Clock::now();
  call();
  synchronize(device);
  const double one = std::chrono::duration<double>(Clock::now() - t0).count();
  const int batch = static_cast<int>(std::clamp(5e-3 / std::max(one, 1e-7), 1.0, 1000.0));
  return medianSeconds(
             [&] {
               for (int i = 0; i < batch; ++i) call();
               synchronize(device);
             },
             reps) /
         batch;
}

int bench(const Words& words, std::ostream& out, std::ostream&) {
  Arguments args = parseArguments(words);
  Options opt = args.options();
  using Clock = std::chrono::steady_clock;
  auto c0 = Clock::now();
  Kernel k = compile(args.program, opt);
  Inputs in = makeInputs(k.program(), args);
  const bool cuda = opt.device.kind == Device::Kind::cuda;
  if (cuda) // device tensors: the times are the kernels', not the copies'
    for (Tensor& t : in.tensors) t = t.cuda(opt.device.index);
  std::vector<Arg> call = in.positional();
  Outputs y = k.call(call); // the first call compiles for these shapes
  double firstMs = std::chrono::duration<double, std::milli>(Clock::now() - c0).count();
  dsl::BoundProgram b = dsl::bind(k.program(), specsOf(in.tensors), in.scalars, in.dtype);
  const FlopCount f = flops(k.program(), b);
  out << "device " << args.device.name() << ", " << dtypeName(in.dtype)
      << "; first call (parse, check, compile, run): " << firstMs << " ms\n";
  const double tf = secondsPerCall([&] { k.call(call); }, opt.device, args.reps);
  out << line("forward", tf, f);
  if (!args.grad) return 0;

  Kernel g = k.gradient(args.wrt);
  std::map<std::string, Tensor> gt;
  std::map<std::string, double> gs;
  const auto dys = g.gradientInputs();
  for (std::size_t i = 0; i < y.size(); ++i) {
    Tensor dy = Tensor::random(y[i].shape(), in.dtype, args.seed + 77 + i);
    if (y[i].rank() == 0)
      gs[dys[i]] = dy.get({});
    else
      gt[dys[i]] = cuda ? dy.cuda(opt.device.index) : dy;
  }
  const auto& p = k.program();
  for (std::size_t i = 0; i < p.arguments.size(); ++i)
    gt[p.tensors[static_cast<std::size_t>(p.arguments[i])].name] = in.tensors[i];
  for (std::size_t i = 0; i < p.params.size(); ++i) gs[p.params[i].name] = in.scalars[i];
  std::map<std::string, Tensor> gtUsed;
  for (const auto& n : g.tensorArguments()) gtUsed[n] = gt.at(n);
  std::map<std::string, double> gsUsed;
  for (const auto& n : g.scalarArguments()) gsUsed[n] = gs.at(n);
  const double tg = secondsPerCall([&] { g.call(gtUsed, gsUsed); }, opt.device, args.reps);
  std::vector<dsl::ArgSpec> gspecs;
  for (int id : g.program().arguments)
    gspecs.push_back({gtUsed.at(g.program().tensors[static_cast<std::size_t>(id)].name).dtype(),
                      gtUsed.at(g.program().tensors[static_cast<std::size_t>(id)].name).shape()});
  std::vector<double> gscal;
  for (const auto& n : g.scalarArguments()) gscal.push_back(gsUsed.at(n));
  dsl::BoundProgram gb = dsl::bind(g.program(), gspecs, gscal, in.dtype);
  out << line("gradients", tg, flops(g.program(), gb));
  char buf[160];
  std::snprintf(buf, sizeof buf, "(forward + gradients) / forward = %.2f\n", (tf + tg) / tf);
  out << buf;
  return 0;
}

} // namespace einjit::cli
