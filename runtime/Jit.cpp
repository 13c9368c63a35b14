#include "runtime/Jit.h"

#include "codegen/CodeGenLLVM.h"
#include "einjit/Error.h"
#include "runtime/Caches.h"
#include "runtime/CompileCache.h"
#include "runtime/DiskCache.h"
#include "runtime/JitImage.h"
#include "runtime/JitModules.h"
#include "runtime/JitPerfMap.h"
#include "runtime/JitPlan.h"
#include "runtime/JitThreads.h"
#include "runtime/JitTiming.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Pass.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/StandardInstrumentations.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <string_view>
#include <map>
#include <mutex>
#include <sstream>

#include <unistd.h>
#include <thread>

#if EINJIT_HAVE_TBB
#include <tbb/info.h>
#endif

namespace einjit::runtime {

// Bump when the generated code changes meaning for the same IR (it is part of every key).
constexpr const char* kCodegenVersion = "einjit-cpu-14";

// One loaded module: its own JITDylib, removed (with the code, the symbol table and the
// process-symbol generator) when the last holder lets go.
struct CompiledCode::Resource {
  llvm::orc::ExecutionSession* session = nullptr;
  llvm::orc::JITDylib* dylib = nullptr;
  Resource() = default;
  Resource(const Resource&) = delete;
  Resource& operator=(const Resource&) = delete;
  ~Resource() {
    if (session && dylib) llvm::consumeError(session->removeJITDylib(*dylib));
  }
};

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
T check(llvm::Expected<T> v, const std::string& what) {
  if (!v) throw Error("LLVM JIT: " + what + ": " + errorText(v.takeError()));
  return std::move(*v);
}

using CodeCache = CompileCache<CompiledCode>;

// The middle end of functions whose code is explicit (codegen::kExplicitCodeAttr: the packed
// GEMM's vector loops written out, its packing loops rolled): O3's vectorizers have nothing to
// do there, and its loop passes (induction-variable rewriting, unswitching, the analyses they
// need over deep nests) cost most of such a function's compile time. What the code still
// needs: the bodies inlined into their entry points, the accumulator arrays in registers
// (SROA), the index arithmetic simplified and hoisted out of the loops (LICM after rotation,
// GVN), the branches that the lowering's guards make dead removed (SCCP, correlated-value
// propagation: less code to generate), and the serial loops around a micro-kernel unrolled
// where LLVM's unroller finds it pays.
constexpr const char* kExplicitPipeline =
    "always-inline,function(sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,sccp,"
    "correlated-propagation,simplifycfg,loop-mssa(loop-rotate,licm),loop-unroll<O3>,gvn,"
    "instcombine<no-verify-fixpoint>,simplifycfg)";

// Code generation's passes, without loop strength reduction (and the freeze canonicalization
// that prepares for it) when `withoutLsr`. Its cost grows faster than the code (a third to a
// half of a module's code generation). Explicit code goes without it where it does not pay:
// a module that only moves data (a packing function: CodeGenLLVM's strided loops already step
// a pointer per buffer and stride), and code of more than kLsrInstructionLimit LLVM
// instructions after the middle end (the convolutions' micro-kernels with their edge tiles, a
// stride-2 input gradient's residue phases: no measured difference to run time). Below that
// limit, a module that computes keeps it: without it the stride-1 weight gradient ran 10%
// slower and the distance layer 15-40% slower (its micro-kernel's loop, left to LLVM, is tuned
// by it). A per-module choice, unlike LLVM's -disable-lsr, which is one setting for the whole
// process. On Intel's full-width AVX-512 cores every module that computes keeps it
// (Engine::lsrWide): without it a micro-kernel recomputes A's address each step and its FMAs
// read their broadcasts through an indexed address, which Intel's cores do not micro-fuse
// (two uops each; bench/RESULTS.md, "the 3x3 convolutions on the Xeon").
constexpr unsigned kLsrInstructionLimit = 450;

class CodegenPasses final : public llvm::legacy::PassManager {
public:
  explicit CodegenPasses(bool withoutLsr) : withoutLsr_(withoutLsr) {}
  void add(llvm::Pass* p) override {
    if (withoutLsr_ && (p->getPassName() == "Loop Strength Reduction" ||
                        p->getPassName() == "Canonicalize Freeze Instructions in Loops")) {
      delete p;
      return;
    }
    llvm::legacy::PassManager::add(p);
  }

private:
  bool withoutLsr_;
};

struct Engine {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::string cpu, features, triple;
  int vectorBytes = 16;
  // Code for a full-width AVX-512 core (64-byte vectors, not AMD Zen 4's two 256-bit halves):
  // every explicit module that computes keeps loop strength reduction, whatever its size
  // (kLsrInstructionLimit); part of the key.
  bool lsrWide = false;
  CodeCache cache{"o"}; // object images; its lock also guards `modules` and the JIT
  std::uint64_t modules = 0;
  // EINJIT_JIT_PIPELINE=o3: every function through O3, the explicit-code pipeline off (to
  // compare the two; part of the cache key).
  const bool fullO3 = [] {
    const char* e = std::getenv("EINJIT_JIT_PIPELINE");
    return e && std::strcmp(e, "o3") == 0;
  }();

