#include "runtime/JitPerfMap.h"

#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include <unistd.h>

namespace einjit::runtime {

// With EINJIT_PERF_MAP set, each loaded function's address, size and name go to
// /tmp/perf-PID.map, where `perf report` finds names for JIT code, and the object to
// /tmp/perf-PID-SYMBOL.o. `address` finds a global function's loaded address by its name (an
// object without an entry point, such as an outlined part, is placed by a function of its own).
void writePerfMap(std::string_view obj,
                  const std::function<std::optional<std::uint64_t>(const std::string&)>& address) {
  static std::mutex mu;
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(obj, "einjit"));
  if (!file) {
    llvm::consumeError(file.takeError());
    return;
  }
  if (!llvm::isa<llvm::object::ELFObjectFileBase>(file->get())) return;
  // Every function of the object (the entry points and what they call) at its loaded address:
  // the text section is loaded as one piece, so an entry point's address fixes the others.
  std::int64_t delta = 0;
  bool anchored = false;
  std::string anchor; // the entry point the object is named after
  std::vector<std::pair<std::string, llvm::object::SymbolRef>> fns;
  for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
    auto name = sym.getName();
    auto type = sym.getType();
    auto value = sym.getValue();
    if (!name || !type || !value) {
      if (!name) llvm::consumeError(name.takeError());
      if (!type) llvm::consumeError(type.takeError());
      if (!value) llvm::consumeError(value.takeError());
      continue;
    }
    if (*type != llvm::object::SymbolRef::ST_Function) continue;
    fns.emplace_back(name->str(), sym);
    if (anchored) continue;
    auto flags = sym.getFlags();
    if (!flags) {
      llvm::consumeError(flags.takeError());
      continue;
    }
    if (!(*flags & llvm::object::SymbolRef::SF_Global) || (*flags & llvm::object::SymbolRef::SF_Undefined))
      continue;
    if (const std::optional<std::uint64_t> at = address(name->str())) {
      delta = static_cast<std::int64_t>(*at) - static_cast<std::int64_t>(*value);
      anchored = true;
      anchor = name->str();
    }
  }
  if (!anchored) return;
  std::string text;
  for (const auto& [name, sym] : fns) {
    const std::uint64_t size = llvm::object::ELFSymbolRef(sym).getSize();
    const auto at = static_cast<std::uint64_t>(static_cast<std::int64_t>(llvm::cantFail(sym.getValue())) + delta);
    char line[64];
    std::snprintf(line, sizeof line, "%llx %llx ", static_cast<unsigned long long>(at),
                  static_cast<unsigned long long>(size));
    text += line + name + "\n";
  }
  const std::lock_guard<std::mutex> lock(mu);
  // The object itself beside it, for disassembly (objdump -d) of sampled addresses.
  const std::string objPath = "/tmp/perf-" + std::to_string(getpid()) + "-" + anchor + ".o";
  if (std::FILE* f = std::fopen(objPath.c_str(), "wb")) {
    std::fwrite(obj.data(), 1, obj.size(), f);
    std::fclose(f);
  }
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  if (std::FILE* f = std::fopen(path.c_str(), "a")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
}

} // namespace einjit::runtime
