#pragma once
// Parser: tokens -> ProgramAst, by recursive descent with precedence climbing for
// expressions. Grammar (DESIGN.md, "The language"):
//
//   program := stmt { (';' | newline) stmt }
//   stmt    := [ '(' ('+'|'*'|'max'|'min') ')' ] lhs (':=' | '=' | '+=') expr
//              [ 'where' Name 'in' expr ':' expr { ',' Name 'in' expr ':' expr } ]
//   lhs     := Name [ '[' expr { ',' expr } ']' ]
//
// Newlines inside brackets and parentheses, after a binary operator, and before 'where' do
// not end a statement. An integer literal written directly before a name ("2i") multiplies
// it. Syntax errors throw einjit::Error with a caret.
#include "dsl/Ast.h"

namespace einjit::dsl {

ProgramAst parse(SourcePtr source);
ProgramAst parse(const std::string& text);

} // namespace einjit::dsl