  // EINJIT_JIT_LSR=1: code generation keeps loop strength reduction on every module (to
  // compare; part of the key).
  const bool lsrEverywhere = [] {
    const char* e = std::getenv("EINJIT_JIT_LSR");
    return e && std::strcmp(e, "1") == 0;
  }();
  // EINJIT_JIT_MOVER_ISEL=dag: the modules that only move data get the same instruction
  // selection as the others (to compare; part of the key). By default they get LLVM's fast
  // instruction selector: selecting their many small loops was about a third of such a
  // module's compile time, and the code it selects (an extra register copy and `or` for some
  // of the packed panel's addresses) moves data at the speed of the selection DAG's
  // (bench/RESULTS.md, the JIT compile time sections).
  const bool moverCodegen = [] {
    const char* e = std::getenv("EINJIT_JIT_MOVER_ISEL");
    return !(e && std::strcmp(e, "dag") == 0);
  }();
  // EINJIT_JIT_EXPLICIT_PIPELINE: another pipeline (LLVM's textual form) for explicit code,
  // to try one without a rebuild; part of the key.
  const std::string explicitPipeline = [] {
    const char* e = std::getenv("EINJIT_JIT_EXPLICIT_PIPELINE");
    return std::string(e && *e ? e : kExplicitPipeline);
  }();
  // EINJIT_JIT_LLVM_ARGS: LLVM's own command-line options for every compile (such as
  // "-disable-lsr"), to try a code generation setting without a rebuild; part of the key.
  const std::string llvmArgs = [] {
    const char* e = std::getenv("EINJIT_JIT_LLVM_ARGS");
    return std::string(e ? e : "");
  }();

