#pragma once
// The builder behind differentiate() (internal to grad/). One object per call: it walks the
// forward statements last to first and collects the gradient statements as syntax.
//
// Its steps are defined in the file of their part:
//   Differentiate.cpp   the reverse sweep: which tensors carry gradient, sites per statement,
//                       the final program (recomputed forward statements, then the gradient)
//   ReductionRules.cpp  (max)/(min)/(*) rewritten as (+) with helper statements (G1)
//   SitePhases.cpp      a site in gather form: residue phases and clamp parts, solved
//   GatherEmission.cpp  one solved phase as a statement; checked expressions as syntax
//   WrapReads.cpp       wrap() reads over one period re-expressed over the wrapped index
//   Fallbacks.cpp       zero fills, the masked gather and the scatter (G8)
//   Versions.cpp        tensors written by several statements: a gradient per version, copies
//                       of the earlier versions that partial derivatives read
#include "dsl/Program.h"
#include "grad/Differentiate.h"
#include "grad/IndexSolver.h"
#include "grad/Syntax.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace einjit::grad {

class GradientBuilder {
public:
  GradientBuilder(const dsl::Program& p, const std::vector<std::string>& wrt, bool scatterOnly);
  Gradient run();

private:
  const dsl::Program& p_;
  const dsl::Source& src_;
  bool scatterOnly_;
  std::set<std::string> used_;
  std::vector<int> wrtIds_;
  std::vector<bool> needs_;
  std::vector<std::string> gradName_;
  std::set<int> defined_; // tensors whose gradient statement exists (':=' emitted)
  // Tensors whose current gradient is an output gradient the caller passes in (not to be
  // written: ownGradient copies it first).
  std::set<int> passedIn_;
  // The forward statement being differentiated, and the name of its output's gradient as it
  // was when the sweep reached it (the gradient of the version it made).
  std::size_t cur_ = static_cast<std::size_t>(-1);
  std::string dyName_;
  // Copies of earlier versions of a tensor that partial derivatives read: `name` holds
  // `tensor` as statement `after` left it (assemble() puts the copy right after it).
  struct VersionCopy {
    int tensor;
    int after;
    std::string name;
  };
  std::vector<VersionCopy> copies_;
  std::vector<dsl::Stmt> stmts_;
  // Indices in stmts_ of the helper statements of (max)/(min)/(*) (first_y, max_y, value_y,
  // zeros_y, ...): they read forward values only, so assemble() puts them before the gradient
  // statements (ReductionRules.cpp).
  std::vector<std::size_t> helpers_;
  std::vector<std::string> extraTensors_; // tensors the gradient program adds (first_y, ...)
  std::vector<dsl::Sym> symValues_;       // Param nodes with param < 0 stand for these
  // resolve()'s answer per size(tensor, dim) atom (null: the atom stays).
  mutable std::map<std::pair<std::string, int>, dsl::Sym> resolved_;
  Gradient g_;

  // --- the reverse sweep (Differentiate.cpp) ---
  std::string fresh(const std::string& base);
  void chooseWrt(const std::vector<std::string>& wrt);
  bool readsNeeding(const dsl::Statement& st) const;
  std::string gradOf(int tensor);
  bool writtenBefore(int t, std::size_t k) const;
  bool holdsItsValue(const dsl::Statement& st) const;
  void statement(std::size_t k);
  int addTensor(const std::string& name);
  const std::string& tensorName(int id) const;
  bool needsGrad(int id) const;
  void contribution(const dsl::Statement& st, const dsl::CExpr& site, const dsl::CExprPtr& partial);
  dsl::Sym extentOf(int tensor, int dim);
  dsl::Sym resolve(const dsl::Sym& s) const;
  std::function<dsl::Sym(const dsl::Sym&)> resolver() const;
  void assemble();

  // --- versions of tensors written several times (Versions.cpp) ---
  void ownGradient(int x);
  bool coversWhole(const dsl::Statement& st) const;
  std::string readName(int tensor);
  dsl::Stmt versionCopy(const VersionCopy& c);
  void dropNeedlessCopies(const std::vector<bool>& keep);

  // --- (max), (min), (*) (ReductionRules.cpp) ---
  std::vector<dsl::CExprPtr> iterationGroups(const dsl::Statement& st);
  int helperStatement(const dsl::Statement& st, const std::string& base, dsl::Reduce reduce,
                      const dsl::CExprPtr& rhs);
  dsl::CExprPtr sameElementOf(const dsl::Statement& st, int tensor);
  dsl::CExprPtr selection(const dsl::Statement& st);
  dsl::CExprPtr storedValues(const dsl::Statement& st);
  dsl::CExprPtr product(const dsl::Statement& st);
  dsl::CExprPtr symValue(const dsl::Sym& s);

  // --- residue phases and clamp parts (SitePhases.cpp) ---
  void gatherForm(const dsl::Statement& st, const dsl::CExpr& site, const dsl::CExprPtr& partial);
  bool solvePhases(const dsl::Statement& st, const dsl::CExpr& site,
                   const std::vector<std::vector<dsl::Sym>>& extents,
                   const std::vector<std::pair<dsl::Sym, dsl::Sym>>& ranges,
                   std::vector<Split> split, std::vector<SiteSolution>& out, std::string& why,
                   int depth);

  // --- emission (GatherEmission.cpp) ---
  void emitSolution(const dsl::Statement& st, const dsl::CExpr& site, const dsl::CExprPtr& partial,
                    const SiteSolution& sol);
  dsl::ExprPtr summand(dsl::ExprPtr dy, const dsl::CExprPtr& partial, const dsl::Statement& st,
                       const std::vector<Aff>& varAff, syntax::Emit& emit);
  dsl::ExprPtr accessOfOutput(const dsl::Statement& st, const std::string& name,
                              const std::vector<Aff>& varAff, syntax::Emit& emit);
  std::pair<syntax::Emit, std::vector<Aff>> forwardFrame(const dsl::Statement& st) const;
  void forwardRanges(const dsl::Statement& st, dsl::Stmt& out);
  std::pair<dsl::ExprPtr, dsl::ExprPtr> rangeOf(const dsl::Statement& st, std::size_t v);
  dsl::ExprPtr toExpr(const dsl::CExprPtr& e, const dsl::Statement& st,
                      const std::vector<Aff>& varAff, syntax::Emit& emit);
  dsl::ExprPtr subscriptExpr(const dsl::Subscript& s, const dsl::Statement& st,
                             const std::vector<Aff>& varAff, syntax::Emit& emit);

  // --- wrap() reads (WrapReads.cpp) ---
  bool sameExtent(const dsl::Sym& a, const dsl::Sym& b) const;
  bool unwrap(dsl::Statement& st, dsl::CExpr& site, dsl::CExprPtr& partial, std::string& why);

  // --- fallbacks and fills (Fallbacks.cpp) ---
  void zeroFill(int x);
  void maskedGather(const dsl::Statement& st, const dsl::CExpr& site, const dsl::CExprPtr& partial,
                    const std::string& why);
  void scatter(const dsl::Statement& st, const dsl::CExpr& site, const dsl::CExprPtr& partial,
               const std::string& why);
};

} // namespace einjit::grad
