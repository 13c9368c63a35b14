// Row blocks (codegen/schedule/RowBlocks.h): which consecutive statements run as one loop over
// blocks of rows and which tensors live in per-task scratch, as `explain` prints it (including
// the runs that must not form); and the blocked programs on the CPU JIT against the reference
// interpreter with the default options (intermediates in scratch): softmax, layernorm and their
// gradients, row counts that leave a partial last block or fit in one block, strided views of
// inputs and of written arguments, f32 and f64, one and two threads (bit for bit the same).
#include "Compare.h"
#include "RowPrograms.h"

#include "codegen/schedule/RowBlocks.h"
#include "dsl/Binding.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace einjit::test;

namespace {


struct RunRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  // Per statement: the 1-based first statement of its run, 0 when in none.
  std::vector<int> run;
  const char* scratch = nullptr; // the run's scratch list as explain prints it ("" none)
  const char* why = nullptr;     // part of a "not in the row blocks" note
};

std::vector<RunRow> runRows() {
  const Shape x = {67, 300};
  return {
      {kSoftmax, {{"x", x}}, {1, 1, 1, 1}, "scratch: m,e,z)"},
      // an intermediate read at the next row, or transposed: the run ends before the reader
      {"s[i] := x[i,j]\ny[i,j] := x[i,j] - s[pad(i+1)]",
       {{"x", x}},
       {0, 0},
       nullptr,
       "statement 2 reads 's' other than at its own row"},
      {"e[i,j] := exp(x[i,j])\ns[i] := e[i,j]\ny[i,j] := e[j,i] * s[i]",
       {{"x", {40, 40}}},
       {1, 1, 0},
       "no scratch)",
       "statement 3 reads 'e' other than at its own row"},
      // a reduction over the row index (a column sum: its row would be j, it reads e at i; its
      // register tile over j keeps it out of any run first)
      {"e[i,j] := exp(x[i,j])\nc[j] := e[i,j]", {{"x", {40, 40}}}, {0, 0}},
      {"e[i,j] := exp(x[i,j])\nc[j] := e[i,j]", {{"x", {40, 30}}}, {0, 0}},
      // ... and one without a tile (the row index in a product with itself): the same
      {"e[i,j] := exp(x[i,j])\nc[j] := e[i,j] * e[i,i]", {{"x", {40, 40}}}, {0, 0}},
      // rows read elsewhere from a tensor the run only reads: fine
      {"s[i] := x[i,j]\ny[i,j] := x[pad(i+1),j] - s[i]", {{"x", x}}, {1, 1}, "scratch: s)"},
      // an in-place statement is no row statement; what remains is no run
      {"s[i] := x[i,j]\nx[i,j] = x[i,j] - s[i]", {{"x", x}}, {0, 0}},
      // different row ranges
      {"s[i] := x[i,j]\nt[k] := w[k,j]",
       {{"x", x}, {"w", {66, 300}}},
       {0, 0},
       nullptr,
       "other rows"},
      // an output that a later statement of the run reads and writes again: staged in scratch,
      // the last write stores it (RowRun::staged); a written argument read in the run: in full
      {"y[i,j] := x[i,j] * 2\ns[i] := y[i,j]\ny[i,j] += s[i]",
       {{"x", x}},
       {1, 1, 1},
       "scratch: y,s)",
       "stores 'y' to memory from the scratch"},
      // ... not when a statement after the last writer reads it (its rows would be stale in
      // memory), nor when the last write is a one-hot sum (one element per row)
      {"y[i,j] := x[i,j] * 2\ns[i] := y[i,j]\ny[i,j] += s[i]\nt[i] := y[i,j] + x[i,0]",
       {{"x", x}},
       {1, 1, 1, 1},
       "scratch: y,s)"},
      {"y[i,j] := x[i,j] * 2\n(max) s[i] := x[i,j]\ny[i,j] += j == s[i] ? 1 : 0",
       {{"x", x}},
       {1, 1, 1},
       "scratch: s)"},
      {"w[i,j] = x[i,j] * 2\ns[i] := w[i,j] * x[i,j]", {{"x", x}, {"w", x}}, {1, 1}, "no scratch)"},
      // a column sum between members is summed in the run, per task group ...
      {"s[i] := x[i,j]\nc[j] := x[i,j]\ny[i,j] := x[i,j] - s[i]",
       {{"x", x}},
       {1, 0, 1},
       "scratch: s)",
       "summed in the row blocks of statements 1-3 (over the rows of i: a partial sum per task "
       "group, added in group order)"},
      // ... and what it reads from the run lives in scratch
      {"d[i,j] := x[i,j] * 2\nc[j] := d[i,j]\ny[i,j] := d[i,j] + 1",
       {{"x", x}},
       {1, 0, 1},
       "scratch: d)",
       "summed in the row blocks of statements 1-3"},
      // ... but runs after the run (deferred), reading the tensor in full, where it reads the
      // run's rows elsewhere than at its row index, is no ':=' (+) sum, sums other rows, or
      // reads another column sum
      {"d[i,j] := x[i,j] * 2\nc[j] := d[pad(i+1),j] where i in 0:size(x,0)\ny[i,j] := d[i,j] + 1",
       {{"x", x}},
       {1, 0, 1},
       "no scratch)",
       "run after the row blocks of statements 1-3"},
      {"d[i,j] := x[i,j] * 2\n(max) c[j] := d[i,j]\ny[i,j] := d[i,j] + 1",
       {{"x", x}},
       {1, 0, 1},
       "no scratch)",
       "run after the row blocks of statements 1-3"},
      {"s[i] := x[i,j]\nc[j] := x[i,j] where i in 0:60\ny[i,j] := x[i,j] - s[i]",
       {{"x", x}},
       {1, 0, 1},
       "scratch: s)",
       "run after the row blocks of statements 1-3"},
      {"s[i] := x[i,j]\nc[j] := x[i,j]\nq[j] := x[i,j] * c[j]\ny[i,j] := x[i,j] - s[i]",
       {{"x", x}},
       {1, 0, 0, 1},
       "scratch: s)",
       "run after the row blocks of statements 1-4"},
      // not when a later member reads what it writes, or writes what it reads: the run ends
      {"s[i] := x[i,j]\nc[j] := x[i,j]\ny[i,j] := x[i,j] - s[i] * c[j]",
       {{"x", x}},
       {0, 0, 0},
       nullptr,
       "it depends on statement 2"},
      {"d[i,j] := x[i,j] * 2\nc[j] := d[i,j]\nd[i,j] += 1\ny[i,j] := d[i,j] * 3",
       {{"x", x}},
       {0, 0, 3, 3},
       nullptr,
       "it depends on statement 2"},
  };
}

