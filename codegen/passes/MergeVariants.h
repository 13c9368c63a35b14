#pragma once
// Variants of one piece of code that differ only in integer constants (a strided gradient's
// residue phases on the CPU's packed path: the same loops, packings and micro-kernel, with other
// tap ranges, strides and offsets) merged into one piece that takes the variant as a variable:
// each constant that differs becomes an expression of that variable. The code to compile is
// then one variant's, not one per variant (the JIT's cost is in LLVM, per instruction).
#include "codegen/IR.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen::passes {

// A buffer of variant i as the merged code names it: `name`, its elements offset by `offset`
// (the variants' scratch buffers laid one after the other in one buffer).
struct MergedBuffer {
  std::string name;
  std::int64_t offset = 0;
};
using BufferRename =
    std::function<std::optional<MergedBuffer>(std::size_t variant, const std::string& buffer)>;

// The merged statement, in which variable `selector` (bound by the caller, over [0, size of
// variants)) picks the variant; nullopt where the variants differ in anything but integer
// constants (and in the constants an integer identity drops: x + 0, x * 1, x * 0), or in the
// extent of an unrolled or vectorized loop, or in a range check's extent. Buffers that
// `rename` maps are read and written through the merged name and offset; others keep theirs.
// With `bindings`, each constant that differs is a variable instead (named after the
// selector), whose value (an expression of the selector) the caller binds around the merged
// statement: bindings gets each name and value.
std::optional<ir::Stmt>
mergeVariants(const std::vector<ir::Stmt>& variants, const std::string& selector,
              const BufferRename& rename,
              std::vector<std::pair<std::string, ir::Expr>>* bindings = nullptr);

} // namespace einjit::codegen::passes
