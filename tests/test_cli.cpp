// The einjit command-line tool, run as a process: output and exit status of each command.
#include "CliRun.h"
#include "cli/Comparison.h"
#include "cli/Flops.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using Result = einjit::test::CliResult;
using einjit::test::has;
using einjit::test::runCli;

TEST_CASE("check without shapes prints the canonical program and symbolic ranges") {
  Result r = runCli("check 'y[i]:=x[i+k]*w[k]'");
  CHECK(r.status == 0);
  CHECK(r.out ==
        "y[i] := x[i + k] * w[k]\n  i in 0:size(x,0) - size(w,0) + 1\n  k in 0:size(w,0)\n"
        "checked without shapes; these checks run once shapes are known (--shape NAME=AxB):\n"
        "  arguments: ranks, dtypes, size(t, d) dimensions, integer parameters in subscripts\n"
        "  while running: gather indices stay in bounds\n");
}

TEST_CASE("check without shapes names the checks of this program that need shapes") {
  Result r = runCli("check 'y[i] := x[i+1] - x[i] + a[i]'");
  CHECK(r.status == 0);
  CHECK(has(r.out, "  statement 1: every bare use of 'i' has the same extent\n"));
  CHECK(has(r.out, "  statement 1: subscript 'i+1' of 'x' (dimension 0) stays in bounds\n"));
  // ...and with shapes, that check is what fails.
  Result s = runCli("check 'y[i] := x[i+1] - x[i] + a[i]' --shape x=4 --shape a=4");
  CHECK(s.status == 1);
  CHECK(has(s.out, "error: subscript 'i+1' goes out of bounds: it reaches 4"));
  Result t = runCli("check 't[i] := x[i-j]*w[j]; y[k] := t[k] where k in 1:N'");
  CHECK(has(t.out, "  statement 1: output index 'i' does not start below 0 (size(w,0) - 1)\n"));
  CHECK(has(t.out, "  statement 2: subscript 'k' of 't' (dimension 0) stays in bounds\n"));
}

TEST_CASE("check with shapes prints numbers and output shapes") {
  Result r = runCli("check 'y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]' --shape x=2x3x9x9 "
                    "--shape k=4x3x3x3");
  CHECK(r.status == 0);
  CHECK(has(r.out, "  h in 0:4\n"));
  CHECK(has(r.out, "  c in 0:3\n"));
  CHECK(has(r.out, "  y has shape 2x4x4x4\n"));
  Result p = runCli("check 'y[i] := x[N-1-i]' --shape x=5 --scalar N=5");
  CHECK(p.status == 0);
  CHECK(has(p.out, "  i in 0:5\n"));
}

TEST_CASE("check on bad input prints the caret diagnostic and exits 1") {
  Result r = runCli("check 'y[i] := x[i] + foo(x[i])'");
  CHECK(r.status == 1);
  CHECK(has(r.out, "<program>:1:16: error: unknown function 'foo'"));
  CHECK(has(r.out, "   1 | y[i] := x[i] + foo(x[i])\n     |                ^~~\n"));
  Result s = runCli("check 'y[i] := x[i] * w[i]' --shape x=3 --shape w=4");
  CHECK(s.status == 1);
  CHECK(has(s.out, "error: index 'i' ranges over 4"));
}

TEST_CASE("run prints each output's shape and checksum, deterministic per seed") {
  Result a = runCli("run 'y[i] := x[i,j] * w[j]' --shape x=4x3 --shape w=3 --seed 7");
  Result b = runCli("run 'y[i] := x[i,j] * w[j]' --shape x=4x3 --shape w=3 --seed 7");
  Result c = runCli("run 'y[i] := x[i,j] * w[j]' --shape x=4x3 --shape w=3 --seed 8");
  CHECK(a.status == 0);
  CHECK(has(a.out, "y: shape 4 f32 sum="));
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);
  Result ones = runCli("run 's := x[i] ^ 0' --shape x=6 --dtype f64");
  CHECK(ones.out == "s: shape scalar f64 sum=6 abs_sum=6\n");
  Result g = runCli("run 'y[b,d] := E[tok[b], d]' --shape E=5x2 --shape tok=9");
  CHECK(g.status == 0); // index tensors get valid random indices
}