std::string noteOf(const std::string& text, std::size_t k) {
  const std::string head = "# statement " + std::to_string(k) + ": ";
  const auto at = text.find(head);
  REQUIRE(at != std::string::npos);
  return text.substr(at + head.size(), text.find('\n', at) - at - head.size());
}

// The 1-based first statement of each statement's run (0: none), read off the notes.
std::vector<int> runsOf(const std::string& text, std::size_t statements) {
  std::vector<int> r;
  for (std::size_t k = 1; k <= statements; ++k) {
    const std::string note = noteOf(text, k);
    const std::string in = "; row blocks of statements ";
    const auto f = note.find(in);
    r.push_back(f == std::string::npos ? 0 : std::stoi(note.substr(f + in.size())));
  }
  return r;
}

// The program on the CPU (default options) and on the interpreter: every output, and every
// argument the program writes, compared. Arguments are copied (strided views when asked);
// returns the CPU's outputs.
Outputs compareOutputs(const std::string& program, const std::vector<Arg>& args, DType dt,
                       bool strideArgs) {
  Kernel ref = einjit::compile(program, on(Device::reference(), dt));
  Kernel jit = einjit::compile(program, cpu(dt));
  auto [a1, a2] = copiedArgs(args, dt, strideArgs);
  Outputs r = ref.call(a1);
  Outputs j = jit.call(a2);
  std::vector<std::string> names = r.names();
  for (const auto& t : jit.program().tensors)
    if (t.isArgument && !t.writtenBy.empty()) names.push_back(t.name);
  REQUIRE(!names.empty());
  checkSame(j, r, names, dt);
  return j;
}

} // namespace

