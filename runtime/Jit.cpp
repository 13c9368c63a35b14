#include "runtime/Jit.h"

#include "codegen/CodeGenLLVM.h"
#include "einjit/Error.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

#if EINJIT_HAVE_TBB
#include <tbb/info.h>
#endif

namespace einjit::runtime {

namespace fs = std::filesystem;

// Bump when the generated code changes meaning for the same IR (it is part of every key).
constexpr const char* kCodegenVersion = "einjit-cpu-1";

struct CompiledCode::Resource {
  llvm::orc::ResourceTrackerSP tracker;
  ~Resource() {
    if (tracker) llvm::consumeError(tracker->remove());
  }
};

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
T check(llvm::Expected<T> v, const std::string& what) {
  if (!v) throw Error("LLVM JIT: " + what + ": " + errorText(v.takeError()));
  return std::move(*v);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct Engine {
  std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::string cpu, features, triple;
  int vectorBytes = 16;
  std::map<std::string, std::shared_ptr<const CompiledCode>> memory;
  JitStats stats;
  std::string cacheDir;
  std::atomic<std::uint64_t> tmpCounter{0};
  std::uint64_t modules = 0;

  Engine() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto b = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
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
    b.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    features = b.getFeatures().getString();
    triple = b.getTargetTriple().str();
    jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(b);
    jit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(b).create(), "creating LLJIT");
    cacheDir = chooseCacheDir();
  }

  static std::string chooseCacheDir() {
    if (const char* d = std::getenv("EINJIT_CACHE_DIR")) {
      std::string s = d;
      if (s == "off" || s.empty()) return "";
      return s;
    }
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/einjit";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/einjit";
    return "";
  }

  std::string keyOf(const std::vector<codegen::ir::Func>& funcs) const {
    std::string key = std::string(kCodegenVersion) + " llvm " + LLVM_VERSION_STRING + " " + triple +
                      " " + cpu + " " + features + "\n";
    for (const auto& f : funcs) key += codegen::ir::print(f);
    return key;
  }

  // --- disk cache ------------------------------------------------------------------------------
  static constexpr char kMagic[8] = {'E', 'I', 'N', 'J', 'I', 'T', 'O', '1'};

  std::string pathOf(const std::string& key) const {
    return cacheDir + "/" + hex(fnv1a(key)) + ".o";
  }

  // The object stored for key, or empty when absent or invalid.
  std::string readDisk(const std::string& key) {
    if (cacheDir.empty()) return "";
    std::ifstream in(pathOf(key), std::ios::binary);
    if (!in) return "";
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto u64 = [&](std::size_t at, std::uint64_t* v) {
      if (at + 8 > data.size()) return false;
      std::memcpy(v, data.data() + at, 8);
      return true;
    };
    std::uint64_t keyLen = 0, objLen = 0, sum = 0;
    bool ok = data.size() >= 8 && std::memcmp(data.data(), kMagic, 8) == 0 && u64(8, &keyLen) &&
              keyLen <= data.size() && 16 + keyLen <= data.size() &&
              data.compare(16, keyLen, key) == 0 && u64(16 + keyLen, &objLen) &&
              u64(24 + keyLen, &sum) && 32 + keyLen + objLen == data.size();
    std::string obj;
    if (ok) {
      obj = data.substr(32 + keyLen);
      ok = fnv1a(obj) == sum;
    }
    if (!ok) {
      ++stats.diskRejected;
      return "";
    }
    return obj;
  }