TEST_CASE("run and check report usage mistakes") {
  CHECK(runCli("run 'y[i] := x[i]'").status == 1); // missing --shape
  CHECK(has(runCli("run 'y[i] := x[i]'").out, "missing --shape x=..."));
  CHECK(has(runCli("run 'y[i] := x[i]' --shape x=3x").out, "extents are non-negative"));
  CHECK(has(runCli("run 'y[i] := x[i]' --shape x=3 --shape q=2").out,
            "no tensor argument named 'q'"));
  CHECK(runCli("frobnicate").status == 2);
  CHECK(runCli("check").status == 1);
}

TEST_CASE("demo runs the conv layer and checks it against hand-written loops") {
  Result r = runCli("demo");
  CHECK(r.status == 0);
  CHECK(has(r.out, "y[n, o, h, w] := x[n, c, 2h + a, 2w + b] * k[o, c, a, b]"));
  CHECK(has(r.out, "  y has shape 4x32x16x16"));
  CHECK(has(r.out, "forward check: PASS"));
#if EINJIT_HAVE_LLVM
  CHECK(has(r.out, "backward (dx, dk) on the CPU JIT"));
#else
  CHECK(has(r.out, "backward (dx, dk) on the interpreter (this build has no LLVM)"));
#endif
  CHECK(has(r.out, "demo: PASS"));
}

// EINJIT_CPU_VECTOR_BYTES: another CPU kind's schedules (the AVX-512 micro-kernel on any host),
// checked against the interpreter; a value that is no vector width is an error, not ignored.
TEST_CASE("EINJIT_CPU_VECTOR_BYTES schedules for another vector width; a bad one is an error") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so no CPU schedule is made");
  return;
#endif
  const std::string gemm = "'C[i,k] := A[i,j] * B[j,k]' --shape A=200x300 --shape B=300x70";
  Result wide = runCli("explain " + gemm, "EINJIT_CPU_VECTOR_BYTES=64 ");
  CHECK(wide.status == 0);
  CHECK(has(wide.out, "64-byte vectors (EINJIT_CPU_VECTOR_BYTES)"));
  CHECK(has(wide.out, "micro-kernel 12x32")); // 200 rows in 204, not 210
  Result run = runCli("run " + gemm + " --check", "EINJIT_CPU_VECTOR_BYTES=64 ");
  CHECK(run.status == 0);
  CHECK(has(run.out, "check: PASS"));
  Result narrow = runCli("explain " + gemm, "EINJIT_CPU_VECTOR_BYTES=16 ");
  CHECK(has(narrow.out, "16-byte vectors (EINJIT_CPU_VECTOR_BYTES)"));
  Result bad = runCli("run 'y[i] := x[i] * 2' --shape x=4", "EINJIT_CPU_VECTOR_BYTES=48 ");
  CHECK(bad.status == 1);
  CHECK(bad.out == "EINJIT_CPU_VECTOR_BYTES is '48': it must be 16, 32 or 64\n");
}

// EINJIT_CPU_TASK_TIMES: each function of a call on a line of its own, with each thread's
// ranges of iterations; the product's ranges cover its task groups once.
TEST_CASE("EINJIT_CPU_TASK_TIMES prints each function's ranges per thread") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT");
  return;
#endif
  const std::string gemm = "'C[i,k] := A[i,j] * B[j,k]' --shape A=200x300 --shape B=300x70";
  Result plan = runCli("explain " + gemm);
  REQUIRE(plan.status == 0);
  const std::size_t at = plan.out.find(" parallel groups");
  if (at == std::string::npos) {
    MESSAGE("skipped: the plan has no parallel groups (one thread)");
    return;
  }
  const std::size_t in = plan.out.rfind(" in ", at);
  const long groups = std::stol(plan.out.substr(in + 4, at - in - 4));
  Result r = runCli("run " + gemm, "EINJIT_CPU_TASK_TIMES=1 ");
  CHECK(r.status == 0);
  CHECK(has(r.out, "einjit task times: s0_packA: wall "));
  const std::size_t line = r.out.find("einjit task times: s0: wall ");
  REQUIRE(line != std::string::npos);
  const std::string product = r.out.substr(line, r.out.find('\n', line) - line);
  std::vector<bool> seen(static_cast<std::size_t>(groups), false);
  for (std::size_t p = product.find(" ["); p != std::string::npos; p = product.find(" [", p + 1)) {
    const std::size_t comma = product.find(',', p), close = product.find(')', p);
    const long lo = std::stol(product.substr(p + 2, comma - p - 2));
    const long hi = std::stol(product.substr(comma + 1, close - comma - 1));
    for (long g = lo; g < hi; ++g) {
      REQUIRE(g < groups);
      CHECK(!seen[static_cast<std::size_t>(g)]);
      seen[static_cast<std::size_t>(g)] = true;
    }
  }
  for (bool s : seen) CHECK(s);
}