TEST_CASE("row blocks: which statements run in blocks of rows, and what lives in scratch") {
  for (const RunRow& row : runRows()) {
    CAPTURE(std::string(row.program));
    Kernel k = einjit::compile(row.program, cpu(DType::f32));
    auto in = randomArgs(k.program(), row.shapes, DType::f32, 3);
    const std::string text = k.explain(argsOf(k, in, {}));
    CAPTURE(text);
    CHECK(runsOf(text, k.program().stmts.size()) == row.run);
    if (row.scratch) CHECK(text.find(row.scratch) != std::string::npos);
    if (row.why) CHECK(text.find(row.why) != std::string::npos);
    // Contiguous and strided views of the inputs and of a written argument.
    for (bool strideArgs : {false, true}) compareOutputs(row.program, argsOf(k, in, {}), DType::f64, strideArgs);
  }
}

TEST_CASE("row blocks: the softmax gradient is one run, its intermediates in scratch") {
  Kernel fwd = einjit::compile(kSoftmax, cpu(DType::f32));
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(DType::f32));
  std::map<std::string, Tensor> in{{"x", Tensor::random({1001, 1024}, DType::f32, 1)},
                                   {"dy", Tensor::random({1001, 1024}, DType::f32, 2)}};
  const std::string text = back.explain(argsOf(back, in, {}));
  CAPTURE(text);
  std::vector<int> all(back.program().stmts.size(), 1);
  CHECK(runsOf(text, all.size()) == all);
  CHECK(text.find("scratch: m,e,z,de,dz)") != std::string::npos);
  // One parallel function over the task groups of full blocks and one for the partial block.
  CHECK(text.find("func rows0(") != std::string::npos);
  CHECK(text.find("func rows0_tail(") != std::string::npos);
}

TEST_CASE("row blocks: softmax and layernorm, forward and gradient, against the interpreter") {
  // Rows: fewer than one block, a partial last block, many blocks; rows shorter than a vector,
  // odd, several vectors and a tail.
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
      {5, 3}, {67, 300}, {300, 77}, {1001, 33}};
  for (const char* program : {kSoftmax, kLayernorm})
    for (auto [rows, cols] : sizes)
      for (DType dt : {DType::f64, DType::f32})
        for (int threads : {1, 2}) {
          INFO(program << "\n" << rows << " x " << cols << (dt == DType::f32 ? ", f32" : ", f64")
                       << ", " << threads << " thread(s)");
#ifdef EINJIT_HAVE_TBB
          tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                    static_cast<std::size_t>(threads));
#endif
          const bool ln = program == kLayernorm;
          std::map<std::string, Shape> shapes{{"x", {rows, cols}}};
          if (ln) shapes["g"] = shapes["b"] = {cols};
          const std::map<std::string, double> scalars =
              ln ? std::map<std::string, double>{{"eps", 1e-5}} : std::map<std::string, double>{};
          Kernel fwd = einjit::compile(program, on(Device::reference(), dt));
          Kernel back = fwd.gradient();
          auto in = randomArgs(fwd.program(), shapes, dt, 9);
          for (bool strideArgs : {false, true}) {
            CAPTURE(strideArgs);
            compareOutputs(program, argsOf(fwd, in, scalars), dt, strideArgs);
            in["dy"] = Tensor::random({rows, cols}, dt, 10);
            compareOutputs(back.source(), argsOf(back, in, scalars), dt, strideArgs);
          }
        }
}

