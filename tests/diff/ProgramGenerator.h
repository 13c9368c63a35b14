#pragma once
// Random well-typed einjit programs for the differential tester (tests/diff/test_differential.cpp):
// contractions, shifts, strides and dilations, pad/clamp/wrap, gathers through index tensors,
// (max)/(min)/(*) reductions, smooth elementwise functions, chains of statements that read
// earlier results, and in-place updates of an argument by the last result. Every program is
// built in bounds by construction: a plain subscript's tensor extent is the largest value it
// takes plus one; pad/clamp/wrap subscripts read tensors of any extent. A program is a structure
// (statements, terms, factors) rather than text so that a disagreement can be reduced by deleting
// parts of it (reduce() below).
#include "einjit/einjit.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace einjit::diff {

struct Factor {
  std::string text;                  // the read, function applied: "tanh(a3[2i+k])"
  std::vector<std::string> inputs;   // input tensors it reads (for their shapes)
  std::vector<std::string> varsBare; // variables it reads as a bare subscript
  std::vector<std::string> varsUsed; // every variable it reads
  bool plainFn = false;              // a function wraps it (reduce() may drop it)
  std::string bareText;              // the read without the function
};

struct Term {
  double coef = 1;
  std::vector<Factor> factors;
};

struct GStatement {
  std::string output;
  std::vector<std::string> outVars; // left-hand side
  std::vector<std::string> vars;    // every index variable
  std::map<std::string, std::int64_t> extent;
  std::vector<std::string> whereVars; // given a 'where' range
  std::string reduce;                 // "", "(max) ", "(min) ", "(*) "
  std::vector<Term> terms;
  std::string reads;         // the earlier statement's output it reads, if any
  std::string assign = ":="; // '=' and '+=': the output is an argument written in place
};

struct GenProgram {
  std::vector<GStatement> stmts;
  std::map<std::string, Shape> shapes; // every input tensor that may be read

  std::string text() const {
    std::string s;
    for (const GStatement& st : stmts) {
      if (!s.empty()) s += "\n";
      s += st.reduce + st.output;
      if (!st.outVars.empty()) {
        s += "[";
        for (std::size_t i = 0; i < st.outVars.size(); ++i) s += (i ? "," : "") + st.outVars[i];
        s += "]";
      }
      s += " " + st.assign + " ";
      for (std::size_t t = 0; t < st.terms.size(); ++t) {
        const Term& term = st.terms[t];
        std::string coef = term.coef == 1 ? "" : std::to_string(term.coef).substr(0, 4) + " * ";
        s += (t ? " + " : "") + coef;
        for (std::size_t f = 0; f < term.factors.size(); ++f)
          s += (f ? " * " : "") + term.factors[f].text;
      }
      for (std::size_t w = 0; w < st.whereVars.size(); ++w)
        s += (w ? ", " : " where ") + st.whereVars[w] +
             " in 0:" + std::to_string(st.extent.at(st.whereVars[w]));
    }
    return s;
  }

  // The shapes of the inputs the program reads (calls reject unknown names only when read).
  std::map<std::string, Shape> usedShapes() const {
    std::map<std::string, Shape> m;
    for (const GStatement& st : stmts) {
      if (st.assign != ":=") m[st.output] = shapes.at(st.output);
      for (const Term& t : st.terms)
        for (const Factor& f : t.factors)
          for (const std::string& in : f.inputs) m[in] = shapes.at(in);
    }
    return m;
  }
};

class Generator {
public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  GenProgram program() {
    GenProgram p;
    p_ = &p;
    inputs_ = 0;
    int n = 1 + pick(3) + (pick(4) == 0 ? 1 : 0);
    for (int s = 0; s < n; ++s) p.stmts.push_back(statement(s, n));
    // Drawn after the statements, so the programs without it are those of earlier runs.
    if (chance(20)) p.stmts.push_back(inPlace(p.stmts.back()));
    return p;
  }

private:
  std::mt19937_64 rng_;
  GenProgram* p_ = nullptr;
  int inputs_ = 0;

  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  bool chance(int percent) { return pick(100) < percent; }

  std::string newInput(const Shape& shape) {
    std::string name = "a" + std::to_string(inputs_++);
    p_->shapes[name] = shape;
    return name;
  }