// EINJIT_JIT_CPU and EINJIT_CPU_CACHE_BYTES: another CPU kind's code and blocking, to read
// (explain, EINJIT_DEBUG_JIT_IR) what it runs; the code is compiled, never run here (it may use
// instructions this host lacks). Unknown names and malformed sizes are errors, not ignored.
TEST_CASE("EINJIT_JIT_CPU and EINJIT_CPU_CACHE_BYTES make another CPU kind's code; bad ones are errors") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so no CPU code is made");
  return;
#endif
  const std::string gemm = "'C[i,k] := A[i,j] * B[j,k]' --shape A=200x300 --shape B=300x70";
  const std::string env = "EINJIT_CACHE_DIR=/tmp/einjit-cli-cpu-" + std::to_string(::getpid()) + " ";
  Result spr = runCli("explain " + gemm, env + "EINJIT_JIT_CPU=sapphirerapids ");
  CHECK(spr.status == 0);
  CHECK(has(spr.out, "sapphirerapids, 64-byte vectors"));
  CHECK(has(spr.out, "micro-kernel 12x32"));
  Result ir = runCli("explain " + gemm + " --llvm", env + "EINJIT_JIT_CPU=sapphirerapids ");
  CHECK(ir.status == 0);
  CHECK(has(ir.out, "<16 x float>"));
  // KC: a B sliver of 32 lanes fills half of L1 (256 KiB: 1024 steps, so all 300 in one block).
  Result caches = runCli("explain " + gemm,
                         env + "EINJIT_JIT_CPU=sapphirerapids EINJIT_CPU_CACHE_BYTES=262144,2097152,"
                               "33554432 ");
  CHECK(caches.status == 0);
  CHECK(has(caches.out, "KC 300"));
  Result bad = runCli("explain " + gemm, "EINJIT_JIT_CPU=pentium9 ");
  CHECK(bad.status == 1);
  CHECK(bad.out == "EINJIT_JIT_CPU is 'pentium9': LLVM knows no 64-bit x86 CPU of that name\n");
  for (const char* sizes : {"49152,2097152", "49152,2097152,x", "49152,2097152,1024",
                            "49152,2097152,33554432,"}) {
    Result r = runCli("explain " + gemm, std::string("EINJIT_CPU_CACHE_BYTES=") + sizes + " ");
    CHECK(r.status == 1);
    CHECK(r.out == std::string("EINJIT_CPU_CACHE_BYTES is '") + sizes +
                       "': it must be three sizes in bytes, L1,L2,L3, each at least 4096\n");
  }
  std::filesystem::remove_all("/tmp/einjit-cli-cpu-" + std::to_string(::getpid()));
}

// EINJIT_DEBUG_JIT=1: each module's stages, then the cold compile's timeline (runtime/JitTiming.h):
// every module once, on a thread, between a start and an end; the modules compile costliest
// first, so the largest (the micro-kernel's, by its LLVM instructions as emitted) starts before
// any other module ends; the packings share a module.
TEST_CASE("EINJIT_DEBUG_JIT prints a cold compile's timeline, the largest module started first") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so nothing is compiled for the CPU");
  return;
