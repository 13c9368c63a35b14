// The fuzzer's kept inputs, replayed by ctest in every build (tests/fuzz/Pipeline.h): the seed
// corpus (every program of the test tables) and every finding, fixed, in regressions/. Each
// must come out as the fuzzer wants: success or einjit::Error, the interpreter and the CPU
// JIT agreeing, no other exception (and under ASan/UBSan no report).
#include "GradTable.h"
#include "InterpreterTable.h"
#include "TestSupport.h"
#include "fuzz/Pipeline.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(EINJIT_TEST_DIR) / "fuzz";

std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

std::string seedName(const std::string& program) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(einjit::fuzz::hashOf(program)));
  return std::string("table-") + buf;
}

// Replays files [begin, end) of `dir`; returns how many there are.
std::size_t replay(const fs::path& dir, std::size_t begin, std::size_t end) {
  std::vector<fs::path> files = filesIn(dir);
  int checked = 0, ran = 0, gradients = 0;
  for (std::size_t i = begin; i < std::min(end, files.size()); ++i) {
    const std::string input = einjit::test::readFile(files[i].string());
    INFO("input " << files[i].filename().string() << ":\n" << input);
    try {
      einjit::fuzz::Result r = einjit::fuzz::runPipeline(input);
      CHECK_MESSAGE(r.mismatch.empty(), r.mismatch);
      checked += r.checked;
      ran += r.ran;
      gradients += r.gradientRan;
    } catch (const std::exception& e) {
      FAIL_CHECK("an exception other than einjit::Error: " << e.what());
    }
  }
  MESSAGE(dir.filename().string() << " [" << begin << ", " << std::min(end, files.size())
                                  << "): " << checked << " checked, " << ran << " ran, "
                                  << gradients << " gradients ran");
  return files.size();
}

} // namespace

TEST_CASE("the seed corpus holds every program of the test tables") {
  // EINJIT_ACCEPT=1 writes the missing ones (after a table grows).
  std::set<std::string> programs;
  for (const auto& row : einjit::test::kGradRows) programs.insert(row.program);
  for (const auto& row : einjit::test::interp::rows()) programs.insert(row.program);
  const char* acc = std::getenv("EINJIT_ACCEPT");
  int missing = 0;
  for (const std::string& p : programs) {
    fs::path f = kFuzzDir / "seeds" / seedName(p);
    if (fs::exists(f) && einjit::test::readFile(f.string()) == p) continue;
    if (acc && std::string(acc) == "1") {
      einjit::test::writeFile(f.string(), p);
      continue;
    }
    ++missing;
    INFO("missing seed " << f.filename().string() << " for:\n" << p);
    CHECK(fs::exists(f));
  }
  CHECK(missing == 0);
  CHECK(programs.size() >= 100);
}

TEST_CASE("fuzzer regressions: every kept finding replays clean") {
  CHECK(replay(kFuzzDir / "regressions", 0, SIZE_MAX) >= 1);
}

TEST_CASE("fuzzer seeds 0-59 replay clean") { CHECK(replay(kFuzzDir / "seeds", 0, 60) > 60); }
TEST_CASE("fuzzer seeds 60-119 replay clean") { replay(kFuzzDir / "seeds", 60, 120); }
TEST_CASE("fuzzer seeds 120- replay clean") { replay(kFuzzDir / "seeds", 120, SIZE_MAX); }
