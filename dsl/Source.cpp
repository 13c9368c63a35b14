#include "dsl/Source.h"

#include <algorithm>
#include <sstream>

namespace einjit::dsl {

Source::Source(std::string text, std::string name)
    : text_(std::move(text)), name_(std::move(name)) {
  lineStarts_.push_back(0);
  for (std::uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
}

Source::LineCol Source::lineCol(std::uint32_t offset) const {
  offset = std::min<std::uint32_t>(offset, static_cast<std::uint32_t>(text_.size()));
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  auto line = static_cast<int>(it - lineStarts_.begin()); // 1-based
  return {line, static_cast<int>(offset - lineStarts_[static_cast<std::size_t>(line - 1)]) + 1};
}

std::string_view Source::lineText(int line) const {
  if (line < 1 || line > static_cast<int>(lineStarts_.size())) return {};
  std::uint32_t b = lineStarts_[static_cast<std::size_t>(line - 1)];
  std::uint32_t e = line < static_cast<int>(lineStarts_.size())
                        ? lineStarts_[static_cast<std::size_t>(line)] - 1
                        : static_cast<std::uint32_t>(text_.size());
  std::string_view v(text_);
  v = v.substr(b, e - b);
  if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
  return v;
}

std::string_view Source::slice(SourceRange r) const {
  std::string_view v(text_);
  r.begin = std::min<std::uint32_t>(r.begin, static_cast<std::uint32_t>(v.size()));
  r.end = std::clamp<std::uint32_t>(r.end, r.begin, static_cast<std::uint32_t>(v.size()));
  return v.substr(r.begin, r.end - r.begin);
}

namespace {

// "    3 | text" and "      | ^~~~" for one range (clipped to its first line). A long line
// (a generated program can be megabytes on one line) is shown as a window around the caret.
void renderSnippet(std::ostringstream& os, const Source& src, SourceRange range) {
  constexpr std::size_t kWide = 160, kBefore = 60, kAfter = 100;
  auto lc = src.lineCol(range.begin);
  std::string_view line = src.lineText(lc.line);
  auto col = static_cast<std::size_t>(lc.column - 1);
  std::size_t from = 0, to = line.size();
  if (line.size() > kWide) {
    from = col > kBefore ? col - kBefore : 0;
    to = std::min(line.size(), std::max(col, from) + kAfter);
  }
  const std::string before = from > 0 ? "..." : "", after = to < line.size() ? "..." : "";
  std::string number = std::to_string(lc.line);
  std::string gutter(number.size() < 4 ? 4 - number.size() : 0, ' ');
  os << gutter << number << " | " << before;
  // Tabs and other control bytes are shown as single spaces, so that the caret lines up and
  // an embedded NUL does not end the message where what() is read as a C string.
  for (char c : line.substr(from, to - from))
    os << (static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
  os << after << '\n' << std::string(gutter.size() + number.size(), ' ') << " | ";
  os << std::string(before.size() + (col > from ? col - from : 0), ' ') << '^';
  std::size_t len = range.end > range.begin ? range.end - range.begin : 1;
  std::size_t room = to > col ? to - col : 1;
  len = std::min(len, room);
  if (len > 1) os << std::string(len - 1, '~');
  os << '\n';
}

} // namespace

std::string renderDiagnostic(const Source& src, SourceRange range, std::string_view message,
                             const std::vector<Note>& notes) {
  std::ostringstream os;
  auto lc = src.lineCol(range.begin);
  os << src.name() << ':' << lc.line << ':' << lc.column << ": error: " << message << '\n';
  renderSnippet(os, src, range);
  for (const Note& n : notes) {
    if (n.hasRange) {
      auto nl = src.lineCol(n.range.begin);
      os << src.name() << ':' << nl.line << ':' << nl.column << ": note: " << n.message << '\n';
      renderSnippet(os, src, n.range);
    } else {
      os << "note: " << n.message << '\n';
    }
  }
  std::string text = os.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

void fail(const Source& src, SourceRange range, const std::string& message,
          const std::vector<Note>& notes) {
  auto lc = src.lineCol(range.begin);
  throw Error(renderDiagnostic(src, range, message, notes), lc.line, lc.column);
}

} // namespace einjit::dsl