#endif
  // The benchmark's GEMM, whose packing functions come first in the program (compiled in the
  // program's order, its micro-kernel module started after a packing module had ended).
  Result r = runCli("explain 'C[i,k] := A[i,j] * B[k,j]' --shape A=1024x1024 --shape B=1024x1024",
                    "EINJIT_CACHE_DIR=off EINJIT_DEBUG_JIT=1 ");
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "# code: compiled"));
  CHECK(has(r.out, "einjit jit timeline: "));
  CHECK(has(r.out, "schedule and lower"));
  CHECK(has(r.out, "link, load and look up"));
  CHECK(has(r.out, "  wall "));
  std::map<std::string, long> emitted;                   // module -> LLVM instructions emitted
  std::map<std::string, std::pair<double, double>> span; // module -> start, end
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const std::string stage = "einjit jit: ", object = "-byte object";
    if (line.rfind(stage, 0) == 0 && has(line, object)) {
      const std::string rest = line.substr(stage.size());
      const std::string name = rest.substr(0, rest.find(", "));
      const std::size_t at = rest.find(" emit ");
      REQUIRE(at != std::string::npos);
      const std::size_t open = rest.find('(', at);
      emitted[name] = std::stol(rest.substr(open + 1));
      continue;
    }
    const std::size_t m = line.find("  module ");
    if (m == std::string::npos) continue;
    std::istringstream fields(line);
    double start = 0, end = 0;
    fields >> start >> end;
    const std::string name = line.substr(m + 9);
    CHECK(span.count(name) == 0);
    span[name] = {start, end};
  }
  // The micro-kernel's module and the packings': the two packing functions (or parts, on
  // one thread), which only move data, compile together in one module (runtime/Jit.cpp,
  // mergeMovers; it names both) where together they fit its cap of 600 LLVM instructions. B's
  // packing transposed in registers (lower/CpuGemmPanels.cpp) is about 580 on its own, A's
  // about 190: then each is a module.
  REQUIRE(emitted.size() >= 2);
  REQUIRE(emitted.size() <= 3);
  CHECK(span.size() == emitted.size());
  std::string largest;
  for (const auto& [name, n] : emitted)
    if (largest.empty() || n > emitted[largest]) largest = name;
  CHECK(largest.find("pack") == std::string::npos);
  for (const auto& [name, n] : emitted)
    if (name != largest && emitted.size() == 2) CHECK(name.find(' ') != std::string::npos);
  REQUIRE(span.count(largest) == 1);
  for (const auto& [name, se] : span) {
    CHECK(se.first <= se.second);
    if (name != largest) CHECK(span[largest].first <= se.second);
  }
  // Code from the disk cache: a timeline without modules.
  const std::string dir = "/tmp/einjit-cli-timeline-" + std::to_string(::getpid());
  const std::string small = "explain 'y[i] := x[i] * 3.5 - x[i]' --shape x=40";
  Result first = runCli(small, "EINJIT_CACHE_DIR=" + dir + " EINJIT_DEBUG_JIT=1 ");
  CHECK(first.status == 0);
  CHECK(has(first.out, "  module "));
  Result cached = runCli(small, "EINJIT_CACHE_DIR=" + dir + " EINJIT_DEBUG_JIT=1 ");
  CHECK(cached.status == 0);
  CHECK(has(cached.out, "# code: disk cache"));
  CHECK(has(cached.out, "no module compiled (the code was cached)"));
  CHECK(!has(cached.out, "  module "));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a second process finds the compiled kernel in the on-disk cache") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so nothing is compiled for the CPU");
  return;
#endif
  std::string dir = "/tmp/einjit-cli-cache-" + std::to_string(::getpid());
  std::string env = "EINJIT_CACHE_DIR=" + dir + " ";
  std::string cmd = "explain 'y[i] := x[i] * 3.5 - x[i]' --shape x=40";
  CHECK(std::system(("rm -rf " + dir).c_str()) == 0);
  Result first = runCli(cmd, env);
  CHECK(has(first.out, "# code: compiled"));
  Result second = runCli(cmd, env);
  CHECK(has(second.out, "# code: disk cache"));
  CHECK(std::system(("rm -rf " + dir).c_str()) == 0);
}

TEST_CASE("explain --cuda prints the generated CUDA kernels (no GPU needed)") {
#if !EINJIT_HAVE_CUDA
  MESSAGE("skipped: this build has no CUDA backend");
  return;
#endif
  Result r = runCli("explain --cuda 'y[i,j] := x[j,i] * 2' --shape x=30x20");
  CHECK(r.status == 0);
  CHECK(has(r.out, "extern \"C\" __global__ void __launch_bounds__(256) ej_s0("));
  CHECK(has(r.out, "# launch ej_s0: 3 block(s) of 256 thread(s)"));
}

