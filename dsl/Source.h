#pragma once
// The program text with line/column mapping, and caret diagnostics rendered like a compiler's:
//
//   <program>:1:23: error: unknown index 'q'
//       1 | y[i] := x[i, q]
//         |              ^
//   note: ...
//
// Every front-end error goes through fail(), which throws einjit::Error with the caret's
// line and column attached.
#include "einjit/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace einjit::dsl {

// Half-open byte range [begin, end) in the source text.
struct SourceRange {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
  static SourceRange join(SourceRange a, SourceRange b) {
    return {a.begin < b.begin ? a.begin : b.begin, a.end > b.end ? a.end : b.end};
  }
};

class Source {
public:
  explicit Source(std::string text, std::string name = "<program>");
  const std::string& text() const { return text_; }
  const std::string& name() const { return name_; }
  struct LineCol {
    int line;   // 1-based
    int column; // 1-based, in bytes
  };
  LineCol lineCol(std::uint32_t offset) const;
  std::string_view lineText(int line) const; // without the newline
  std::string_view slice(SourceRange r) const;

private:
  std::string text_;
  std::string name_;
  std::vector<std::uint32_t> lineStarts_;
};

using SourcePtr = std::shared_ptr<const Source>;

struct Note {
  SourceRange range;
  std::string message;
  bool hasRange = true;
};

// The full text of a diagnostic: header, source line, caret/tilde line, notes.
std::string renderDiagnostic(const Source& src, SourceRange range, std::string_view message,
                             const std::vector<Note>& notes = {});

// Throws einjit::Error carrying the rendered diagnostic and the caret position.
[[noreturn]] void fail(const Source& src, SourceRange range, const std::string& message,
                       const std::vector<Note>& notes = {});

} // namespace einjit::dsl