TEST_CASE("row blocks: row loops, which statements share one loop along the row") {
  // RowRun::loops: per statement, "a-b/n" (its loop's statements and vectors of partial results
  // per reduction), "" outside any loop.
  struct LoopRow {
    const char* program;
    std::vector<std::string> loops;
  };
  const std::vector<LoopRow> cases = {
      // an element-wise statement and a sum of what it writes, at the element it writes; with a
      // polynomial function, one vector of partial results, else four
      {"e[i,j] := x[i,j] * 2\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]", {"1-2/4", "1-2/4", ""}},
      {"e[i,j] := exp(x[i,j])\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]", {"1-2/1", "1-2/1", ""}},
      // extremes too, and two reductions over the same reads
      {"e[i,j] := x[i,j] * 2\n(max) s[i] := e[i,j]\n(min) t[i] := e[i,j] - x[i,j]\n"
       "y[i,j] := e[i,j] - s[i] + t[i]",
       {"1-3/4", "1-3/4", "1-3/4", ""}},
      // a reduction's result is known only after the row: its reader starts another loop
      {"s[i] := x[i,j]\ny[i,j] := x[i,j] - s[i]\nt[i] := y[i,j]\nz[i,j] := y[i,j] * t[i]",
       {"", "2-3/4", "2-3/4", ""}},
      // an element read at another column than where it is written: no loop
      {"e[i,j] := x[i,j] * 2\ns[i] := e[i,j] * e[i,0]\ny[i,j] := e[i,j] / s[i]",
       {"", "", ""}},
      // a one-hot sum keeps its own schedule (after the loop, out of its element-wise group)
      {"(max) m[i] := x[i,j]\ny[i,j] := x[i,j] * 2\ny[i,j] += j == m[i] ? 1 : 0",
       {"1-2/4", "1-2/4", ""}},
      // a loop needs a reduction
      {"s[i] := x[i,j]\ny[i,j] := x[i,j] - s[i]\nz[i,j] := y[i,j] * 2\nt[i] := z[i,j] + s[i]",
       {"", "2-4/4", "2-4/4", "2-4/4"}},
  };
  auto loopsOf = [](const std::string& text, std::size_t statements) {
    std::vector<std::string> r;
    for (std::size_t k = 1; k <= statements; ++k) {
      const std::string note = noteOf(text, k);
      const std::string in = "one loop along the row with statements ";
      const auto f = note.find(in);
      if (f == std::string::npos) {
        r.emplace_back();
        continue;
      }
      const std::string rest = note.substr(f + in.size());
      r.push_back(rest.substr(0, rest.find(' ')) + "/" +
                  rest.substr(rest.find('(') + 1, rest.find(' ', rest.find('(')) - rest.find('(') - 1));
    }
    return r;
  };
  for (const LoopRow& row : cases) {
    CAPTURE(std::string(row.program));
    Kernel k = einjit::compile(row.program, cpu(DType::f32));
    // 300 columns: steps of four vectors, a whole vector after them, a scalar tail (f32, AVX2)
    auto in = randomArgs(k.program(), {{"x", {67, 300}}}, DType::f32, 3);
    const std::string text = k.explain(argsOf(k, in, {}));
    CAPTURE(text);
    CHECK(loopsOf(text, k.program().stmts.size()) == row.loops);
    for (DType dt : {DType::f64, DType::f32})
      for (std::int64_t cols : {3, 33, 300})
        for (bool strideArgs : {false, true}) {
          CAPTURE(cols);
          auto args = randomArgs(k.program(), {{"x", {67, cols}}}, dt, 4);
          compareOutputs(row.program, argsOf(k, args, {}), dt, strideArgs);
        }
  }
  // The softmax gradient (without saved statistics: it recomputes m, e and z; its maximum carries
  // no gradient: grad/ShiftInvariance.h): e and z in one loop, de and dz in another; de += dz
  // and dx element-wise, fused.
  Kernel fwd = einjit::compile(kSoftmax, cpu(DType::f32));
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(DType::f32));
  std::map<std::string, Tensor> in{{"x", Tensor::random({1001, 1024}, DType::f32, 1)},
                                   {"dy", Tensor::random({1001, 1024}, DType::f32, 2)}};
  const std::string text = back.explain(argsOf(back, in, {}));
  CAPTURE(text);
  REQUIRE(back.program().stmts.size() == 7);
  CHECK(loopsOf(text, 7) == std::vector<std::string>{"", "2-3/1", "2-3/1", "4-5/4", "4-5/4", "", ""});
  CHECK(noteOf(text, 6).find("fused with statement 7") != std::string::npos);
  // With m and z saved (bench_rows' layer), x is read in one loop, with dy: e := exp(x - m), de
  // and dz; then de += dz and dx.
  einjit::Options saving = cpu(DType::f32);
  saving.saved = {"m", "z"};
  saving.keepIntermediates = false;
  Kernel fwdSaved = einjit::compile(kSoftmax, saving);
  Kernel backSaved = einjit::compile(fwdSaved.gradient().source(), cpu(DType::f32));
  auto savedIn = in;
  const einjit::Outputs y = fwdSaved.call(std::map<std::string, Tensor>{{"x", in.at("x")}});
  savedIn["m"] = y[std::string_view("m")];
  savedIn["z"] = y[std::string_view("z")];
  const std::string savedText = backSaved.explain(argsOf(backSaved, savedIn, {}));
  CAPTURE(savedText);
  REQUIRE(backSaved.program().stmts.size() == 5);
  CHECK(loopsOf(savedText, 5) == std::vector<std::string>{"1-3/1", "1-3/1", "1-3/1", "", ""});
  // The maximum read again (y = e / z + m) keeps its (max) path: grad/ writes the helper
  // first_m before the gradient statements, so it joins e and z's loop (x read in one loop),
  // de, dz and dm's first part in a second, de += dz, dx and dm's rest in a third; the one-hot
  // sum on its own.
  Kernel fwdMax = einjit::compile(
      "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
      "y[i,j] := e[i,j] / z[i] + m[i]",
      cpu(DType::f32));
  Kernel backMax = einjit::compile(fwdMax.gradient().source(), cpu(DType::f32));
  const std::string maxText = backMax.explain(argsOf(backMax, in, {}));
  CAPTURE(maxText);
  REQUIRE(backMax.program().stmts.size() == 11);
  CHECK(noteOf(maxText, 4).find("one loop along the row with statements 2-4 (1 vector") !=
        std::string::npos);
  CHECK(backMax.program().tensors[static_cast<std::size_t>(backMax.program().stmts[3].output)].name ==
        "first_m");
  CHECK(noteOf(maxText, 5).find("one loop along the row with statements 5-7 (4 vectors") !=
        std::string::npos);
  CHECK(noteOf(maxText, 8).find("one loop along the row with statements 8-10 (4 vectors") !=
        std::string::npos);
  CHECK(noteOf(maxText, 11).find("one-hot along j") != std::string::npos);
  for (DType dt : {DType::f64, DType::f32})
    for (bool strideArgs : {false, true}) {
      auto args = randomArgs(backMax.program(), {{"x", {67, 33}}, {"dy", {67, 33}}}, dt, 5);
      compareOutputs(fwdMax.gradient().source(), argsOf(backMax, args, {}), dt, strideArgs);
    }
}