TEST_CASE("run --check compares the JIT with the interpreter; explain and bench") {
  Result r = runCli("run 'C[i,k] := A[i,j] * B[j,k]' --shape A=37x20 --shape B=20x45 --check");
  CHECK(r.status == 0);
  CHECK(has(r.out, "max relative error vs the reference interpreter"));
  CHECK(has(r.out, "check: PASS"));
  Result ref = runCli("run 'y[i] := x[i] * 2' --shape x=5 --device reference --check");
  CHECK(ref.status == 0);
  Result badDevice = runCli("run 'y[i] := x[i]' --shape x=5 --device gpu");
  CHECK(badDevice.status == 1);
  CHECK(has(badDevice.out, "--device takes reference, cpu or cuda[:N], got 'gpu'"));
  Result badReps = runCli("bench 'y[i] := x[i]' --shape x=5 --reps 0");
  CHECK(badReps.status == 1);
  CHECK(has(badReps.out, "--reps takes a positive count, got '0'"));
  Result e = runCli("explain 'y[i] := x[i] * 2' --shape x=100 --ir --llvm");
  CHECK(e.status == 0);
  CHECK(has(e.out, "vectorized for i in 0:100"));
  CHECK(has(e.out, "; optimized LLVM IR"));
  // A strided conv's gradient has hinted loops the loop vectorizer declines: LLVM must not
  // print about it.
  Result quiet = runCli("bench 'y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]' --shape x=1x2x9x9 "
                        "--shape k=3x2x3x3 --grad --reps 1",
                        "EINJIT_CACHE_DIR=off ");
  CHECK(quiet.status == 0);
  CHECK(has(quiet.out, "gradients"));
  CHECK(!has(quiet.out, "warning"));
  Result b = runCli("bench 'y[i] := x[i,j] * w[j]' --shape x=64x64 --shape w=64 --grad --reps 3");
  CHECK(b.status == 0);
  CHECK(has(b.out, "GFLOP/s"));
  CHECK(has(b.out, "(forward + gradients) / forward"));
  Result g = runCli("gradcheck 'y[i] := x[2i+k] * w[k]' --shape x=11 --shape w=3 --device cpu");
  CHECK(g.status == 0);
  CHECK(has(g.out, "gradcheck: PASS"));
}

TEST_CASE("run, gradcheck and bench with --device cuda (on a GPU)") {
  std::string why;
  if (!einjit::cudaAvailable(&why)) {
    MESSAGE("skipped: this test needs a CUDA GPU (" << why << ")");
    return;
  }
  Result r = runCli(
      "run 'C[i,k] := A[i,j] * B[j,k]' --shape A=37x20 --shape B=20x45 --device cuda --check");
  CHECK(r.status == 0);
  CHECK(has(r.out, "check: PASS"));
  Result g = runCli("gradcheck 'y[i] := x[2i+k] * w[k]' --shape x=11 --shape w=3 --device cuda");
  CHECK(g.status == 0);
  CHECK(has(g.out, "dx: max relative error"));
  CHECK(has(g.out, "gradcheck: PASS"));
  // The Linear layer's shapes at a smaller batch: a GPU tile (112 wide for the 784 features in
  // the input gradient), timed in batches of queued calls.
  Result b = runCli("bench 'y[b,o] := x[b,i] * w[o,i]' --shape x=512x784 --shape w=256x784 "
                    "--device cuda --grad --reps 3");
  CHECK(b.status == 0);
  CHECK(has(b.out, "device cuda"));
  CHECK(has(b.out, "GFLOP/s"));
  CHECK(has(b.out, "(forward + gradients) / forward"));
}

TEST_CASE("grad prints the gradient program; gradcheck checks it") {
  Result g = runCli("grad 'y[i] := x[i+k] * w[k]' --wrt x");
  CHECK(g.status == 0);
  CHECK(g.out == "dx[u] := dy[u - k] * w[k] where u in 0:size(x, 0), k in max(u + size(w, 0) - "
                 "size(x, 0), 0):min(u + 1, size(w, 0))\n");
  Result c = runCli("gradcheck 'y[i] := x[2i+k] * w[k]' --shape x=11 --shape w=3");
  CHECK(c.status == 0);
  CHECK(has(c.out, "dx: max relative error"));
  CHECK(has(c.out, "dw: max relative error"));
  CHECK(has(c.out, "gradcheck: PASS"));
  Result e = runCli("grad 'y[i] := x[i]' --wrt q");
  CHECK(e.status == 1);
  CHECK(has(e.out, "not a tensor argument"));
  Result s = runCli("grad 'y[b,d] := E[tok[b], d]'");
  CHECK(has(s.out, "# scatter: dE[tok[b], d] += dy[b, d]"));
}

