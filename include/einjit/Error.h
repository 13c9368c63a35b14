#pragma once
// einjit::Error: the one exception type for every user mistake (syntax, names, ranges, shapes,
// dtypes, arguments) and every runtime failure. Errors about the program text carry the
// 1-based line and column of the offending span; what() is the full rendered diagnostic with
// the source line and a caret under the span, like a compiler's.
#include <stdexcept>
#include <string>

namespace einjit {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message, int line = 0, int column = 0)
      : std::runtime_error(message), line_(line), column_(column) {}
  // 1-based position of the caret in the program text; 0 when the error has no position.
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }

private:
  int line_;
  int column_;
};

// An internal invariant broke: a bug in einjit, never the user's fault.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

} // namespace einjit
