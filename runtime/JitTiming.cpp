#include "runtime/JitTiming.h"

#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace einjit::runtime {

namespace {

const char* debugSetting() {
  static const char* e = std::getenv("EINJIT_DEBUG_JIT");
  return e;
}

double threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

} // namespace

bool jitDebug() {
  static const bool on = debugSetting() && *debugSetting() && std::strcmp(debugSetting(), "0") != 0;
  return on;
}

bool jitDebugPasses() {
  static const bool on = debugSetting() && std::strcmp(debugSetting(), "passes") == 0;
  return on;
}

void dumpModule(const llvm::Module& m, const std::string& name) {
  static const char* dir = std::getenv("EINJIT_DEBUG_JIT_IR");
  if (!dir || !*dir) return;
  std::string file = name;
  for (char& c : file)
    if (c == ' ' || c == '/' || c == ',') c = '_';
  std::error_code ec;
  llvm::raw_fd_ostream os(std::string(dir) + "/" + file + ".ll", ec);
  if (!ec) m.print(os, nullptr);
}

std::size_t instructionCount(const llvm::Module& m) {
  if (!jitDebug()) return 0;
  std::size_t n = 0;
  for (const llvm::Function& f : m) n += f.getInstructionCount();
  return n;
}

StageClock::StageClock() {
  if (jitDebug()) first_ = last_ = threadCpuMs();
}

void StageClock::lap(const char* stage, std::size_t instructions) {
  if (!jitDebug()) return;
  const double now = threadCpuMs();
  char item[96];
  std::snprintf(item, sizeof item, " %s %.1f", stage, now - last_);
  text_ += item;
  if (instructions > 0) text_ += " (" + std::to_string(instructions) + " instructions)";
  last_ = now;
}

void StageClock::note(const std::string& text) {
  if (jitDebug()) text_ += " [" + text + "]";
}

void StageClock::report(const std::string& what) const {
  if (!jitDebug()) return;
  std::fprintf(stderr, "einjit jit: %s, CPU ms:%s; total %.1f\n", what.c_str(), text_.c_str(),
               last_ - first_);
}

void PassTimes::registerCallbacks(llvm::PassInstrumentationCallbacks& pic) {
  pic.registerBeforeNonSkippedPassCallback([this](llvm::StringRef name, llvm::Any) { push(name); });
  pic.registerAfterPassCallback(
      [this](llvm::StringRef, llvm::Any, const llvm::PreservedAnalyses&) { pop(); });
  pic.registerAfterPassInvalidatedCallback(
      [this](llvm::StringRef, const llvm::PreservedAnalyses&) { pop(); });
  pic.registerBeforeAnalysisCallback([this](llvm::StringRef name, llvm::Any) { push(name); });
  pic.registerAfterAnalysisCallback([this](llvm::StringRef, llvm::Any) { pop(); });
}

void PassTimes::push(llvm::StringRef name) { stack_.push_back({name.str(), Clock::now(), 0}); }

void PassTimes::pop() {
  if (stack_.empty()) return;
  const Frame f = stack_.back();
  stack_.pop_back();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - f.start).count();
  total_[f.name] += ms - f.children;
  if (!stack_.empty()) stack_.back().children += ms;
}

void PassTimes::report() const {
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, ms] : total_) rows.emplace_back(ms, name);
  std::sort(rows.rbegin(), rows.rend());
  std::string text;
  for (std::size_t i = 0; i < rows.size() && i < 12; ++i) {
    char item[200];
    std::snprintf(item, sizeof item, " %s %.1f;", rows[i].second.c_str(), rows[i].first);
    text += item;
  }
  std::fprintf(stderr, "einjit jit passes (wall ms):%s\n", text.c_str());
}

} // namespace einjit::runtime
