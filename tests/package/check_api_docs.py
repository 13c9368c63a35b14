#!/usr/bin/env python3
"""Every public symbol of include/einjit/*.h is documented in docs/API.md.

python3 check_api_docs.py HEADER_DIR API_MD  (exit status 1 and the missing names otherwise)

The public symbols are what a user can name: namespace-scope classes, structs, enums, type
aliases, functions and variables of namespace einjit (not einjit::detail), and the public
members (functions and data) of its classes. A namespace-scope name counts as documented when
docs/API.md has it as `name` or `einjit::name` in code; a member, as `Class::member`.
"""
import pathlib
import re
import sys

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "static_cast", "throw",
            "const_cast", "reinterpret_cast", "decltype", "noexcept", "alignas", "case"}


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\])*'", "''", text)


def drop_angles(text, start=0):
    """text with the <...> group opening at or after start removed (nesting counted)."""
    i = text.find("<", start)
    if i < 0:
        return text
    depth = 0
    for j in range(i, len(text)):
        depth += {"<": 1, ">": -1}.get(text[j], 0)
        if depth == 0:
            return text[:i] + text[j + 1:]
    return text


def drop_templates(stmt):
    """Removes template headers (template <...>) and template arguments (name<...>)."""
    while True:
        m = re.search(r"template\s*<", stmt)
        if not m:
            break
        stmt = stmt[:m.start()] + drop_angles(stmt, m.start())[m.start():].replace("template", "", 1)
    while True:
        m = re.search(r"\w<", stmt)
        if not m or "operator" in stmt[max(0, m.start() - 9):m.start() + 1]:
            return stmt
        stmt = drop_angles(stmt, m.start() + 1)


def declared_name(stmt):
    """The name a declaration statement introduces, or None."""
    stmt = drop_templates(stmt).strip()
    if not stmt or stmt.startswith(("friend", "public", "private", "protected", "#",
                                    "static_assert")):
        return None
    if re.match(r"using\s+[\w:]+\s*$", stmt):  # a using-declaration (inherited constructors)
        return None
    m = re.match(r"(?:enum\s+class|enum|class|struct)\s+(\w+)", stmt)
    if m:
        return m.group(1)
    m = re.match(r"using\s+(\w+)\s*=", stmt)
    if m:
        return m.group(1)
    m = re.search(r"operator\s*(\(\)|\[\]|[^\s(]+)\s*\(", stmt)
    if m:
        op = m.group(1)
        return "operator" + (" " if op[0].isalpha() else "") + op
    paren, equals = stmt.find("("), stmt.find("=")
    if paren < 0 or 0 <= equals < paren:  # variables or data members, perhaps several
        parts = stmt.split(",")
        names = [last_identifier(parts[0].split("=")[0])]
        names += [last_identifier(p.split("=")[0]) for p in parts[1:]]
        return [n for n in names if n]
    return last_identifier(stmt[:paren])


def last_identifier(text):
    names = re.findall(r"[A-Za-z_]\w*", text)
    return names[-1] if names and names[-1] not in KEYWORDS else None


def flatten_braces(text):
    """Brace groups holding no statement: empty function bodies become ';', initializers
    (= {}, T{1}, enumerator lists) a placeholder, so that braces left are scopes."""
    while True:
        m = re.search(r"\{[^{};]*\}", text)
        if not m:
            return text
        before = text[:m.start()].rstrip()
        body = re.search(r"(\)|\bconst|\bnoexcept|\boverride)$", before)
        text = text[:m.start()] + (";" if body else " 0 ") + text[m.end():]


def public_symbols(header):
    text = flatten_braces(strip(header.read_text()))
    symbols = []
    # A stack of scopes: (kind, name, access).
    scopes = [("file", "", "public")]
    stmt = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "#":  # preprocessor line
            i = text.index("\n", i) if "\n" in text[i:] else len(text)
            continue
        if c in "{;}":
            kind, name, access = scopes[-1]
            s = " ".join(stmt.split())
            visible = access == "public" and kind in ("namespace", "class") and (
                kind == "class" or name == "einjit")
            if c == "{":
                m = re.match(r"namespace\s+(\w+)", s)
                cm = re.match(r"(?:template\s*<.*?>\s*)?(class|struct)\s+(\w+)(?!.*\()", s)
                if m:
                    scopes.append(("namespace", m.group(1), "public"))
                elif cm:
                    if visible:
                        symbols.append(qualify(scopes, cm.group(2)))
                    scopes.append(("class", cm.group(2),
                                   "public" if cm.group(1) == "struct" else "private"))
                else:
                    if visible and re.match(r"enum", s):
                        symbols.append(qualify(scopes, declared_name(s)))
                    elif visible and "(" in s:  # a function defined inline
                        n = declared_name(s)
                        if isinstance(n, str) and n != name:
                            symbols.append(qualify(scopes, n))
                    scopes.append(("body", "", "private"))
            elif c == ";":
                if visible and not re.fullmatch(r"(class|struct)\s+\w+", s):
                    n = declared_name(s)
                    for each in n if isinstance(n, list) else [n]:
                        if each and each != name:
                            symbols.append(qualify(scopes, each))
            else:
                scopes.pop()
            stmt = ""
            i += 1
            continue
        if c == ":" and scopes[-1][0] == "class":
            m = re.fullmatch(r"\s*(public|private|protected)\s*", stmt)
            if m:
                kind, name, _ = scopes[-1]
                scopes[-1] = (kind, name, m.group(1))
                stmt = ""
                i += 1
                continue
        stmt += c
        i += 1
    return [s for s in symbols if s]


def qualify(scopes, name):
    if not name:
        return None
    classes = [n for k, n, _ in scopes if k == "class"]
    return "::".join(classes + [name])


def main():
    headers = sorted(pathlib.Path(sys.argv[1]).glob("*.h"))
    doc = pathlib.Path(sys.argv[2]).read_text()
    code = " ".join(re.findall(r"`([^`]+)`", doc))
    missing = []
    for header in headers:
        for symbol in dict.fromkeys(public_symbols(header)):
            pattern = re.escape(symbol) if "::" in symbol else r"(?:einjit::)?" + re.escape(symbol)
            if not re.search(r"(?<![\w:])" + pattern + r"(?!\w)", code):
                missing.append(f"{header.name}: {symbol}")
    if missing:
        print("not documented in docs/API.md:\n  " + "\n  ".join(missing))
        return 1
    print(f"{sum(len(public_symbols(h)) for h in headers)} public symbols, all documented")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[3] == "--list":
        for h in sorted(pathlib.Path(sys.argv[1]).glob("*.h")):
            print(h.name, public_symbols(h))
        sys.exit(0)
    sys.exit(main())