  static std::string affine(const std::vector<std::pair<std::int64_t, std::string>>& terms,
                            std::int64_t c) {
    std::string s;
    for (const auto& [k, v] : terms) {
      if (k == 0) continue;
      std::string mag = (k == 1 || k == -1) ? v : std::to_string(k < 0 ? -k : k) + v;
      s += k < 0 ? "-" + mag : (s.empty() ? "" : "+") + mag;
    }
    if (c != 0 || s.empty())
      s += (c < 0 ? "-" : (s.empty() ? "" : "+")) + std::to_string(c < 0 ? -c : c);
    return s;
  }

  // One subscript over `vars`: bare, a shifted/strided/dilated plain affine form in bounds
  // (returns its extent), or pad/clamp/wrap of any affine form (extent chosen freely).
  std::string subscript(const GStatement& st, std::int64_t& extent, std::string& bare,
                        std::vector<std::string>& used) {
    const std::string& v =
        st.vars[static_cast<std::size_t>(pick(static_cast<int>(st.vars.size())))];
    used.push_back(v);
    int kind = pick(10);
    if (kind < 4) {
      extent = st.extent.at(v);
      bare = v;
      return v;
    }
    std::vector<std::pair<std::int64_t, std::string>> terms{{1 + pick(3), v}};
    if (st.vars.size() > 1 && chance(60)) {
      const std::string& u =
          st.vars[static_cast<std::size_t>(pick(static_cast<int>(st.vars.size())))];
      if (u != v) {
        terms.push_back({chance(25) ? -(1 + pick(2)) : 1 + pick(3), u});
        used.push_back(u);
      }
    }
    if (kind < 8) {
      // Plain: the smallest value is lifted to 0..1, the extent is the largest value + 1.
      std::int64_t lo = 0, hi = 0;
      for (const auto& [k, u] : terms) (k < 0 ? lo : hi) += k * (st.extent.at(u) - 1);
      std::int64_t c = -lo + pick(2);
      extent = hi + c + 1 + pick(2);
      if (terms.size() == 1 && terms[0].first == 1 && c == 0) {
        extent = st.extent.at(v); // it prints as a bare use: its extent is the variable's
        bare = v;
      }
      return affine(terms, c);
    }
    const char* modes[] = {"pad", "clamp", "wrap"};
    extent = 1 + pick(5);
    return std::string(modes[pick(3)]) + "(" + affine(terms, pick(5) - 2) + ")";
  }

  Factor inputRead(GStatement& st) {
    Factor f;
    if (chance(12)) {
      // A gather: E[tok[v], u] (an embedding lookup); tok holds valid rows (gradcheck).
      const std::string& v =
          st.vars[static_cast<std::size_t>(pick(static_cast<int>(st.vars.size())))];
      std::string tok = newInput({st.extent.at(v)});
      std::string e;
      if (st.vars.size() > 1 && chance(70)) {
        const std::string& u =
            st.vars[static_cast<std::size_t>(pick(static_cast<int>(st.vars.size())))];
        e = newInput({2 + pick(3), st.extent.at(u)});
        f.bareText = e + "[" + tok + "[" + v + "], " + u + "]";
        f.varsBare = {v, u};
        f.varsUsed = {v, u};
      } else {
        e = newInput({2 + pick(3)});
        f.bareText = e + "[" + tok + "[" + v + "]]";
        f.varsBare = {v};
        f.varsUsed = {v};
      }
      f.inputs = {e, tok};
      return f;
    }
    int rank = 1 + pick(std::min<int>(3, static_cast<int>(st.vars.size()) + 1));
    Shape shape;
    std::string subs;
    for (int d = 0; d < rank; ++d) {
      std::int64_t e = 1;
      std::string bare;
      subs += (d ? "," : "") + subscript(st, e, bare, f.varsUsed);
      if (!bare.empty()) f.varsBare.push_back(bare);
      shape.push_back(e);
    }
    std::string name = newInput(shape);
    f.inputs = {name};
    f.bareText = name + "[" + subs + "]";
    return f;
  }

