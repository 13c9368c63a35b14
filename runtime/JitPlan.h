#pragma once
// How the CPU JIT spreads a kernel's modules over its threads (docs/ARCHITECTURE.md, "The CPU
// JIT"): what each module is expected to cost, and which of the modules that only move data
// (packing functions and parts) compile together. Plain arithmetic on counts, no LLVM, so
// that tests can state the plans by hand.
#include <cstddef>
#include <vector>

namespace einjit::runtime {

// What a module's middle end and code generation do per instruction.
enum class ModuleKind {
  o3,          // O3 (code that is not explicit)
  computes,    // the explicit-code pipeline, floating-point arithmetic (a product's loops)
  moves,       // the explicit-code pipeline, data movement only (packing)
  unoptimized, // no middle end, LLVM's fast code generation
};

// A module's expected compile time (middle end and code generation, milliseconds of one
// core), from its LLVM instructions as emitted: a fixed cost per module (the pipelines' and
// code generation's set-up, the per-module passes) and a cost per instruction of its kind
// (O3's passes cost more per instruction than the explicit-code pipeline's).
double expectedCompileMs(ModuleKind kind, std::size_t instructions);
// The same for several modules that only move data emitted as one (one fixed cost).
double expectedMoversMs(const std::vector<std::size_t>& instructions);

// The time `threads` threads need for the modules of these costs when each thread, when free,
// takes the costliest module not yet started (the JIT's order).
double listScheduleMs(std::vector<double> costs, unsigned threads);

// Groups the modules that only move data (`movers`, their instructions as emitted) into
// modules of several, beside the kernel's other modules (`others`, expected ms): the grouping
// whose list schedule on `threads` threads ends first, and of those the one with fewest
// modules (each costs its fixed share again). Every group holds at most `maxInstructions`
// unless one mover alone is larger; one group per mover keeps each in its own module. Each
// group lists indices into `movers`, in their order.
std::vector<std::vector<std::size_t>> groupMovers(const std::vector<double>& others,
                                                  const std::vector<std::size_t>& movers,
                                                  unsigned threads, std::size_t maxInstructions);

} // namespace einjit::runtime
