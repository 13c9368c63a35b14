// libFuzzer target over the whole pipeline (tests/fuzz/Pipeline.h); built by
// -DEINJIT_FUZZ=ON with clang (scripts/fuzz.sh). A finding aborts: a crash or sanitizer report
// (by itself), an exception other than einjit::Error (escapes to libFuzzer), or a disagreement
// between the interpreter and the CPU JIT (printed, then abort).
#include "fuzz/Pipeline.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Nothing on disk: the fuzzer compiles thousands of programs.
  setenv("EINJIT_CACHE_DIR", "off", 1);
  einjit::CacheLimits l = einjit::cacheLimits();
  l.memoryModules = 32;
  einjit::setCacheLimits(l);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  einjit::fuzz::Result r = einjit::fuzz::runPipeline(input);
  if (!r.mismatch.empty()) {
    std::fprintf(stderr, "einjit fuzz finding: %s\n", r.mismatch.c_str());
    std::abort();
  }
  return 0;
}