TEST_CASE("row blocks: the layernorm gradient is one run, its column sums in it") {
  Kernel fwd = einjit::compile(kLayernorm, cpu(DType::f32));
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(DType::f32));
  std::map<std::string, Tensor> in{{"x", Tensor::random({1001, 1024}, DType::f32, 1)},
                                   {"dy", Tensor::random({1001, 1024}, DType::f32, 2)},
                                   {"g", Tensor::random({1024}, DType::f32, 3)},
                                   {"b", Tensor::random({1024}, DType::f32, 4)}};
  const std::string text = back.explain(argsOf(back, in, {{"eps", 1e-5}}));
  CAPTURE(text);
  std::vector<int> runs;
  for (const auto& st : back.program().stmts) {
    const std::string& out = back.program().tensors[static_cast<std::size_t>(st.output)].name;
    runs.push_back(out == "dg" || out == "db" ? 0 : 1);
  }
  CHECK(runsOf(text, runs.size()) == runs);
  // dg and db are summed per task group inside the run, so d and dd never cross memory.
  CHECK(text.find("summed in the row blocks of statements 1-") != std::string::npos);
  CHECK(text.find("run after") == std::string::npos);
  CHECK(text.find(",d,") != std::string::npos);
  CHECK(text.find(",dd,") != std::string::npos);
}

TEST_CASE("row blocks: results do not depend on the thread count (bit for bit)") {
  Kernel fwd = einjit::compile(kLayernorm, cpu(DType::f32));
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(DType::f32));
  std::map<std::string, Tensor> in{{"x", Tensor::random({517, 96}, DType::f32, 1)},
                                   {"dy", Tensor::random({517, 96}, DType::f32, 2)},
                                   {"g", Tensor::random({96}, DType::f32, 3)},
                                   {"b", Tensor::random({96}, DType::f32, 4)}};
  // The column sums dg, db too: their partial sums are per task group, and the groups are
  // fixed by the shapes, not the threads.
  std::vector<std::vector<double>> got;
  for (int threads : {1, 2})
    withThreads(threads, [&] {
      Outputs o = back.call(argsOf(back, in, {{"eps", 1e-5}}));
      for (const char* n : {"dx", "dg", "db"}) got.push_back(o[n].toVector());
    });
  REQUIRE(got[0].size() == 517u * 96u);
  REQUIRE(got[1].size() == 96u);
  CHECK(got[0] == got[3]);
  CHECK(got[1] == got[4]);
  CHECK(got[2] == got[5]);
}

