#pragma once
// Semantic analysis, one statement at a time: resolves the names of a ProgramAst into tensors,
// index variables and scalar parameters, classifies subscripts, and builds the checked
// expression trees. Ranges are RangeInference's (run after each statement by `check`,
// Check.cpp); snapshots of tensors a statement reads while writing them are InPlace's.
//
// Name rules (documented in docs/LANGUAGE.md):
//  - a name used with brackets anywhere, or assigned by a statement, is a tensor;
//  - index variables of a statement are its left-hand indices, its 'where' indices, and the
//    names inside its subscripts that start with a lower-case letter or '_';
//  - any other name is a runtime scalar parameter (so "x[N-1-i]" reads N as a parameter).
//
// The statements and their names are defined in Sema.cpp, the expressions, subscripts and
// range bounds in SemaExpr.cpp.
#include "dsl/Program.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace einjit::dsl {

class Sema {
public:
  explicit Sema(const ProgramAst& ast);

  // Checks statement k (statements in order) and appends it to program().
  void statement(int k);
  // The program so far (RangeInference completes each statement's ranges in place).
  Program& program() { return p_; }
  // The checks that need every statement (size() of tensors ranked later), the outputs; the
  // checked program.
  Program finish();

private:
  // An affine form under construction: sum(coef[v] * v) + constant, plus at most one gather.
  struct AffineForm {
    std::vector<std::int64_t> coef;
    Sym constant = symConst(0);
    CExprPtr gather;
    bool hasVars() const;
  };

  const Source& src_;
  Program p_;
  std::set<std::string> tensorNames_;
  std::vector<std::set<int>> readsOf_; // per statement: tensors it reads
  // size(t, d) seen before t's rank was known: checked once every statement is analyzed.
  std::vector<std::tuple<int, int, SourceRange>> pendingSizeChecks_;
  // Current statement.
  int k_ = -1;
  Statement* st_ = nullptr;
  std::map<std::string, int> vars_;

  // Names (Sema.cpp).
  void collectTensorNames();
  bool isTensorName(const std::string& n) const;
  int tensorId(const std::string& name, SourceRange use, int rank, bool asArgument);
  int paramId(const std::string& name, SourceRange use, bool inIndex);

  // Statements (Sema.cpp).
  void collectVarNames(const Expr& e, bool inSubscript, std::vector<std::string>& order,
                       std::set<std::string>& names);
  void orderVars(const Expr& e, const std::set<std::string>& names,
                 std::vector<std::string>& order);
  void boundNames(const Expr& e, const std::set<std::string>& names, std::set<std::string>& out);
  bool readsIndex(const Expr& e);
  std::vector<std::string> orderByRangeDependencies(const Stmt& s,
                                                    const std::vector<std::string>& order,
                                                    const std::set<std::string>& names,
                                                    const std::vector<std::string>& lhsNames);
  void firstUse(int var, SourceRange r);
  void output(const Stmt& s);
  CExprPtr outputAccess(const Stmt& s);
  void checkWritesOnce(const Stmt& s);
  void findOutputs();

  // Value expressions (SemaExpr.cpp).
  CExprPtr make(CExpr e);
  int readTensor(const Expr& e, int rank, bool asIndex);
  CExprPtr read(const Expr& e, bool asIndex);
  CExprPtr value(const Expr& e);
  std::pair<int, int> sizeArgs(const Expr& e);
  CExprPtr sizeValue(const Expr& e);

  // Subscripts and range bounds (SemaExpr.cpp).
  Subscript subscript(const Expr& e);
  [[noreturn]] void notAffine(const Expr& e, const std::string& why);
  AffineForm affine(const Expr& e, bool gatherAllowed);
  IndexBound bound(const Expr& e);
  Sym constant(const Expr& e, const char* what);
};

} // namespace einjit::dsl