  Engine() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    if (!llvmArgs.empty()) {
      std::vector<std::string> words{"einjit"};
      std::istringstream in(llvmArgs);
      for (std::string w; in >> w;) words.push_back(w);
      std::vector<const char*> argv;
      for (const std::string& w : words) argv.push_back(w.c_str());
      if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "einjit",
                                             &llvm::errs()))
        throw Error("EINJIT_JIT_LLVM_ARGS: LLVM does not accept '" + llvmArgs + "'");
    }
    auto b = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    forceCpu(b);
    cpu = b.getCPU();
    bool avx512 = false, avx = false;
    for (const auto& f : b.getFeatures().getFeatures()) {
      avx512 = avx512 || f == "+avx512f";
      avx = avx || f == "+avx";
    }
    // Full-width AVX-512: the schedules pick 64-byte vectors, so do not let the backend split
    // them (some CPU tunings prefer 256-bit vectors).
    if (avx512) b.getFeatures().AddFeature("prefer-256-bit", false);
    vectorBytes = avx512 ? 64 : avx ? 32 : 16;
    lsrWide = avx512 && cpu != "znver4";
    b.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    features = b.getFeatures().getString();
    triple = b.getTargetTriple().str();
    jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(b);
    jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(b).create(), "creating LLJIT");
  }

  // EINJIT_JIT_CPU=NAME (an LLVM x86 CPU name: sapphirerapids, znver4): code for that CPU and
  // its features instead of the host's, so that the code another CPU kind runs can be read here
  // (`explain --llvm`, EINJIT_DEBUG_JIT_IR); the schedules follow its vector width. Code for
  // features the host lacks must not be run on it.
  static void forceCpu(llvm::orc::JITTargetMachineBuilder& b) {
    const char* e = std::getenv("EINJIT_JIT_CPU");
    if (!e || !*e) return;
    if (llvm::X86::parseArchX86(e, /*Only64Bit=*/true) == llvm::X86::CK_None)
      throw Error(std::string("EINJIT_JIT_CPU is '") + e + "': LLVM knows no 64-bit x86 CPU of that name");
    llvm::SmallVector<llvm::StringRef, 64> features;
    llvm::X86::getFeaturesForCPU(e, features, /*NeedPlus=*/true);
    llvm::SubtargetFeatures f;
    for (llvm::StringRef x : features) f.AddFeature(x);
    b.setCPU(e);
    b.getFeatures() = f;
  }

  std::string keyOf(const std::vector<codegen::ir::Func>& funcs) const {
    std::string key = std::string(kCodegenVersion) + " llvm " + LLVM_VERSION_STRING + " " + triple +
                      " " + cpu + " " + features + (fullO3 ? " o3" : "") +
                      (lsrEverywhere ? " lsr" : lsrWide ? " lsr-wide" : "") +
                      (moverCodegen ? "" : " mover-dag") +
                      (codegen::edgeParts() ? "" : " no-edge-parts") + " " + llvmArgs + " " +
                      explicitPipeline + "\n";
    for (const auto& f : funcs) key += codegen::ir::print(f) + (f.explicitCode ? "explicit\n" : "");
    return key;
  }

  // --- compilation -----------------------------------------------------------------------------

  // The host's target machine at a code generation level, one per thread: building one costs
  // about what generating a small function's code does, and one must not be shared between
  // threads (instruction selection lowers its level while it compiles an `optnone` function).
  // With `fastIsel`, instruction selection is LLVM's fast selector (moverCodegen).
  llvm::TargetMachine& targetMachine(llvm::CodeGenOptLevel level, bool fastIsel = false) {
    using Level = std::pair<llvm::CodeGenOptLevel, bool>;
    thread_local std::map<Level, std::unique_ptr<llvm::TargetMachine>> machines;
    std::unique_ptr<llvm::TargetMachine>& tm = machines[{level, fastIsel}];
    if (!tm) {
      llvm::orc::JITTargetMachineBuilder b = *jtmb;
      b.setCodeGenOptLevel(level);
      tm = check(b.createTargetMachine(), "target machine");
      if (fastIsel) tm->setFastISel(true);
    }
    return *tm;
  }

  // The code of a program is an object file per module (the functions share nothing: each is
  // called by the runtime through its entry point), compiled in parallel on oneTBB's threads;
  // the image packs them (JitImage.h). Each function that is optimized gets a module of its
  // own, and each of its outlined loops that compiles apart (codegen::separateParts: a
  // strided gradient's residue phases, a convolution's or a GEMM's packing, a product's
  // register-tile variants) another, all loaded together;
  // the functions compiled unoptimized (codegen::unoptimized: edge tiles, borders, combines)
  // share one, which skips the middle end and gets LLVM's fast code generation (each module
  // costs a fixed few milliseconds, which such a function's code does not). The optimized
  // modules that only move data (packing functions and parts: explicit code without
  // floating-point arithmetic) are then emitted again together, into one module (movers).
  static constexpr std::size_t kWhole = static_cast<std::size_t>(-1);
  struct Unit {
    std::vector<codegen::ir::Func> funcs; // one function, those compiled unoptimized, or movers
    bool optimize = true;
    // Per function: its part (codegen::emitLLVMPart), or kWhole for all of it.
    std::vector<std::size_t> parts;
  };

  // A unit's module as emitted, waiting for the middle end and code generation (possibly on
  // another thread: a context is used by one thread at a time, not tied to one).
  struct Emitted {
    std::unique_ptr<llvm::LLVMContext> ctx;
    std::unique_ptr<llvm::Module> m;
    std::string llvmErrors; // the context's diagnostics (errors only), at a fixed address
    StageClock clock;
    double cost = 0; // the expected compile time, in arbitrary units
    Emitted() = default;
    Emitted(const Emitted&) = delete; // the context points into it
    Emitted& operator=(const Emitted&) = delete;
  };

  std::string buildImage(const std::vector<codegen::ir::Func>& funcs, const std::string& prefix,
                         std::string* irText) {
    std::vector<Unit> units;
    std::vector<codegen::ir::Func> unoptimized;
    for (const codegen::ir::Func& f : funcs) {
      if (codegen::unoptimized(f)) {
        unoptimized.push_back(f);
        continue;
      }
      const std::size_t parts = codegen::separateParts(f);
      for (std::size_t k = 0; k <= parts; ++k) units.push_back({{f}, true, {parts ? k : kWhole}});
    }
    if (!unoptimized.empty()) {
      const std::size_t count = unoptimized.size();
      units.push_back({std::move(unoptimized), false, std::vector<std::size_t>(count, kWhole)});
    }
    const std::size_t n = units.size();
    std::deque<Emitted> emitted(n); // and the movers' modules, appended (mergeMovers)
    std::vector<std::string> objects(n), texts(n);
    std::vector<std::exception_ptr> failures(n);
    // The parallel loops' joins already order each unit's work before what follows; these
    // flags state that order in instrumented code too, since oneTBB's own handshake is not
    // visible to ThreadSanitizer (a task's reads of the shared IR would otherwise be reported
    // against the caller freeing it later).
    std::vector<std::atomic<bool>> finished(n);
    // First every module's LLVM IR (about a millisecond each), which tells what each costs;
    // then the middle end and code generation, the costliest modules first, so that the
    // longest one does not start last.
    inOrder(n, [&](std::size_t i) {
      try {
        Timeline::Span span("emit " + unitName(units[i]));
        emitModule(units[i], prefix, emitted[i]);
      } catch (...) {
        failures[i] = std::current_exception();
      }
      finished[i].store(true, std::memory_order_release);
    });
    for (std::atomic<bool>& f : finished) (void)f.exchange(false, std::memory_order_acq_rel);
    for (const std::exception_ptr& e : failures)
      if (e) std::rethrow_exception(e);
    std::vector<std::size_t> order = mergeMovers(units, emitted);
    const std::size_t compiled = order.size();
    objects.resize(units.size());
    texts.resize(units.size());
    failures.resize(units.size());
    std::vector<std::atomic<bool>> done(units.size());
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return emitted[x].cost > emitted[y].cost;
    });
    inOrder(compiled, [&](std::size_t k) {
      const std::size_t i = order[k];
      try {
        if (!emitted[i].m) { // a group of movers (mergeMovers)
          Timeline::Span span("emit " + unitName(units[i]));
          emitModule(units[i], prefix, emitted[i]);
        }
        Timeline::Span span(unitName(units[i]), true);
        objects[i] = compileModule(units[i], emitted[i], prefix, irText ? &texts[i] : nullptr);
      } catch (...) {
        failures[i] = std::current_exception();
      }
      // The module, then its context, freed on the thread that used them.
      emitted[i].m.reset();
      emitted[i].ctx.reset();
      done[i].store(true, std::memory_order_release);
    });
    for (const std::atomic<bool>& f : done) (void)f.load(std::memory_order_acquire);
    for (const std::exception_ptr& e : failures)
      if (e) std::rethrow_exception(e);
    std::sort(order.begin(), order.end()); // the program's order in the image
    std::vector<std::string> kept;
    for (std::size_t i : order) {
      if (irText) *irText += texts[i];
      kept.push_back(std::move(objects[i]));
    }
    Timeline::Span span("pack the objects");
    return packObjects(kept);
  }

  // The modules that only move data (explicit code without floating-point arithmetic: the
  // packing functions and parts of a product) go together, a few into one module, appended to
  // `units` and `emitted` (to be emitted again, as one), and their own modules dropped: each module costs a fixed
  // share of the middle end and code generation (their set-up, the per-module passes) that such
  // small functions do not pay for, and each function's code is the same in one module or
  // several (the explicit-code pipeline and code generation work per function; these call
  // nothing of their own module). How many modules they make, and which go together, is the
  // grouping whose schedule on the threads beside the kernel's other modules ends first
  // (runtime/JitPlan.h): one module of all packings was the last to start on one thread while
  // the other had finished. The cap keeps a program of many statements from piling up its
  // packings in one module. Returns the units to compile.
  static constexpr std::size_t kMoverInstructions = 600;
  std::vector<std::size_t> mergeMovers(std::vector<Unit>& units, std::deque<Emitted>& emitted) {
    const std::size_t n = units.size();
    std::vector<std::size_t> keep, moving;
    std::vector<double> others;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < n; ++i) {
      const llvm::Module& m = *emitted[i].m;
      const bool mover = units[i].optimize && !fullO3 && units[i].parts.front() != 0 &&
                         explicitCode(m) && !computes(m) && !tilePart(m);
      if (!mover) {
        keep.push_back(i);
        others.push_back(emitted[i].cost);
        continue;
      }
      moving.push_back(i);
      sizes.push_back(m.getInstructionCount());
    }
    // Each group is emitted on the thread that compiles it (buildImage), so that the other
    // modules need not wait for its emission to start.
    for (const std::vector<std::size_t>& group :
         groupMovers(others, sizes, jitThreads(), kMoverInstructions)) {
      if (group.size() == 1) {
        keep.push_back(moving[group.front()]);
        continue;
      }
      Unit unit{{}, true, {}};
      std::vector<std::size_t> members;
      for (std::size_t g : group) {
        const std::size_t i = moving[g];
        unit.funcs.push_back(units[i].funcs.front());
        unit.parts.push_back(units[i].parts.front());
        members.push_back(sizes[g]);
        emitted[i].m.reset(); // emitted on a thread that has finished (the loop's join)
        emitted[i].ctx.reset();
      }
      units.push_back(std::move(unit));
      emitted.emplace_back().cost = expectedMoversMs(members);
      keep.push_back(units.size() - 1);
    }
    return keep;
  }

  static std::string unitName(const Unit& unit) {
    std::string names;
    for (std::size_t k = 0; k < unit.funcs.size(); ++k) {
      names += (names.empty() ? "" : " ") + unit.funcs[k].name;
      if (unit.parts[k] != kWhole) names += " part " + std::to_string(unit.parts[k]);
    }
    return names;
  }

  // A unit's LLVM IR, verified, into `e` (in place: the context keeps the address of
  // e.llvmErrors). Safe to run on several threads at once (a context each).
  void emitModule(const Unit& unit, const std::string& prefix, Emitted& e) {
    e.clock.resume();
    e.ctx = std::make_unique<llvm::LLVMContext>();
    // Optimization remarks and warnings (a hinted loop that was not vectorized) are not the
    // user's business; errors are kept and reported.
    e.ctx->setDiagnosticHandlerCallBack(
        [](const llvm::DiagnosticInfo* di, void* sink) {
          if (di->getSeverity() != llvm::DS_Error) return;
          llvm::raw_string_ostream os(*static_cast<std::string*>(sink));
          llvm::DiagnosticPrinterRawOStream printer(os);
          di->print(printer);
          os << "\n";
        },
        &e.llvmErrors);
    e.m = std::make_unique<llvm::Module>("einjit", *e.ctx);
    llvm::Module& m = *e.m;
    const llvm::TargetMachine& tm = targetMachine(unit.optimize ? llvm::CodeGenOptLevel::Aggressive
                                                                : llvm::CodeGenOptLevel::None);
    m.setDataLayout(tm.createDataLayout());
    m.setTargetTriple(tm.getTargetTriple().str());
    if (tm.getTargetFeatureString().contains("+avx512f"))
      m.addModuleFlag(llvm::Module::Warning, codegen::kAvx512Flag, 1);
    e.clock.lap("target machine");
    // The whole functions in one call (the unoptimized ones share what they declare), then
    // each part.
    std::vector<codegen::ir::Func> whole;
    for (std::size_t k = 0; k < unit.funcs.size(); ++k)
      if (unit.parts[k] == kWhole) whole.push_back(unit.funcs[k]);
    if (!whole.empty()) codegen::emitLLVM(whole, prefix, m);
    for (std::size_t k = 0; k < unit.funcs.size(); ++k)
      if (unit.parts[k] != kWhole) codegen::emitLLVMPart(unit.funcs[k], prefix, unit.parts[k], m);
    std::string verifyLog;
    llvm::raw_string_ostream vs(verifyLog);
    if (llvm::verifyModule(m, &vs))
      throw InternalError("generated LLVM IR is invalid: " + verifyLog);
    e.clock.lap("emit", instructionCount(m));
    // A module's compile time follows its instructions, at a rate of its kind's.
    const ModuleKind kind = !unit.optimize                  ? ModuleKind::unoptimized
                            : fullO3 || !explicitCode(m)    ? ModuleKind::o3
                            : computes(m) || tilePart(m)    ? ModuleKind::computes
                                                            : ModuleKind::moves;
    e.cost = expectedCompileMs(kind, m.getInstructionCount());
  }

  // One emitted module through the middle end (O3, or kExplicitPipeline for explicit code; none
  // unless the unit is optimized) and code generation to an object file. Safe to run on
  // several threads at once (a context and a target machine each).
  std::string compileModule(const Unit& unit, Emitted& e, const std::string& prefix,
                            std::string* irText) {
    const bool optimize = unit.optimize;
    StageClock& clock = e.clock;
    clock.resume();
    llvm::Module& m = *e.m;
    llvm::TargetMachine* tm = &targetMachine(optimize ? llvm::CodeGenOptLevel::Aggressive
                                                      : llvm::CodeGenOptLevel::None);
    const std::string names = unitName(unit);
    dumpModule(m, prefix + names);
    const bool explicitModule = optimize && optimizeModule(m, *tm, clock);
    dumpModule(m, prefix + names + ".opt");
    if (irText) {
      llvm::raw_string_ostream os(*irText);
      m.print(os, nullptr);
    }

    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    const bool moves = explicitModule && !computes(m) && !tilePart(m);
    const bool large = m.getInstructionCount() > kLsrInstructionLimit || tilePart(m);
    const bool withoutLsr = explicitModule && !lsrEverywhere && (moves || (large && !lsrWide));
    if (withoutLsr) clock.note("without LSR");
    if (moves && moverCodegen) {
      tm = &targetMachine(llvm::CodeGenOptLevel::Aggressive, true);
      clock.note("fast instruction selection");
    }
    CodegenPasses pm(withoutLsr);
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw InternalError("LLVM JIT: the target cannot emit object files");
    clock.lap("codegen setup");
    pm.run(m);
    clock.lap("codegen");
    if (!e.llvmErrors.empty()) throw InternalError("LLVM reported errors: " + e.llvmErrors);
    clock.report(names + ", " + std::to_string(buf.size()) + "-byte object" +
                 (optimize ? "" : ", unoptimized"));
    return std::string(buf.begin(), buf.end());
  }

  // The middle end: O3, or kExplicitPipeline for explicit code (then true).
  bool optimizeModule(llvm::Module& m, llvm::TargetMachine& tm, StageClock& clock) {
    llvm::LLVMContext& ctx = m.getContext();
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    // The standard instrumentations make the pipeline skip `optnone` functions (CodeGenLLVM
    // marks functions of a few iterations so).
    llvm::PassInstrumentationCallbacks pic;
    llvm::StandardInstrumentations si(ctx, false);
    si.registerCallbacks(pic, &mam);
    PassTimes passTimes;
    if (jitDebugPasses()) passTimes.registerCallbacks(pic);
    llvm::PassBuilder pb(&tm, pto, std::nullopt, &pic);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    const bool explicitModule = !fullO3 && explicitCode(m);
    llvm::ModulePassManager mpm;
    if (explicitModule) {
      if (auto err = pb.parsePassPipeline(mpm, explicitPipeline))
        throw InternalError("LLVM JIT: the explicit-code pipeline: " + errorText(std::move(err)));
    } else {
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    }
    clock.lap("pipeline setup");
    mpm.run(m, mam);
    clock.lap(explicitModule ? "explicit-code pipeline" : "O3", instructionCount(m));
    if (jitDebugPasses()) passTimes.report();
    return explicitModule;
  }

  // Loads an object into a JITDylib of its own and finds the functions.
  void load(CompiledCode& code, const std::vector<codegen::ir::Func>& funcs,
            const std::string& prefix, const std::string& image) {
    Timeline::Span span("JITDylib, add the objects");
    auto jdOr = jit->createJITDylib("einjit" + std::to_string(modules++));
    if (!jdOr) throw Error("LLVM JIT: creating a JITDylib: " + errorText(jdOr.takeError()));
    llvm::orc::JITDylib& jd = *jdOr;
    auto resource = std::make_shared<CompiledCode::Resource>();
    resource->session = &jit->getExecutionSession();
    resource->dylib = &jd; // removed again if anything below fails
    jd.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                              jit->getDataLayout().getGlobalPrefix()),
                          "process symbols"));
    const std::vector<std::string_view> objects = unpackObjects(image);
    for (std::string_view obj : objects)
      if (auto err = jit->addObjectFile(jd, llvm::MemoryBuffer::getMemBufferCopy(obj, prefix)))
        throw Error("LLVM JIT: loading compiled code: " + errorText(std::move(err)));
    span.end();
    // The first lookup links and loads every object of the JITDylib.
    Timeline::Span linking("link, load and look up");
    std::vector<KernelFn> fns;
    std::map<std::string, std::uint64_t> addrs;
    for (const auto& f : funcs) {
      auto addr = check(jit->lookup(jd, prefix + f.name), "finding " + f.name);
      fns.push_back(addr.toPtr<KernelFn>());
      addrs[prefix + f.name] = addr.getValue();
    }
    if (std::getenv("EINJIT_PERF_MAP")) {
      auto address = [&](const std::string& name) -> std::optional<std::uint64_t> {
        if (auto it = addrs.find(name); it != addrs.end()) return it->second;
        auto at = jit->lookup(jd, name);
        if (!at) {
          llvm::consumeError(at.takeError());
          return std::nullopt;
        }
        return at->getValue();
      };
      for (std::string_view obj : objects) writePerfMap(obj, address);
    }
    code.fns = std::move(fns);
    code.resource = std::move(resource);
  }

  std::shared_ptr<const CompiledCode> compile(const std::vector<codegen::ir::Func>& funcs,
                                              bool keepIR) {
    Timeline::Compile timeline("the JIT's compile");
    Timeline::Span keySpan("key (the functions printed)");
    const std::string key = keyOf(funcs);
    keySpan.end();
    std::vector<CodeCache::Value> dropped; // released after the lock
    auto lock = cache.lock();
    if (!keepIR)
      if (auto* hit = cache.hit(key)) return *hit;
    auto t0 = std::chrono::steady_clock::now();
    const std::string prefix = "ej" + hex(fnv1a(key)) + "_";
    auto code = std::make_shared<CompiledCode>();
    // explain --llvm: the optimized IR needs a build of its own; its object serves a miss.
    std::string built;
    if (keepIR) built = buildImage(funcs, prefix, &code->llvmIR);
    auto build = [&] {
      return built.empty() ? buildImage(funcs, prefix, nullptr) : std::exchange(built, "");
    };
    CodeCache::Origin origin;
    std::string obj = cache.readOrBuild(key, build, origin);
    if (auto* existing = cache.find(key)) { // explain --llvm of code that is already loaded
      code->fns = (*existing)->fns;
      code->resource = (*existing)->resource;
      code->origin = "memory cache";
      return code;
    }
    // Each module gets its own JITDylib: after an eviction or jitClearMemoryCache() the same
    // code may be loaded again while kernels still hold the old copy.
    cache.loadOrRebuild(key, std::move(obj), origin, build, [&](const std::string& o) {
      StageClock clock;
      load(*code, funcs, prefix, o);
      clock.lap("load");
      clock.report(std::to_string(funcs.size()) + " functions loaded");
      return code;
    });
    code->origin = origin == CodeCache::Origin::compiled ? "compiled" : "disk cache";
    code->compileMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cache.store(key, code, origin, dropped);
    return code;
  }
};