  // An argument u updated in place by the last result (docs/LANGUAGE.md "In-place
  // statements"): u[v] = c*u[v] + y[v] and u[v] += f(y[v]) run in place; u[v] = u[pad(v0+1),
  // ...] + y[v] reads another element of u, so it reads a snapshot. Each is linear in the old
  // u, so the gradient with respect to the other inputs needs none of the overwritten values.
  GStatement inPlace(const GStatement& last) {
    GStatement st;
    st.output = "u";
    st.outVars = last.outVars;
    st.vars = last.outVars;
    st.reads = last.output;
    Shape shape;
    std::string subs;
    for (const std::string& v : last.outVars) {
      st.extent[v] = last.extent.at(v);
      shape.push_back(st.extent[v]);
      subs += (subs.empty() ? "" : ",") + v;
    }
    p_->shapes["u"] = shape;
    auto access = [&](const std::string& name, const std::string& sub) {
      return sub.empty() ? name : name + "[" + sub + "]";
    };
    Factor y;
    y.bareText = y.text = access(last.output, subs);
    y.varsBare = y.varsUsed = last.outVars;
    Factor self;
    self.inputs = {"u"};
    self.bareText = self.text = access("u", subs);
    self.varsBare = self.varsUsed = last.outVars;
    int form = pick(3);
    if (form == 2 && !last.outVars.empty()) {
      std::string shifted = "pad(" + last.outVars[0] + "+1)";
      for (std::size_t d = 1; d < last.outVars.size(); ++d) shifted += "," + last.outVars[d];
      self.bareText = self.text = "u[" + shifted + "]";
      self.varsBare.erase(self.varsBare.begin());
    } else if (form == 2) {
      form = 0;
    }
    Term first;
    first.factors = {y};
    st.terms = {first};
    if (form == 1) {
      st.assign = "+=";
      st.terms[0].factors[0].text = "tanh(" + y.bareText + ")";
      st.terms[0].factors[0].plainFn = true;
    } else {
      st.assign = "=";
      Term old;
      old.coef = form == 2 ? 1 : chance(50) ? 0.5 : -1.5;
      old.factors = {self};
      st.terms.push_back(old);
    }
    return st;
  }

  GStatement statement(int s, int n) {
    GStatement st;
    st.output = s == n - 1 ? "y" : "t" + std::to_string(s);
    const GStatement* prev = s > 0 ? &p_->stmts[static_cast<std::size_t>(s - 1)] : nullptr;
    int nout = prev && prev->outVars.empty() ? pick(3) : 1 + pick(2);
    if (pick(10) == 0) nout = 0;
    const char* outNames[] = {"i", "j"};
    const char* redNames[] = {"k", "l"};
    for (int i = 0; i < nout; ++i) st.outVars.push_back(outNames[i]);
    st.vars = st.outVars;
    int nred = pick(3);
    for (int i = 0; i < nred; ++i) st.vars.push_back(redNames[i]);
    if (st.vars.empty()) st.vars.push_back("k");
    for (const std::string& v : st.vars) st.extent[v] = 1 + pick(4);
    // Read the previous statement's result (bare, so its shape sets those extents).
    std::vector<Factor> fromPrev;
    if (prev && (chance(80) || prev->output != "y")) {
      Factor f;
      std::string subs;
      std::vector<std::string> free = st.vars;
      std::shuffle(free.begin(), free.end(), rng_);
      bool ok = prev->outVars.size() <= free.size();
      for (std::size_t d = 0; ok && d < prev->outVars.size(); ++d) {
        st.extent[free[d]] = prev->extent.at(prev->outVars[d]);
        subs += (d ? "," : "") + free[d];
        f.varsBare.push_back(free[d]);
        f.varsUsed.push_back(free[d]);
      }
      if (ok) {
        f.bareText = prev->outVars.empty() ? prev->output : prev->output + "[" + subs + "]";
        st.reads = prev->output;
        fromPrev.push_back(f);
      }
    }
    int r = pick(100);
    st.reduce = r < 12 ? "(max) " : r < 24 ? "(min) " : r < 30 ? "(*) " : "";
    int nterms = chance(25) ? 2 : 1;
    for (int t = 0; t < nterms; ++t) {
      Term term;
      if (t > 0) term.coef = chance(50) ? 0.5 : -1.5;
      int nf = 1 + pick(3);
      if (t == 0)
        for (const Factor& f : fromPrev) term.factors.push_back(f);
      while (static_cast<int>(term.factors.size()) < nf) term.factors.push_back(inputRead(st));
      st.terms.push_back(term);
    }
    // Functions around some factors (smooth ones: finite differences stay exact enough).
    const char* fns[] = {"tanh", "sigmoid", "sin", "exp", "cos"};
    for (Term& term : st.terms)
      for (Factor& f : term.factors) {
        f.text = f.bareText;
        if (chance(25)) {
          f.text = std::string(fns[pick(5)]) + "(" + f.bareText + ")";
          f.plainFn = true;
        }
      }
    // Variables nothing reads bare get a 'where' range (else range inference has no extent to
    // take); some others get one too (it must then agree with the bare use).
    // A reduction variable nothing reads is dropped.
    auto has = [](const std::vector<std::string>& list, const std::string& v) {
      return std::find(list.begin(), list.end(), v) != list.end();
    };
    std::vector<std::string> vars;
    for (const std::string& v : st.vars) {
      bool bare = false, read = false;
      for (const Term& term : st.terms)
        for (const Factor& f : term.factors) {
          bare = bare || has(f.varsBare, v);
          read = read || has(f.varsUsed, v);
        }
      bool out = has(st.outVars, v);
      if (!read && !out) continue;
      vars.push_back(v);
      if (!bare || chance(20)) st.whereVars.push_back(v);
    }
    st.vars = vars;
    return st;
  }
};