TEST_CASE("run --dtype bf16 --check, and an unknown --dtype") {
  // bf16 storage, f32 arithmetic: the result equals the interpreter's within bf16 rounding.
  Result r = runCli("run 'C[i,k] := A[i,j] * B[j,k]' --shape A=33x20 --shape B=20x17 "
                    "--dtype bf16 --check");
  CHECK(r.status == 0);
  CHECK(has(r.out, "C: shape 33x17 bf16"));
  CHECK(has(r.out, "(tolerance 1e-02 for bf16)"));
  CHECK(has(r.out, "check: PASS"));
  Result e = runCli("run 'y[i] := x[i]' --shape x=3 --dtype f16");
  CHECK(e.status != 0);
  CHECK(has(e.out, "--dtype takes f32, f64 or bf16, got 'f16'"));
}

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct CompareRow {
  std::vector<double> got, ref;
  const char* failure; // "" for a pass, else a part of Comparison::failure
};

} // namespace

TEST_CASE("the comparison behind run --check fails on NaN, infinities and empty results") {
  const std::vector<CompareRow> rows = {
      {{1, 2}, {1, 2}, ""},
      {{1, 2.00001}, {1, 2}, ""}, // within 1e-4 relative
      {{1, 2.01}, {1, 2}, "relative error above the tolerance"},
      {{1, kNaN}, {1, 2}, "not finite on one side and different (element 1: nan against 2)"},
      {{1, 2}, {1, kNaN}, "(element 1: 2 against nan)"},
      {{1, 2}, {1, kInf}, "(element 1: 2 against inf)"}, // a finite value is no match for inf
      {{kInf, 2}, {1, 2}, "(element 0: inf against 1)"},
      {{-kInf, 2}, {kInf, 2}, "(element 0: -inf against inf)"},
      {{kInf, -kInf, 3}, {kInf, -kInf, 3}, ""}, // the same infinities agree
      {{kNaN, 1}, {kNaN, 1}, ""},               // NaN where the reference is NaN agrees
      {{kNaN, kNaN}, {kNaN, kNaN}, "every value is NaN on both sides"},
      {{}, {}, "nothing compared: every output is empty"},
  };
  for (const CompareRow& row : rows) {
    CAPTURE(row.failure);
    auto t = [](const std::vector<double>& v) {
      return einjit::Tensor::fromValues({static_cast<std::int64_t>(v.size())}, v,
                                        einjit::DType::f64);
    };
    einjit::cli::Comparison c = einjit::cli::compare(t(row.got), t(row.ref));
    std::string why = c.failure(1e-4);
    CAPTURE(why);
    if (*row.failure == 0)
      CHECK(why.empty());
    else
      CHECK(has(why, row.failure));
  }
  // A shape mismatch is a failure even when both are empty.
  einjit::cli::Comparison c =
      einjit::cli::compare(einjit::Tensor::zeros({0, 2}), einjit::Tensor::zeros({2, 0}));
  CHECK(has(c.failure(1e-4), "shape 0x2 against 2x0"));
}

TEST_CASE("run --check and gradcheck fail on NaN and say when they compared nothing") {
  Result nan = runCli("run 'y[i] := log(x[i] - 2)' --shape x=4 --check");
  CHECK(nan.status == 1);
  CHECK(has(nan.out, "check: FAIL (every value is NaN on both sides)"));
  Result empty = runCli("run 'y[i] := x[i+k] * w[k]' --shape x=2 --shape w=5 --check");
  CHECK(empty.status == 1);
  CHECK(has(empty.out, "over 0 element(s)"));
  CHECK(has(empty.out, "check: EMPTY (nothing compared: every output is empty)"));
  Result inf = runCli("run 'y[i] := x[i] / 0 + 1' --shape x=4 --dtype f64 --check");
  CHECK(inf.status == 0);
  CHECK(has(inf.out, "check: PASS"));

  Result g = runCli("gradcheck 'y[i] := log(x[i] - 2)' --shape x=4");
  CHECK(g.status == 1);
  CHECK(has(g.out, "dx: max relative error inf over 4 element(s)"));
  CHECK(has(g.out, "gradcheck: FAIL (dx element 0: finite differences give nan, the gradient "
                   "program "));
  Result ge = runCli("gradcheck 'y[i] := x[i+k] * w[k]' --shape x=2 --shape w=5");
  CHECK(ge.status == 1);
  CHECK(has(ge.out, "gradcheck: EMPTY (nothing to compare: every output is empty)"));
  Result gi = runCli("gradcheck 'y[i] := x[i] * 2' --shape x=0");
  CHECK(gi.status == 1);
  CHECK(has(gi.out, "gradcheck: EMPTY"));
}

