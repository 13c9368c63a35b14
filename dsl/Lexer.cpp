#include "dsl/Lexer.h"

#include <cctype>

namespace einjit::dsl {

std::string_view tokenSpelling(Tok t) {
  switch (t) {
#define TOKEN(kind, spelling)                                                                      \
  case Tok::kind:                                                                                  \
    return spelling;
#include "dsl/Tokens.def"
#undef TOKEN
  }
  return "?";
}

namespace {

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

} // namespace

std::vector<Token> lex(const Source& src) {
  const std::string& s = src.text();
  std::vector<Token> out;
  std::size_t i = 0;
  auto push = [&](Tok k, std::size_t b, std::size_t e) {
    out.push_back({k,
                   {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e)},
                   std::string_view(s).substr(b, e - b)});
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      push(Tok::Newline, i, i + 1);
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    std::size_t b = i;
    if (isIdentStart(c)) {
      while (i < s.size() && isIdentChar(s[i])) ++i;
      std::string_view w = std::string_view(s).substr(b, i - b);
      push(w == "where" ? Tok::KwWhere : w == "in" ? Tok::KwIn : Tok::Ident, b, i);
      continue;
    }
    if (isDigit(c) || (c == '.' && i + 1 < s.size() && isDigit(s[i + 1]))) {
      bool isFloat = false;
      while (i < s.size() && isDigit(s[i])) ++i;
      if (i < s.size() && s[i] == '.') {
        isFloat = true;
        ++i;
        while (i < s.size() && isDigit(s[i])) ++i;
      }
      // An exponent only when digits follow ("2e" stays 2 times the index e).
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && isDigit(s[j])) {
          isFloat = true;
          i = j;
          while (i < s.size() && isDigit(s[i])) ++i;
        }
      }
      push(isFloat ? Tok::Float : Tok::Int, b, i);
      continue;
    }
    auto two = [&](char a, char z) { return c == a && i + 1 < s.size() && s[i + 1] == z; };
    Tok k;
    std::size_t len = 2;
    if (two(':', '='))
      k = Tok::Define;
    else if (two('+', '='))
      k = Tok::PlusAssign;
    else if (two('<', '='))
      k = Tok::Le;
    else if (two('>', '='))
      k = Tok::Ge;
    else if (two('=', '='))
      k = Tok::EqEq;
    else if (two('!', '='))
      k = Tok::NotEq;
    else if (two('&', '&'))
      k = Tok::AndAnd;
    else if (two('|', '|'))
      k = Tok::OrOr;
    else {
      len = 1;
      switch (c) {
      case '[': k = Tok::LBracket; break;
      case ']': k = Tok::RBracket; break;
      case '(': k = Tok::LParen; break;
      case ')': k = Tok::RParen; break;
      case ',': k = Tok::Comma; break;
      case ';': k = Tok::Semi; break;
      case ':': k = Tok::Colon; break;
      case '?': k = Tok::Question; break;
      case '=': k = Tok::Assign; break;
      case '+': k = Tok::Plus; break;
      case '-': k = Tok::Minus; break;
      case '*': k = Tok::Star; break;
      case '/': k = Tok::Slash; break;
      case '%': k = Tok::Percent; break;
      case '^': k = Tok::Caret; break;
      case '<': k = Tok::Lt; break;
      case '>': k = Tok::Gt; break;
      case '!': k = Tok::Bang; break;
      default: {
        std::string shown;
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
          static const char* hex = "0123456789abcdef";
          shown = std::string("\\x") + hex[(static_cast<unsigned char>(c) >> 4) & 15] +
                  hex[static_cast<unsigned char>(c) & 15];
        } else {
          shown = std::string(1, c);
        }
        fail(src, {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b + 1)},
             "unexpected character '" + shown + "'");
      }
      }
    }
    i += len;
    push(k, b, i);
  }
  push(Tok::End, s.size(), s.size());
  return out;
}

} // namespace einjit::dsl
