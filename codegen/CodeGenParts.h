#pragma once
// The outlined loops of a function that CodeGenLLVM emits as parts of their own, each alone in
// a module (CodeGenLLVM.h, separateParts), and what the emitter needs to know of the place
// where each sits.
#include "codegen/IR.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace einjit::codegen {

// Where an outlined loop that compiles apart sits: the local buffers and loop variables in
// scope there (its function's arguments are the ones it uses).
struct PartSite {
  const ir::For* loop = nullptr;
  std::map<std::string, ir::Type> locals;
  std::set<std::string> vars;
};

// In the order the emitter reaches them: the outlined loops (ir::ForKind::Outlined) emitted
// exactly once (not inside an unrolled or vectorized loop, which may emit its body several
// times, and not a subtree shared by two places) that do enough work to pay for a module of
// their own.
std::vector<PartSite> findParts(const ir::Stmt& body);

} // namespace einjit::codegen