TEST_CASE("row blocks: an intermediate kept in scratch is not readable unless kept") {
  std::map<std::string, Tensor> in{{"x", Tensor::random({67, 300}, DType::f32, 1)}};
  Kernel k = einjit::compile(kSoftmax, cpu(DType::f32));
  Outputs o = k.call(in);
  CHECK(o.names() == std::vector<std::string>{"y"});
  CHECK_THROWS_WITH_AS(o["e"],
                       "'e' is an intermediate (a later statement reads it), not an output, and "
                       "is not kept after the call: compile with Options::keepIntermediates = "
                       "true to read it",
                       einjit::Error);
  // With keepIntermediates the run still runs in blocks, every tensor written in full.
  einjit::Options keep = cpu(DType::f32);
  keep.keepIntermediates = true;
  Kernel kept = einjit::compile(kSoftmax, keep);
  const std::string text = kept.explain({in.at("x")});
  CHECK(text.find("; row blocks of statements 1-4") != std::string::npos);
  CHECK(text.find("no scratch)") != std::string::npos);
  Outputs full = kept.call(in);
  Kernel ref = einjit::compile(kSoftmax, on(Device::reference(), DType::f32));
  Outputs r = ref.call(in);
  checkSame(full, r, {"m", "e", "z", "y"}, DType::f32);
}