  void writeDisk(const std::string& key, const std::string& obj) {
    if (cacheDir.empty()) return;
    std::error_code ec;
    fs::create_directories(cacheDir, ec);
    if (ec) return; // the cache is an optimisation: an unwritable directory only costs time
    std::string path = pathOf(key);
    std::string tmp =
        path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(tmpCounter.fetch_add(1));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) return;
      std::uint64_t keyLen = key.size(), objLen = obj.size(), sum = fnv1a(obj);
      out.write(kMagic, 8);
      out.write(reinterpret_cast<const char*>(&keyLen), 8);
      out.write(key.data(), static_cast<std::streamsize>(key.size()));
      out.write(reinterpret_cast<const char*>(&objLen), 8);
      out.write(reinterpret_cast<const char*>(&sum), 8);
      out.write(obj.data(), static_cast<std::streamsize>(obj.size()));
      if (!out) {
        fs::remove(tmp, ec);
        return;
      }
    }
    fs::rename(tmp, path, ec);
    if (ec) fs::remove(tmp, ec);
  }

  // --- compilation -----------------------------------------------------------------------------

  std::string buildObject(const std::vector<codegen::ir::Func>& funcs, const std::string& prefix,
                          std::string* irText) {
    llvm::LLVMContext ctx;
    // Optimization remarks and warnings (a hinted loop that was not vectorized) are not the
    // user's business; errors are kept and reported.
    std::string llvmErrors;
    ctx.setDiagnosticHandlerCallBack(
        [](const llvm::DiagnosticInfo* di, void* sink) {
          if (di->getSeverity() != llvm::DS_Error) return;
          llvm::raw_string_ostream os(*static_cast<std::string*>(sink));
          llvm::DiagnosticPrinterRawOStream printer(os);
          di->print(printer);
          os << "\n";
        },
        &llvmErrors);
    llvm::Module m("einjit", ctx);
    std::unique_ptr<llvm::TargetMachine> tm = check(jtmb->createTargetMachine(), "target machine");
    m.setDataLayout(tm->createDataLayout());
    m.setTargetTriple(tm->getTargetTriple().str());
    codegen::emitLLVM(funcs, prefix, m);
    std::string verifyLog;
    llvm::raw_string_ostream vs(verifyLog);
    if (llvm::verifyModule(m, &vs))
      throw InternalError("generated LLVM IR is invalid: " + verifyLog);

    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(m, mam);
    if (irText) {
      llvm::raw_string_ostream os(*irText);
      m.print(os, nullptr);
    }

    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw InternalError("LLVM JIT: the target cannot emit object files");
    pm.run(m);
    if (!llvmErrors.empty()) throw InternalError("LLVM reported errors: " + llvmErrors);
    return std::string(buf.begin(), buf.end());
  }

  std::shared_ptr<const CompiledCode> compile(const std::vector<codegen::ir::Func>& funcs,
                                              bool keepIR) {
    const std::string key = keyOf(funcs);
    std::lock_guard<std::mutex> lock(mu);
    if (!keepIR) {
      auto it = memory.find(key);
      if (it != memory.end()) {
        ++stats.memoryHits;
        return it->second;
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    const std::string prefix = "ej" + hex(fnv1a(key)) + "_";
    auto code = std::make_shared<CompiledCode>();
    std::string obj = readDisk(key);
    code->origin = "disk cache";
    if (obj.empty() || keepIR) {
      std::string built = buildObject(funcs, prefix, keepIR ? &code->llvmIR : nullptr);
      if (obj.empty()) {
        obj = std::move(built);
        code->origin = "compiled";
        writeDisk(key, obj);
      }
    }
    auto existing = memory.find(key);
    if (existing != memory.end()) { // explain --llvm of code that is already loaded
      code->fns = existing->second->fns;
      code->resource = existing->second->resource;
      code->origin = "memory cache";
      return code;
    }
    // Each module gets its own JITDylib: after jitClearMemoryCache() the same code may be
    // loaded again while kernels still hold the old copy.
    auto jdOr = jit->createJITDylib("einjit" + std::to_string(modules++));
    if (!jdOr) throw Error("LLVM JIT: creating a JITDylib: " + errorText(jdOr.takeError()));
    llvm::orc::JITDylib& jd = *jdOr;
    jd.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                              jit->getDataLayout().getGlobalPrefix()),
                          "process symbols"));
    code->resource = std::make_shared<CompiledCode::Resource>();
    code->resource->tracker = jd.getDefaultResourceTracker();
    if (auto err = jit->addObjectFile(code->resource->tracker,
                                      llvm::MemoryBuffer::getMemBufferCopy(obj, prefix)))
      throw Error("LLVM JIT: loading compiled code: " + errorText(std::move(err)));
    for (const auto& f : funcs) {
      auto addr = check(jit->lookup(jd, prefix + f.name), "finding " + f.name);
      code->fns.push_back(addr.toPtr<KernelFn>());
    }
    code->compileMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (code->origin == "compiled")
      ++stats.compiled;
    else
      ++stats.diskHits;
    memory[key] = code;
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

codegen::Target hostTarget() {
  codegen::Target t;
  t.vectorBytes = engine().vectorBytes;
#if EINJIT_HAVE_TBB
  t.threads = tbb::info::default_concurrency();
#else
  t.threads = 1;
#endif
  return t;
}

std::string hostDescription() {
  Engine& e = engine();
  return e.triple + " " + e.cpu + ", " + std::to_string(e.vectorBytes) + "-byte vectors, " +
         std::to_string(hostTarget().threads) + " thread(s)";
}

std::shared_ptr<const CompiledCode> jitCompile(const std::vector<codegen::ir::Func>& funcs,
                                               bool keepIR) {
  return engine().compile(funcs, keepIR);
}

JitStats jitStats() {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.stats;
}

void jitClearMemoryCache() {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  e.memory.clear();
}

std::string jitCacheDirectory() {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.cacheDir;
}

void jitSetCacheDirectory(const std::string& dir) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lock(e.mu);
  e.cacheDir = dir;
}

} // namespace einjit::runtime
