#pragma once
// Printer: AST -> canonical einjit text. The output reparses to the same AST (tested on every
// statement of the test tables): minimal parentheses by precedence, "2h" for an integer
// literal times a name, numbers in their shortest round-tripping form.
#include "dsl/Ast.h"

#include <string>

namespace einjit::dsl {

std::string printExpr(const Expr& e);
std::string printStmt(const Stmt& s);
std::string printProgram(const ProgramAst& p); // one statement per line, no trailing newline
std::string formatNumber(double v, bool isInteger);

} // namespace einjit::dsl
