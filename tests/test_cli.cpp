// The einjit command-line tool, run as a process: output and exit status of each command.
#include "cli/Comparison.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <array>
#include <limits>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Result {
  int status;
  std::string out;
};

// Runs the CLI with a shell-quoted argument string, stdout and stderr together.
Result runCli(const std::string& args, const std::string& env = "") {
  std::string cmd = env + std::string(EINJIT_CLI) + " " + args + " 2>&1";
  Result r{-1, {}};
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) r.out += buf.data();
  int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

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
  CHECK(has(r.out, "backward (dx, dk) on the CPU JIT"));
  CHECK(has(r.out, "demo: PASS"));
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
      {{1, 2.00001}, {1, 2}, ""},                        // within 1e-4 relative
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
  einjit::cli::Comparison c = einjit::cli::compare(einjit::Tensor::zeros({0, 2}),
                                                   einjit::Tensor::zeros({2, 0}));
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
