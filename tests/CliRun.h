// Runs the einjit command-line tool as a process, for the CLI's tests.
#pragma once

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace einjit::test {

struct CliResult {
  int status;
  std::string out;
};

// Runs the CLI with a shell-quoted argument string, stdout and stderr together.
inline CliResult runCli(const std::string& args, const std::string& env = "") {
  std::string cmd = env + std::string(EINJIT_CLI) + " " + args + " 2>&1";
  CliResult r{-1, {}};
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) r.out += buf.data();
  int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace einjit::test