TEST_CASE("--help lists every command and flag; CMD --help works for every command") {
  Result h = runCli("--help");
  CHECK(h.status == 0);
  const std::vector<std::string> commands = {"check", "run",  "grad",  "gradcheck", "explain",
                                             "bench", "demo", "cache", "help"};
  const std::vector<std::string> flags = {
      "--shape", "--input", "--scalar", "--seed", "--dtype", "--device", "--check", "--save",
      "--wrt",   "--cuda",  "--ir",     "--llvm", "--grad",  "--reps",   "--help",  "bf16"};
  for (const std::string& c : commands) {
    CAPTURE(c);
    CHECK(has(h.out, "  einjit " + c));
    Result one = runCli(c + " --help");
    CHECK(one.status == 0);
    CHECK(has(one.out, "usage: einjit " + c));
    CHECK(runCli("help " + c).out == one.out);
  }
  for (const std::string& f : flags) {
    CAPTURE(f);
    CHECK(has(h.out, f));
  }
  CHECK(runCli("help").out == h.out);
  CHECK(has(runCli("run --help").out, "--save DIR"));
  CHECK(!has(runCli("grad --help").out, "--reps"));
  CHECK(runCli("help frobnicate").status == 2);
}

// The README's command-line examples, pasted as written: every line of the first sh block of
// "The command-line tool" (continuation lines joined, comments dropped) runs with status 0.
TEST_CASE("the README's command-line examples run as written") {
  std::ifstream in(std::string(EINJIT_TEST_DIR) + "/../README.md");
  REQUIRE(in.good());
  std::vector<std::string> commands;
  std::string line, pending;
  bool section = false, block = false;
  while (std::getline(in, line)) {
    if (!section) {
      section = line == "## The command-line tool";
      continue;
    }
    if (!block) {
      block = line == "```sh";
      continue;
    }
    if (line == "```") break;
    // A comment starts at a '#' outside single quotes.
    bool quoted = false;
    std::size_t end = line.size();
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\'') quoted = !quoted;
      if (line[i] == '#' && !quoted) {
        end = i;
        break;
      }
    }
    line = line.substr(0, end);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1);
      continue;
    }
    line = pending + line;
    pending.clear();
    if (!line.empty()) commands.push_back(line);
  }
  REQUIRE(commands.size() >= 12);
  // Its own disk cache: 'einjit cache clear' must not empty the one other tests share.
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("einjit-readme-" + std::to_string(getpid()));
  for (const std::string& c : commands) {
    CAPTURE(c);
    REQUIRE(c.rfind("einjit ", 0) == 0);
#if !EINJIT_HAVE_LLVM
    // Timings of large layers: on the interpreter of a Debug build they would run for hours.
    // The demo has its own test above; 'bench' runs in the builds with LLVM.
    if (c.rfind("einjit bench ", 0) == 0 || c == "einjit demo") {
      MESSAGE("skipped in a build without LLVM (it times large layers): " << c);
      continue;
    }
    // Without LLVM there is no disk cache to clear, and the command says so.
    if (c.rfind("einjit cache clear", 0) == 0) {
      Result r = runCli(c.substr(7), "EINJIT_CACHE_DIR=" + cache.string() + " ");
      CHECK(r.status == 1);
      CHECK(has(r.out, "the disk cache is not used"));
      continue;
    }
#endif
    Result r = runCli(c.substr(7), "EINJIT_CACHE_DIR=" + cache.string() + " ");
    CHECK(r.status == 0);
    CHECK(!r.out.empty());
  }
  std::filesystem::remove_all(cache);
}

