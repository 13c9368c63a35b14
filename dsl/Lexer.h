#pragma once
// Lexer: program text -> tokens. Token kinds come from the X-macro list in Tokens.def.
// Newlines are tokens (they separate statements); the parser decides where they matter.
// '#' starts a comment that runs to the end of the line.
#include "dsl/Source.h"

#include <string_view>
#include <vector>

namespace einjit::dsl {

enum class Tok : unsigned char {
#define TOKEN(kind, spelling) kind,
#include "dsl/Tokens.def"
#undef TOKEN
};

std::string_view tokenSpelling(Tok t);

struct Token {
  Tok kind;
  SourceRange range;
  std::string_view text; // points into the Source's text
};

// Throws einjit::Error (with a caret) on a character that starts no token.
std::vector<Token> lex(const Source& src);

} // namespace einjit::dsl