// Deletes parts of a program (statements nothing later reads, terms, factors, functions,
// 'where' ranges... one at a time) while `stillFails` holds; the smallest failing program.
inline GenProgram reduce(GenProgram p, const std::function<bool(const GenProgram&)>& stillFails) {
  bool changed = true;
  while (changed) {
    changed = false;
    std::vector<GenProgram> candidates;
    // Drop the first statements (the last one reads them only through `reads`).
    for (std::size_t s = 0; s + 1 < p.stmts.size(); ++s) {
      bool readLater = false;
      for (std::size_t u = s + 1; u < p.stmts.size(); ++u)
        readLater = readLater || p.stmts[u].reads == p.stmts[s].output;
      if (readLater) continue;
      GenProgram c = p;
      c.stmts.erase(c.stmts.begin() + static_cast<std::ptrdiff_t>(s));
      candidates.push_back(c);
    }
    for (std::size_t s = 0; s < p.stmts.size(); ++s) {
      const GStatement& st = p.stmts[s];
      if (!st.reduce.empty()) {
        GenProgram c = p;
        c.stmts[s].reduce.clear();
        candidates.push_back(c);
      }
      for (std::size_t t = 0; t < st.terms.size(); ++t) {
        if (st.terms.size() > 1) {
          GenProgram c = p;
          c.stmts[s].terms.erase(c.stmts[s].terms.begin() + static_cast<std::ptrdiff_t>(t));
          candidates.push_back(c);
        }
        for (std::size_t f = 0; f < st.terms[t].factors.size(); ++f) {
          const Factor& fac = st.terms[t].factors[f];
          if (st.terms[t].factors.size() > 1 && fac.inputs.size() > 0) {
            GenProgram c = p;
            auto& fs = c.stmts[s].terms[t].factors;
            fs.erase(fs.begin() + static_cast<std::ptrdiff_t>(f));
            candidates.push_back(c);
          }
          if (fac.plainFn) {
            GenProgram c = p;
            Factor& g = c.stmts[s].terms[t].factors[f];
            g.text = g.bareText;
            g.plainFn = false;
            candidates.push_back(c);
          }
        }
      }
      for (std::size_t w = 0; w < st.whereVars.size(); ++w) {
        GenProgram c = p;
        c.stmts[s].whereVars.erase(c.stmts[s].whereVars.begin() + static_cast<std::ptrdiff_t>(w));
        candidates.push_back(c);
      }
    }
    for (const GenProgram& c : candidates)
      if (stillFails(c)) {
        p = c;
        changed = true;
        break;
      }
  }
  return p;
}

} // namespace einjit::diff