TEST_CASE("row blocks: with column sums the blocks and task groups do not depend on the threads") {
  // The layernorm gradient: dg and db summed in the run; its blocks and groups (and so the
  // order in which dg's and db's partial sums are added) for 1, 2 and 16 threads.
  const einjit::dsl::Program p = einjit::dsl::check(einjit::compile(kLayernorm).gradient().source());
  for (auto [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1001, 1024}, {4096, 1024}, {1024, 4096}, {67, 300}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    std::vector<einjit::dsl::ArgSpec> args;
    for (int id : p.arguments) {
      const std::string& n = p.tensors[static_cast<std::size_t>(id)].name;
      args.push_back({DType::f32, n == "g" || n == "b" ? std::vector<std::int64_t>{cols}
                                                       : std::vector<std::int64_t>{rows, cols}});
    }
    const einjit::dsl::BoundProgram b = einjit::dsl::bind(p, args, std::vector<double>{1e-5}, DType::f32);
    einjit::codegen::Strides strides(p.tensors.size());
    for (std::size_t t = 0; t < p.tensors.size(); ++t) {
      const auto& shape = b.tensors[t].shape;
      strides[t].assign(shape.size(), 1);
      for (std::size_t d = shape.size(); d-- > 1;) strides[t][d - 1] = strides[t][d] * shape[d];
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> plans;
    for (int threads : {1, 2, 16}) {
      einjit::codegen::Target t;
      t.threads = threads;
      const einjit::codegen::RowPlan plan = einjit::codegen::planRows(p, b, strides, t);
      REQUIRE(plan.runs.size() == 1);
      const einjit::codegen::RowRun& run = plan.runs[0];
      CHECK(run.sums.size() == 2);
      CHECK(run.deferred.empty());
      CHECK(run.groups <= einjit::codegen::kRowSumGroups);
      plans.emplace_back(run.blockRows, run.groups);
    }
    CHECK(plans[0] == plans[1]);
    CHECK(plans[0] == plans[2]);
  }
}

TEST_CASE("row blocks: which outputs are stored non-temporally") {
  // RowRun::streamed: the element-wise members whose large output no other statement of the run
  // reads or writes again (a one-hot sum's single element aside), or that store a staged output
  // (RowRun::staged). Softmax: y; its gradient: dx (its one-hot += touches one element per row);
  // the layernorm gradient's dx, staged (dx := dd in scratch, dx += dmu[i] / size stores it).
  struct StreamRow {
    const char* program;
    std::vector<std::string> streamed; // the outputs, in statement order
  };
  const std::vector<StreamRow> cases = {
      {kSoftmax, {"y"}},
      {kLayernorm, {"y"}},
      // y is staged in scratch (RowRun::staged): its last write is the only one to memory
      {"y[i,j] := x[i,j] * 2\ns[i] := y[i,j]\ny[i,j] += s[i]", {"y"}},
      {"y[i,j] := x[i,j] * 2\ns[i] := y[i,j]\nz[i,j] := y[i,j] + s[i]", {"z"}},
  };
  auto plan = [](const einjit::dsl::Program& p, std::int64_t rows, std::int64_t cols,
                 std::int64_t l2) {
    std::vector<einjit::dsl::ArgSpec> args;
    for (int id : p.arguments) {
      const std::string& n = p.tensors[static_cast<std::size_t>(id)].name;
      args.push_back({DType::f32, n == "g" || n == "b" ? std::vector<std::int64_t>{cols}
                                                       : std::vector<std::int64_t>{rows, cols}});
    }
    std::vector<double> scalars(p.params.size(), 1e-5);
    const einjit::dsl::BoundProgram b = einjit::dsl::bind(p, args, scalars, DType::f32);
    einjit::codegen::Strides strides(p.tensors.size());
    for (std::size_t t = 0; t < p.tensors.size(); ++t) {
      const auto& shape = b.tensors[t].shape;
      strides[t].assign(shape.size(), 1);
      for (std::size_t d = shape.size(); d-- > 1;) strides[t][d - 1] = strides[t][d] * shape[d];
    }
    einjit::codegen::Target t;
    t.l2Bytes = l2;
    const einjit::codegen::RowPlan pl = einjit::codegen::planRows(p, b, strides, t);
    std::vector<std::string> names;
    for (const auto& run : pl.runs)
      for (std::size_t k : run.streamed)
        names.push_back(p.tensors[static_cast<std::size_t>(p.stmts[k].output)].name);
    return names;
  };
  for (const StreamRow& row : cases) {
    CAPTURE(std::string(row.program));
    const einjit::dsl::Program p = einjit::dsl::check(row.program);
    // 512 x 1024 f32 is 2 MiB: 8 L2s of 256 KiB, not of 512 KiB.
    CHECK(plan(p, 512, 1024, 256 << 10) == row.streamed);
    CHECK(plan(p, 512, 1024, 512 << 10).empty());
  }
  const einjit::dsl::Program back =
      einjit::dsl::check(einjit::compile(kSoftmax).gradient().source());
  CHECK(plan(back, 512, 1024, 256 << 10) == std::vector<std::string>{"dx"});
  const einjit::dsl::Program lnBack =
      einjit::dsl::check(einjit::compile(kLayernorm).gradient().source());
  CHECK(plan(lnBack, 512, 1024, 256 << 10) == std::vector<std::string>{"dx"});
}

TEST_CASE("row blocks: non-temporal stores, rows aligned or not, against the interpreter") {
  // Outputs of 8 L2s and more are streamed: 16 MiB (4096 rows of f32, 2048 of f64) reach that
  // for L2s up to 2 MiB (512 KiB to 2 MiB on the machines seen). 1024 columns: every
  // row starts on a vector boundary (the non-temporal path); 1030: rows alternate between
  // aligned and not (the address test's ordinary stores), and the rows' tails are scalar.
  for (std::int64_t cols : {1024, 1030})
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(cols);
      CAPTURE(dt == DType::f32);
      const std::int64_t rows = dt == DType::f32 ? 4096 : 2048;
      Kernel fwd = einjit::compile(kSoftmax, cpu(dt));
      Kernel back = einjit::compile(fwd.gradient().source(), cpu(dt));
      std::map<std::string, Tensor> in{{"x", Tensor::random({rows, cols}, dt, 5)},
                                       {"dy", Tensor::random({rows, cols}, dt, 6)}};
      CHECK(fwd.explain({in.at("x")}).find("stored non-temporally") != std::string::npos);
      std::vector<std::vector<double>> got;
      for (int threads : {1, 2})
        withThreads(threads, [&] {
          got.push_back(Tensor(fwd.call({in.at("x")})[std::size_t{0}]).toVector());
          got.push_back(back.call(argsOf(back, in, {}))["dx"].toVector());
        });
      CHECK(got[0] == got[2]);
      CHECK(got[1] == got[3]);
      Kernel ref = einjit::compile(kSoftmax, on(Device::reference(), dt));
      Kernel refBack = einjit::compile(fwd.gradient().source(), on(Device::reference(), dt));
      checkSame(fwd.call({in.at("x")}), ref.call({in.at("x")}), {"y"}, dt);
      checkSame(back.call(argsOf(back, in, {})), refBack.call(argsOf(refBack, in, {})), {"dx"}, dt);
    }
}

