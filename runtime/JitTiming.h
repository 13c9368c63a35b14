#pragma once
// Where the CPU JIT's compile time goes, on stderr (docs/ARCHITECTURE.md, "The CPU JIT"):
//   EINJIT_DEBUG_JIT=1       one line per compiled module: the thread CPU milliseconds of each
//                            stage (target machine, IR emission, middle end, code generation,
//                            loading), the pipeline, and LLVM instruction counts before and
//                            after the middle end
//   EINJIT_DEBUG_JIT=passes  also the middle end's most expensive passes and analyses
//                            and, for each cold compile, its timeline: every stage and module
//                            with the thread that ran it, its start and end on the steady
//                            clock (ms from the start of the compile) and its thread CPU ms,
//                            then the serial time before, between and after the modules
//   EINJIT_DEBUG_JIT_IR=DIR  each module's LLVM IR as emitted (NAME.ll) and after the middle
//                            end (NAME.opt.ll) in DIR, to time its stages apart (opt, llc
//                            -time-passes)
// Off (no clock read, nothing counted) when the variable is unset.
#include <llvm/IR/PassInstrumentation.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace einjit::runtime {

bool jitDebug();
bool jitDebugPasses();

// Writes the module's IR to EINJIT_DEBUG_JIT_IR/NAME.ll (nothing when that is unset).
void dumpModule(const llvm::Module& m, const std::string& name);

// The module's LLVM instructions (0 unless jitDebug()).
std::size_t instructionCount(const llvm::Module& m);

// Laps of the calling thread's CPU time, reported as one line.
class StageClock {
public:
  StageClock();
  void lap(const char* stage, std::size_t instructions = 0);
  // Laps from now on, on the calling thread (a module emitted on one thread may be compiled on
  // another).
  void resume();
  void note(const std::string& text); // e.g. the pipeline's name
  void report(const std::string& what) const;

private:
  double last_ = 0, total_ = 0;
  std::string text_;
};

// A cold compile's timeline (EINJIT_DEBUG_JIT): spans of the threads that work on it, reported
// when the outermost Timeline::Compile ends. Compiles of several kernels at once (from several
// callers' threads) share it; for one kernel at a time, as the benchmarks compile, it is that
// kernel's.
class Timeline {
public:
  // Opens the timeline (its origin is now) unless an enclosing compile has; the outermost one
  // reports it on stderr when it ends.
  class Compile {
  public:
    explicit Compile(std::string what);
    ~Compile();
    Compile(const Compile&) = delete;
    Compile& operator=(const Compile&) = delete;

  private:
    std::string what_;
    bool on_;
  };
  // One stage, or one module's compile (`module`), on the calling thread, from construction to
  // end() (or destruction).
  class Span {
  public:
    explicit Span(std::string what, bool module = false);
    ~Span() { end(); }
    void rename(std::string what) { what_ = std::move(what); }
    void end();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

  private:
    std::string what_;
    double start_ = 0, cpu_ = 0;
    bool module_, open_;
  };
};

// Time in each pass and analysis of a pass manager run, without the passes it runs.
class PassTimes {
public:
  void registerCallbacks(llvm::PassInstrumentationCallbacks& pic);
  void report() const; // the 12 most expensive

private:
  using Clock = std::chrono::steady_clock;
  struct Frame {
    std::string name;
    Clock::time_point start;
    double children = 0;
  };
  void push(llvm::StringRef name);
  void pop();
  std::vector<Frame> stack_;
  std::map<std::string, double> total_;
};

} // namespace einjit::runtime
