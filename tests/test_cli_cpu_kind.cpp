// The einjit command-line tool under another CPU kind's code generation (EINJIT_JIT_CPU,
// EINJIT_CPU_CACHE_BYTES): what it compiles for that kind, and where this host can run it, its
// values against the float64 interpreter (the variables themselves: test_cli).
#include "CliRun.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using einjit::test::has;
using einjit::test::CliResult;
using einjit::test::runCli;

namespace {

// The 3x3 convolutions of bench_cpu (64 channels, 56 columns: the Xeon's 13x32 and 22x16
// tiles, 54 / 56 / 27 columns padded in their slivers) on few rows: forwards and input
// gradients (the gradient programs as `einjit grad` prints them), stride 1 and 2 (the stride-2
// forward on 8 output rows: x read in place, lanes two apart, in 16 x 16 tiles; on fewer rows
// x is packed whole).
struct ConvCase {
  const char* name;
  const char* program;
  const char* shapes;
};
const ConvCase kConvs[] = {
    {"stride 1 forward", "'y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]'",
     "--shape x=1x64x8x56 --shape k=64x64x3x3"},
    {"stride 1 input gradient",
     "'dx[n, c, u, v] := dy[n, o, u - a, v - b] * k[o, c, a, b] where n in 0:1, c in 0:64, u in "
     "0:8, v in 0:56, o in 0:64, a in max(u + 3 - 8, 0):min(u + 1, 3), b in max(v + 3 - 56, "
     "0):min(v + 1, 3)'",
     "--shape dy=1x64x6x54 --shape k=64x64x3x3"},
    {"stride 2 forward", "'y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]'",
     "--shape x=1x64x17x56 --shape k=64x64x3x3"},
    {"stride 2 input gradient",
     "'dx[n, c, u, v] := dy[n, o, h, w] * k[o, c, u - 2h, v - 2w] where n in 0:1, c in 0:64, u "
     "in 0:9, v in 0:56, o in 0:64, h in max(0, cdiv(u - 2, 2)):min(4, fdiv(u, 2) + 1), w in "
     "max(0, cdiv(v - 2, 2)):min(27, fdiv(v, 2) + 1)'",
     "--shape dy=1x64x4x27 --shape k=64x64x3x3"},
};

// The Xeon's code generation and blocking (the device tool's host: LLVM `rocketlake`, L1d 48
// KiB, L2 2 MiB).
const std::string kXeon =
    "EINJIT_JIT_CPU=rocketlake EINJIT_CPU_CACHE_BYTES=49152,2097152,314572800 ";

// Per compiled module of an `EINJIT_DEBUG_JIT=1` run: its instructions after the middle end,
// whether code generation ran without loop strength reduction, and whether it only moves data
// (the fast instruction selector's modules).
struct Module {
  long instructions = 0;
  bool withoutLsr = false, mover = false;
};
std::vector<Module> modules(const std::string& out) {
  std::vector<Module> r;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("einjit jit: ", 0) != 0 || !has(line, "-byte object")) continue;
    const std::size_t at = line.find("explicit-code pipeline");
    if (at == std::string::npos) continue;
    Module m;
    m.instructions = std::stol(line.substr(line.find('(', at) + 1));
    m.withoutLsr = has(line, "[without LSR]");
    m.mover = has(line, "[fast instruction selection]");
    r.push_back(m);
  }
  return r;
}

// Whether this host runs code made for `rocketlake` (its AVX-512 extensions).
bool hostRunsRocketlake() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512ifma") &&
         __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bitalg") &&
         __builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("gfni") &&
         __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq");
}

} // namespace

// Loop strength reduction: code for a full-width AVX-512 core (the Xeon) keeps it in every
// module that computes, also past the size where other CPUs' code goes without it (the
// micro-kernel modules of the convolutions, with their edge tiles); Zen 4's (512-bit operations
// in halves) and the modules that only move data (packing) go without it there as before (and
// so do a large function's tile loops compiled apart, whatever their own size).
// Compiled only: nothing runs.
TEST_CASE("Code for full-width AVX-512 keeps loop strength reduction in every computing module") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so no CPU code is made");
  return;
#endif
  for (const ConvCase& c : kConvs) {
    CAPTURE(c.name);
    const std::string args = std::string("explain ") + c.program + " " + c.shapes;
    const std::string debug = "EINJIT_CACHE_DIR=off EINJIT_DEBUG_JIT=1 ";
    for (const char* cpu : {"rocketlake", "sapphirerapids", "znver4"}) {
      CAPTURE(cpu);
      const CliResult r = runCli(args, debug + "EINJIT_JIT_CPU=" + cpu + " ");
      REQUIRE(r.status == 0);
      const bool wide = std::string(cpu) != "znver4";
      bool large = false;
      for (const Module& m : modules(r.out)) {
        CAPTURE(m.instructions);
        if (m.mover) CHECK(m.withoutLsr);
        if (!m.mover && m.instructions > 450) {
          large = true;
          CHECK(m.withoutLsr == !wide);
        }
        // (Elsewhere a tile loop compiled as a module of its own, from a function above the
        // limit, may be under it and goes without, as its function did: Zen 4's 16 x 16 tiles.)
        if (!m.mover && m.instructions <= 450 && wide) CHECK(!m.withoutLsr);
      }
      CHECK(large); // a micro-kernel module past the size limit
    }
  }
}

// The Xeon's plans and code (its tiles, blocking and code generation) for the convolutions,
// run on this host where it has the AVX-512 extensions that code may use: every output against
// the float64 interpreter (`run --check`: status 1 on a difference).
TEST_CASE("The Xeon's code for the 3x3 convolutions matches the float64 interpreter") {
#if !EINJIT_HAVE_LLVM
  MESSAGE("skipped: this build has no LLVM JIT, so no CPU code is made");
  return;
#endif
  if (!hostRunsRocketlake()) {
    MESSAGE("skipped: this host lacks the AVX-512 extensions of rocketlake's code");
    return;
  }
  const std::string dir = "/tmp/einjit-cli-xeon-" + std::to_string(::getpid());
  for (const ConvCase& c : kConvs) {
    CAPTURE(c.name);
    const CliResult r = runCli(std::string("run ") + c.program + " " + c.shapes + " --check",
                            "EINJIT_CACHE_DIR=" + dir + " " + kXeon);
    CAPTURE(r.out);
    CHECK(r.status == 0);
    CHECK(has(r.out, "check: PASS"));
  }
  std::filesystem::remove_all(dir);
}