namespace {

// A softmax as a layer saves it (bench_rows): the row statistics m and z, so that the gradient
// recomputes e in the loop that reads dy; x and dy of `rows` x 1030 (a row tail).
struct SavedSoftmax {
  Kernel fwd, back;
  std::map<std::string, Tensor> in;
};
SavedSoftmax savedSoftmax(DType dt, std::int64_t rows) {
  einjit::Options layer = cpu(dt);
  layer.saved = {"m", "z"};
  Kernel fwd = einjit::compile(kSoftmax, layer);
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(dt));
  std::map<std::string, Tensor> in{{"x", Tensor::random({rows, 1030}, dt, 7)},
                                   {"dy", Tensor::random({rows, 1030}, dt, 8)}};
  const Outputs y = fwd.call({in.at("x")});
  in["m"] = y["m"];
  in["z"] = y["z"];
  return {fwd, back, in};
}

} // namespace

TEST_CASE("row blocks: which row loops fetch their inputs one block ahead") {
  // 2048 rows of x (8 MiB of f32, larger than any L2 here): read one block ahead in the
  // softmax's exponential loop, forward (x) and gradient (x and dy); the layernorm's row loop
  // (subtract and square) gets no hints, nor does a softmax whose input fits in L2.
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt == DType::f32);
    const SavedSoftmax s = savedSoftmax(dt, 2048);
    const std::string f = s.fwd.explain({s.in.at("x")}, true);
    const std::string b = s.back.explain(argsOf(s.back, s.in, {}), true);
    CHECK(f.find("prefetch.ahead x[") != std::string::npos);
    CHECK(f.find("(1 vector of partial results; x fetched one block ahead)") != std::string::npos);
    CHECK(b.find("prefetch.ahead x[") != std::string::npos);
    CHECK(b.find("prefetch.ahead dy[") != std::string::npos);
    CHECK(b.find("; x, dy fetched one block ahead)") != std::string::npos);
  }
  Kernel small = einjit::compile(kSoftmax, cpu(DType::f32));
  CHECK(small.explain({Tensor::random({64, 256}, DType::f32, 1)}, true).find("prefetch") ==
        std::string::npos);
  Kernel ln = einjit::compile(kLayernorm, cpu(DType::f32));
  std::map<std::string, Tensor> lin{{"x", Tensor::random({2048, 1024}, DType::f32, 1)},
                                    {"g", Tensor::random({1024}, DType::f32, 2)},
                                    {"b", Tensor::random({1024}, DType::f32, 3)}};
  CHECK(ln.explain(argsOf(ln, lin, {{"eps", 1e-5}}), true).find("prefetch") == std::string::npos);
}

TEST_CASE("row blocks: inputs fetched one block ahead, against the interpreter") {
  // The hints change no value: forward and gradient at 2048 x 1030, f32 and f64, 2 and 1
  // threads (the plans of the case above).
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt == DType::f32);
    const SavedSoftmax s = savedSoftmax(dt, 2048);
    REQUIRE(s.fwd.explain({s.in.at("x")}).find("fetched one block ahead") != std::string::npos);
    Kernel ref = einjit::compile(kSoftmax, on(Device::reference(), dt));
    Kernel refBack = einjit::compile(s.back.source(), on(Device::reference(), dt));
    for (int threads : {2, 1})
      withThreads(threads, [&] {
        checkSame(s.fwd.call({s.in.at("x")}), ref.call({s.in.at("x")}), {"y", "m", "z"}, dt);
        checkSame(s.back.call(argsOf(s.back, s.in, {})), refBack.call(argsOf(refBack, s.in, {})),
                  {"dx"}, dt);
      });
  }
}