// Never destroyed: kernels held in static objects may release code during exit.
Engine& engine() {
  static Engine* e = new Engine;
  return *e;
}

} // namespace

bool jitAvailable() { return true; }

namespace {

// EINJIT_CPU_VECTOR_BYTES=16|32|64: schedule for vectors of that width instead of the host's,
// to run another CPU kind's schedules (the AVX-512 tiles on an AVX2 machine: LLVM splits the
// wider vectors, so the code is correct but not fast). 0 when unset.
int vectorBytesOverride() {
  static const int bytes = [] {
    const char* e = std::getenv("EINJIT_CPU_VECTOR_BYTES");
    if (!e || !*e) return 0;
    const std::string v(e);
    if (v != "16" && v != "32" && v != "64")
      throw Error("EINJIT_CPU_VECTOR_BYTES is '" + v + "': it must be 16, 32 or 64");
    return std::stoi(v);
  }();
  return bytes;
}

// EINJIT_CPU_CACHE_BYTES=L1,L2,L3: the data caches' sizes (bytes per core for L1 and L2) the
// schedules block for, instead of the host's, to make another CPU kind's plans (with
// EINJIT_JIT_CPU). Unset: nullopt.
const std::optional<std::array<std::int64_t, 3>>& cacheBytesOverride() {
  static const std::optional<std::array<std::int64_t, 3>> bytes =
      []() -> std::optional<std::array<std::int64_t, 3>> {
    const char* e = std::getenv("EINJIT_CPU_CACHE_BYTES");
    if (!e || !*e) return std::nullopt;
    std::array<std::int64_t, 3> r{};
    const std::string v(e);
    std::size_t at = 0, n = 0;
    for (; n < 3; ++n) {
      const std::size_t end = n < 2 ? v.find(',', at) : v.size();
      const std::string part = end == std::string::npos ? "" : v.substr(at, end - at);
      if (part.empty() || part.size() > 12 ||
          part.find_first_not_of("0123456789") != std::string::npos || std::stoll(part) < 4096)
        break;
      r[n] = std::stoll(part);
      at = end + 1;
    }
    if (n != 3)
      throw Error("EINJIT_CPU_CACHE_BYTES is '" + v +
                  "': it must be three sizes in bytes, L1,L2,L3, each at least 4096");
    return r;
  }();
  return bytes;
}

} // namespace

