#pragma once
// Shared helpers for the test suites.
#include "dsl/Ast.h"
#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace einjit::test {

// print(parse(text)) must parse back to the same tree, and printing is a fixed point.
inline void checkRoundTrip(const std::string& text) {
  CAPTURE(text);
  dsl::ProgramAst a = dsl::parse(text);
  std::string printed = dsl::printProgram(a);
  CAPTURE(printed);
  dsl::ProgramAst b = dsl::parse(printed);
  CHECK(dsl::sameProgram(a, b));
  CHECK(dsl::printProgram(b) == printed);
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

inline void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Golden-file comparison; EINJIT_ACCEPT=1 rewrites the expected file instead.
inline void checkGolden(const std::string& path, const std::string& actual) {
  CAPTURE(path);
  if (const char* acc = std::getenv("EINJIT_ACCEPT"); acc && std::string(acc) == "1") {
    writeFile(path, actual);
    return;
  }
  std::string expected = readFile(path);
  REQUIRE_MESSAGE(!expected.empty(), "missing golden file (run with EINJIT_ACCEPT=1 to create)");
  CHECK(actual == expected);
}

// f() must throw an einjit::Error whose message holds `what`, names <program>:LINE:COLUMN first
// and draws a caret.
inline void checkCaretError(const std::function<void()>& f, const std::string& what, int line,
                            int column) {
  try {
    f();
    FAIL_CHECK("no error");
  } catch (const einjit::Error& e) {
    std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find(what) != std::string::npos);
    CHECK(msg.find("<program>:" + std::to_string(line) + ":" + std::to_string(column) + ":") == 0);
    CHECK(msg.find('^') != std::string::npos);
  }
}

// run() is a gradcheck that must pass: every input within 1e-6 of central differences, and no
// exception.
inline void checkGradcheckPasses(const std::function<einjit::GradCheckResult()>& run) {
  try {
    const einjit::GradCheckResult r = run();
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      CAPTURE(r.inputs[i]);
      CHECK(r.maxRelativeError[i] <= 1e-6);
    }
    CHECK_MESSAGE(r.passed, r.why);
    CHECK(!r.inputs.empty());
  } catch (const std::exception& e) {
    FAIL_CHECK("threw: " << std::string(e.what()));
  }
}

} // namespace einjit::test
