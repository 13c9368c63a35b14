// Residue phases of a strided gradient on the CPU's packed GEMM path, emitted as their plan says
// (schedule/CpuPhases.h decides them: each phase a statement over (q, m) that the packed path
// takes, writing the output elements of its residue): each phase's packing functions, then one
// product running each phase's task in turn, the phases' code merged into one copy where it
// differs only in constants.
#include "codegen/lower/Lowerer.h"
#include "codegen/passes/MergeVariants.h"

#include <map>

namespace einjit::codegen::lowering {

void Lowerer::emitGemmPhases(const std::vector<CpuGemmPhase>& phases, const std::string& base) {
  // The phases' packing functions first, then one product running each phase's task in turn.
  const std::size_t funcs0 = out_.funcs.size(), scratch0 = out_.scratch.size();
  std::vector<GemmTasks> parts(phases.size());
  for (std::size_t i = 0; i < phases.size(); ++i) {
    StatementSchedule sched;
    sched.gemm = phases[i].gemm;
    emitGemm(phases[i].st, phases[i].bs, sched, rangesOf(phases[i].bs),
             base + "_phase" + std::to_string(i), &parts[i]);
  }
  const bool merged = mergeGemmPhases(base, parts, funcs0, scratch0);
  if (!merged) emitGemmProduct(base + "_phases", parts);
  if (merged) out_.notes.back() += "; one copy of the phases' code";
}

// The phases are the same loops with other constants (tap ranges, strides, residue offsets):
// where their code differs in nothing else (passes::mergeVariants), one copy of it runs each
// phase in turn, the phase a variable, so that the JIT compiles one phase's code instead of
// one per phase (its cost is LLVM's, per instruction and per module). Each merged packing
// function runs every phase's share of its parallel loop's iteration; the product runs each
// task's phases in turn, as the separate parts did. The phases' scratch buffers become one
// each, the phases' parts laid one after the other. False (nothing changed) where the phases'
// code or task structures differ.
bool Lowerer::mergeGemmPhases(const std::string& base, std::vector<GemmTasks>& parts,
                              std::size_t funcs0, std::size_t scratch0) {
  const std::size_t n = parts.size();
  const std::size_t nf = out_.funcs.size() - funcs0, ns = out_.scratch.size() - scratch0;
  if (n < 2 || nf % n != 0 || ns % n != 0) return false;
  const std::size_t perFuncs = nf / n, perScratch = ns / n;
  for (const GemmTasks& p : parts)
    if (p.tasks != parts[0].tasks || p.groups != parts[0].groups || p.parallel != parts[0].parallel)
      return false;
  // Phase i's buffer `prefix_i + suffix` is the merged `base_phases + suffix` at an offset.
  const std::string merged = base + "_phases";
  auto prefix = [&](std::size_t i) { return base + "_phase" + std::to_string(i); };
  std::map<std::string, passes::MergedBuffer> names;
  std::vector<ScratchBuffer> scratch;
  for (std::size_t j = 0; j < perScratch; ++j) {
    const ScratchBuffer& first = out_.scratch[scratch0 + j];
    if (first.name.rfind(prefix(0), 0) != 0) return false;
    const std::string suffix = first.name.substr(prefix(0).size());
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ScratchBuffer& b = out_.scratch[scratch0 + i * perScratch + j];
      if (b.name != prefix(i) + suffix || b.elem != first.elem) return false;
      names[b.name] = {merged + suffix, offset};
      offset += b.elements;
    }
    scratch.push_back({merged + suffix, first.elem, offset});
  }
  const passes::BufferRename rename = [&](std::size_t, const std::string& b) {
    auto it = names.find(b);
    return it == names.end() ? std::nullopt : std::optional<passes::MergedBuffer>(it->second);
  };
  const std::string sel = "gemm.phase";
  // The loop over the phases around body, binding the phase's constants (`lets`) inside it.
  std::vector<std::pair<std::string, Expr>> lets;
  auto phases = [&](Stmt body) {
    for (std::size_t k = lets.size(); k-- > 0;)
      body = ir::forLoop(lets[k].first, lets[k].second, ir::add(lets[k].second, ir::intImm(1)),
                         ForKind::Serial, body);
    return ir::forLoop(sel, ir::intImm(0), ir::intImm(static_cast<std::int64_t>(n)),
                       ForKind::Rolled, std::move(body));
  };
  // The packing functions: function j of each phase, its parallel loop kept outermost.
  std::vector<ir::Func> funcs;
  for (std::size_t j = 0; j < perFuncs; ++j) {
    const ir::Func& first = out_.funcs[funcs0 + j];
    if (first.name.rfind(prefix(0), 0) != 0) return false;
    std::vector<Stmt> bodies;
    ir::Func f = first;
    for (std::size_t i = 0; i < n; ++i) {
      const ir::Func& g = out_.funcs[funcs0 + i * perFuncs + j];
      if (g.name != prefix(i) + first.name.substr(prefix(0).size()) ||
          g.parallel != first.parallel || g.parallelLo != first.parallelLo ||
          g.parallelHi != first.parallelHi || g.explicitCode != first.explicitCode)
        return false;
      f.grain = std::min(f.grain, g.grain);
      bodies.push_back(g.body);
    }
    std::optional<Stmt> body = passes::mergeVariants(bodies, sel, rename, &lets);
    if (!body) return false;
    if ((*body)->kind == ir::NodeKind::For) {
      const auto& loop = static_cast<const ir::For&>(**body);
      f.body = ir::forLoop(loop.var, loop.lo, loop.hi, loop.forKind, phases(loop.body), loop.width);
    } else {
      f.body = phases(*body);
    }
    f.name = merged + first.name.substr(prefix(0).size());
    funcs.push_back(std::move(f));
  }
  std::vector<Stmt> bodies;
  double flops = 0;
  for (const GemmTasks& p : parts) {
    bodies.push_back(p.body);
    flops += p.flops;
  }
  std::optional<Stmt> body = passes::mergeVariants(bodies, sel, rename, &lets);
  if (!body) return false;
  out_.funcs.resize(funcs0);
  for (ir::Func& f : funcs) out_.funcs.push_back(std::move(f));
  out_.scratch.resize(scratch0);
  for (ScratchBuffer& b : scratch) out_.scratch.push_back(std::move(b));
  // The phase's product outlined (a module of its own: below the size where the JIT's code
  // generation drops loop strength reduction, which its micro-kernel's loop needs).
  Stmt product =
      ir::forLoop("gemm.part", ir::var("gemm.task"), ir::add(ir::var("gemm.task"), ir::intImm(1)),
                  ForKind::Outlined, *body);
  emitGemmProduct(merged, {GemmTasks{phases(product), parts[0].tasks, parts[0].groups, flops,
                                     parts[0].parallel}});
  return true;
}

} // namespace einjit::codegen::lowering