codegen::Target hostTarget() {
  codegen::Target t;
  t.vectorBytes = vectorBytesOverride() ? vectorBytesOverride() : engine().vectorBytes;
  t.gatherCost = engine().cpu.rfind("znver", 0) == 0 ? 13 : 4;
  t.halvedVectors = t.vectorBytes >= 64 && engine().cpu == "znver4";
  // The data caches, where the C library knows them (the defaults otherwise).
  for (auto [name, field] : {std::pair{_SC_LEVEL1_DCACHE_SIZE, &t.l1Bytes},
                             std::pair{_SC_LEVEL2_CACHE_SIZE, &t.l2Bytes},
                             std::pair{_SC_LEVEL3_CACHE_SIZE, &t.l3Bytes}}) {
    const long bytes = sysconf(name);
    if (bytes >= 4096) *field = bytes;
  }
  if (const std::optional<std::array<std::int64_t, 3>>& c = cacheBytesOverride()) {
    t.l1Bytes = (*c)[0];
    t.l2Bytes = (*c)[1];
    t.l3Bytes = (*c)[2];
  }
#if EINJIT_HAVE_TBB
  t.threads = tbb::info::default_concurrency();
#else
  t.threads = 1;
#endif
  return t;
}

std::string hostDescription() {
  Engine& e = engine();
  return e.triple + " " + e.cpu + ", " + std::to_string(hostTarget().vectorBytes) +
         (vectorBytesOverride() ? "-byte vectors (EINJIT_CPU_VECTOR_BYTES), " : "-byte vectors, ") +
         std::to_string(hostTarget().threads) + " thread(s)";
}

std::shared_ptr<const CompiledCode> jitCompile(const std::vector<codegen::ir::Func>& funcs,
                                               bool keepIR) {
  return engine().compile(funcs, keepIR);
}

JitStats jitStats() {
  const CodeCache::Counts c = engine().cache.counts();
  JitStats s;
  s.compiled = c.compiled;
  s.memoryHits = c.memoryHits;
  s.diskHits = c.diskHits;
  s.memoryEntries = c.entries;
  s.memoryEvicted = c.evicted;
  s.diskRejected = DiskCache::instance().stats(false).rejected;
  return s;
}

void jitClearMemoryCache() { engine().cache.clear(); }

void jitTrimMemoryCache() { engine().cache.trim(); }

std::string jitCacheDirectory() { return DiskCache::instance().directory(); }

void jitSetCacheDirectory(const std::string& dir) { DiskCache::instance().setDirectory(dir); }

} // namespace einjit::runtime
