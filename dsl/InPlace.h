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

// The checked program again, with a snapshot statement before every statement that reads its
// output and cannot run in place (its reads renamed to the snapshot, a tensor marked
// snapshotOf); the program unchanged when none needs one.
Program insertSnapshots(Program p);

} // namespace einjit::dsl