TEST_CASE("numeric flags are validated") {
  struct Row {
    const char* args;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"--seed abc", "--seed takes an integer from 0 to 18446744073709551615, got 'abc'"},
      {"--seed -1", "--seed takes an integer from 0 to 18446744073709551615, got '-1'"},
      {"--seed 99999999999999999999", "--seed takes an integer"},
      {"--seed ''", "--seed takes an integer"},
      {"--device cuda:99999999999999999999", "--device cuda:N takes an integer from 0 to 4095"},
      {"--device cuda:-1", "--device cuda:N takes an integer from 0 to 4095, got '-1'"},
      {"--device cuda:", "--device cuda:N takes an integer"},
      {"--reps 1e3", "--reps takes an integer from 0 to 1000000, got '1e3'"},
      {"--reps 0", "--reps takes a positive count, got '0'"},
      {"--scalar a=1e999", "--scalar a=1e999: out of the range of a double"},
      {"--scalar a=1x", "--scalar a=1x: not a number"},
      {"--shape x=99999999999999999999", "extents are non-negative integers"},
      {"--shape x=+3", "extents are non-negative integers"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.args);
    Result r = runCli("run 'y[i] := x[i] * a' --shape x=3 --scalar a=2 " + std::string(row.args));
    CHECK(r.status == 1);
    CHECK(has(r.out, row.message));
  }
}

TEST_CASE("a diagnostic is printed once and ends in a newline") {
  const std::vector<std::string> commands = {
      "check 'y[i] := x[i] $ 2'",                                          // syntax
      "run 'y[i] := x[i] * w[i]' --shape x=3 --shape w=4",                 // shapes
      "run 'y[i] := x[i+1] - x[i]' --shape x=3 --check",                   // bounds
      "run 't[i] := x[i] * 100; y[i] := E[t[i]]' --shape x=3 --shape E=4", // while running
      "gradcheck 'y[i] := x[i]' --shape x=3 --wrt q",                      // gradient
      "run 'y[i] := x[i]' --shape x=3 --seed abc",                         // usage
  };
  for (const std::string& c : commands) {
    CAPTURE(c);
    Result r = runCli(c);
    CHECK(r.status == 1);
    REQUIRE(!r.out.empty());
    CHECK(r.out.back() == '\n');
    CHECK(r.out.find("\n\n") == std::string::npos);
    std::size_t first = r.out.find("error");
    if (first != std::string::npos) CHECK(r.out.find("error", first + 1) == std::string::npos);
  }
}

// bench's GFLOP/s: a gradient's dependent ranges count the iterations they run. Worked out by
// hand: the forward runs n*o*h*w*c*a*b = 4*32*16*16*16*3*3 iterations of a multiply and an add;
// dx and dk each run exactly those products again (dx's h, w ranges pick, for each input
// element, the output positions whose window covers it), so the gradient program is twice the
// forward. The box hulls of dx's h and w (16 each instead of 1 or 2) counted about 60x more.
TEST_CASE("bench's flop count: a strided convolution's gradients count what they run") {
  using einjit::cli::flops;
  einjit::Kernel k = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]");
  const std::map<std::string, std::vector<std::int64_t>> shapes = {
      {"x", {4, 16, 33, 33}}, {"k", {32, 16, 3, 3}}, {"dy", {4, 32, 16, 16}}};
  auto specs = [&](const einjit::dsl::Program& p) {
    std::vector<einjit::dsl::ArgSpec> out;
    for (int id : p.arguments)
      out.push_back({einjit::DType::f32, shapes.at(p.tensors[static_cast<std::size_t>(id)].name)});
    return out;
  };
  const double forward = 2.0 * 4 * 32 * 16 * 16 * 16 * 3 * 3;
  auto f = flops(k.program(), einjit::dsl::bind(k.program(), specs(k.program()), {}));
  CHECK(f.exact);
  CHECK(f.flops == forward);
  for (const std::vector<std::string>& wrt :
       {std::vector<std::string>{"x"}, {"k"}, {"x", "k"}}) {
    CAPTURE(wrt.size());
    einjit::Kernel g = k.gradient(wrt);
    auto gf = flops(g.program(), einjit::dsl::bind(g.program(), specs(g.program()), {}));
    CHECK(gf.exact);
    CHECK(gf.flops == forward * static_cast<double>(wrt.size()));
  }
  // What `einjit bench --grad` prints with it: GFLOP/s no faster than a CPU can go.
  Result r = runCli("bench 'y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]' --shape x=4x16x33x33 "
                    "--shape k=32x16x3x3 --grad --reps 3");
  CHECK(r.status == 0);
  CHECK(has(r.out, "(forward + gradients) / forward"));
  CHECK_FALSE(has(r.out, "at most"));
}
