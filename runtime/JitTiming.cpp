#include "runtime/JitTiming.h"

#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

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

double steadyMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A small number per thread, in the order threads first record a span.
int threadNumber() {
  static std::atomic<int> next{0};
  thread_local const int n = next++;
  return n;
}

struct Event {
  std::string what;
  int thread;
  double start, end, cpu;
  bool module;
};

struct TimelineState {
  std::mutex mu;
  int depth = 0;
  double origin = 0;
  std::vector<Event> events;
};

TimelineState& timeline() {
  static TimelineState* t = new TimelineState; // spans may end during exit
  return *t;
}

// The timeline as a table, then where the wall time went: before the first module started,
// while modules compiled (and how much of that the threads spent idle), after the last.
void reportTimeline(const std::string& what, double end, std::vector<Event> events) {
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.start < b.start; });
  std::string text = "einjit jit timeline: " + what +
                     " (ms from the start, steady clock; thread; thread CPU ms)\n";
  double first = end, last = 0, moduleCpu = 0, moduleWall = 0, largest = 0;
  std::vector<int> threads;
  for (const Event& e : events) {
    char line[320];
    std::snprintf(line, sizeof line, "  %7.1f %7.1f  t%d  cpu %6.1f  %s%s\n", e.start, e.end, e.thread,
                  e.cpu, e.module ? "module " : "", e.what.c_str());
    text += line;
    if (!e.module) continue;
    first = std::min(first, e.start);
    last = std::max(last, e.end);
    moduleCpu += e.cpu;
    moduleWall += e.end - e.start;
    largest = std::max(largest, e.cpu);
    if (std::find(threads.begin(), threads.end(), e.thread) == threads.end()) threads.push_back(e.thread);
  }
  if (threads.empty()) {
    char line[160];
    std::snprintf(line, sizeof line, "  wall %.1f: no module compiled (the code was cached)\n", end);
    std::fputs((text + line).c_str(), stderr);
    return;
  }
  char line[400];
  const double window = last - first;
  std::snprintf(line, sizeof line,
                "  wall %.1f: before the modules %.1f, modules %.1f (%zu threads, idle %.1f of their "
                "thread-ms; module CPU sum %.1f, largest %.1f), after %.1f\n",
                end, first, window, threads.size(),
                window * static_cast<double>(threads.size()) - moduleWall, moduleCpu, largest,
                end - last);
  text += line;
  std::fputs(text.c_str(), stderr);
}

} // namespace

Timeline::Compile::Compile(std::string what) : what_(std::move(what)), on_(jitDebug()) {
  if (!on_) return;
  TimelineState& t = timeline();
  const std::lock_guard<std::mutex> lock(t.mu);
  if (t.depth++ == 0) {
    t.origin = steadyMs();
    t.events.clear();
  }
}

Timeline::Compile::~Compile() {
  if (!on_) return;
  TimelineState& t = timeline();
  std::vector<Event> events;
  double end = 0;
  {
    const std::lock_guard<std::mutex> lock(t.mu);
    if (--t.depth > 0) return;
    end = steadyMs() - t.origin;
    events.swap(t.events);
  }
  reportTimeline(what_, end, std::move(events));
}

Timeline::Span::Span(std::string what, bool module)
    : what_(std::move(what)), module_(module), open_(jitDebug()) {
  if (!open_) return;
  start_ = steadyMs();
  cpu_ = threadCpuMs();
}

void Timeline::Span::end() {
  if (!open_) return;
  open_ = false;
  const double now = steadyMs(), cpu = threadCpuMs() - cpu_;
  TimelineState& t = timeline();
  const std::lock_guard<std::mutex> lock(t.mu);
  if (t.depth == 0) return; // no compile is open: a span outside any (a test's direct call)
  t.events.push_back({what_, threadNumber(), start_ - t.origin, now - t.origin, cpu, module_});
}

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
  if (jitDebug()) last_ = threadCpuMs();
}

void StageClock::lap(const char* stage, std::size_t instructions) {
  if (!jitDebug()) return;
  const double now = threadCpuMs();
  char item[96];
  std::snprintf(item, sizeof item, " %s %.1f", stage, now - last_);
  text_ += item;
  if (instructions > 0) text_ += " (" + std::to_string(instructions) + " instructions)";
  total_ += now - last_;
  last_ = now;
}

void StageClock::resume() {
  if (jitDebug()) last_ = threadCpuMs();
}

void StageClock::note(const std::string& text) {
  if (jitDebug()) text_ += " [" + text + "]";
}

void StageClock::report(const std::string& what) const {
  if (!jitDebug()) return;
  std::fprintf(stderr, "einjit jit: %s, CPU ms:%s; total %.1f\n", what.c_str(), text_.c_str(),
               total_);
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
