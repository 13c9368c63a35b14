// The front end as one straight line: parse, then per statement Sema and RangeInference, then
// InPlace's snapshots (the rewritten text checked again the same way). Every step reports a
// user's mistake as an einjit::Error with a caret.
#include "dsl/InPlace.h"
#include "dsl/Parser.h"
#include "dsl/RangeInference.h"
#include "dsl/Sema.h"

namespace einjit::dsl {

namespace {

Program analyze(const ProgramAst& ast) {
  Sema sema(ast);
  for (std::size_t k = 0; k < ast.stmts.size(); ++k) {
    try {
      sema.statement(static_cast<int>(k));
      inferRanges(sema.program(), static_cast<int>(k));
    } catch (const SymOverflow&) {
      fail(*ast.source, ast.stmts[k].range,
           "integer overflow: a coefficient, constant or range bound of this statement does "
           "not fit in 64 bits");
    }
  }
  return sema.finish();
}

} // namespace

Program check(const ProgramAst& ast) {
  Program p = analyze(ast);
  std::optional<SnapshotPlan> snapshots = planSnapshots(p);
  if (!snapshots) return p;
  Program q = analyze(snapshots->ast);
  markSnapshots(q, *snapshots);
  return q;
}

Program check(const std::string& text, const std::string& name) {
  return check(parse(std::make_shared<Source>(text, name)));
}

} // namespace einjit::dsl
