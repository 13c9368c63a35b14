#pragma once
// Statements that read the tensor they write ('=' and '+='), with snapshot semantics: every
// read sees the values from before the statement, as if its right-hand side were evaluated
// whole before any store (docs/LANGUAGE.md, "In-place statements").
//
// A statement that reads its output only at the element it writes, writes each element once
// and reduces over nothing runs in place: each element's reads come before its own store and
// touch no other element, in any loop order and on any number of threads. Every other
// self-read (x[i+1], A[j,i], a reduction, a scatter) reads a snapshot instead: a copy
// statement "x_old[...] := x[...]" inserted just before, so that every backend sees ordinary
// statements and needs nothing of its own.
#include "dsl/Program.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace einjit::dsl {

// The statement's left-hand side reaches each element from one value of its output indices
// (the coefficient matrix of the left-hand subscripts has full column rank).
bool writesEachElementOnce(const Statement& st);

// Statement k reads the tensor it writes (on the right-hand side or in a left-hand gather).
bool readsOwnOutput(const Program& p, std::size_t k);

// Statement k reads its own output only at the element it writes and runs in place.
bool runsInPlace(const Program& p, std::size_t k);

// The name the user wrote for tensor t: a snapshot's is that of the tensor it copies.
const std::string& shownName(const Program& p, int t);

// The program's text with a snapshot statement before every statement that reads its output
// and cannot run in place (its reads renamed to the snapshot), to be checked again; nothing
// when no statement needs one. markSnapshots then marks each copy's snapshotOf in the program
// checked from it.
struct SnapshotPlan {
  ProgramAst ast;
  std::vector<std::pair<std::string, std::string>> copies; // snapshot, the tensor it copies
};
std::optional<SnapshotPlan> planSnapshots(const Program& p);
void markSnapshots(Program& checked, const SnapshotPlan& plan);

} // namespace einjit::dsl
