// Split reductions on the CPU JIT (codegen/Schedule.h): statements with few output elements and
// a long reduction run their reduction in a fixed number of chunks in parallel, combined in
// chunk order. Against the interpreter at sizes 1 to 10^6+3 (f32, f64), under the host's policy
// and a forced one; the first extreme's gradient among ties; bit-identical results when called
// twice and under 1, 2 and 8 oneTBB threads; the schedule note in `explain`.
#include "SplitReduction.h"

#include "einjit/einjit.h"

#include <doctest/doctest.h>

#if EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#endif

using namespace einjit::test;

namespace {

const std::vector<std::int64_t> kSizes = {1, 7, 33, 257, 1000003};

} // namespace

TEST_CASE("reduce: split reductions equal the interpreter, host policy, sizes 1 to 10^6+3") {
  const int split = compareSplitCases(Device::cpu(), kSizes);
  // Every case splits at 10^6+3 (f64 and f32), none at the small sizes.
  int large = 0;
  for (const SplitCase& c : splitCases()) large += c.large ? 1 : 0;
  CHECK(split == 2 * large);
}

TEST_CASE("reduce: split reductions equal the interpreter, forced into tiny uneven chunks") {
  ForcedSplit forced(tinySplitPolicy(false));
  const int split = compareSplitCases(Device::cpu(), {1, 7, 33, 257});
  // Sizes 7, 33 and 257 split in every case, f64 and f32 (size 1 only where the reduction has
  // more than one iteration).
  CHECK(split >= static_cast<int>(splitCases().size()) * 3 * 2);
}

TEST_CASE("reduce: forced split reductions on every interpreter-table and gradient-table program") {
  ForcedSplit forced(tinySplitPolicy(false));
  compareInterpreterTable(Device::cpu());
  CHECK(compareGradTable(Device::cpu()) >= 40);
}

TEST_CASE("reduce: the (max)/(min) gradient lands on the first extreme among many ties") {
  for (DType dt : {DType::f64, DType::f32}) {
    checkFirstExtremeGradient(Device::cpu(), 1000003, dt);
    ForcedSplit forced(tinySplitPolicy(false));
    for (std::int64_t n : {1, 7, 33, 257}) checkFirstExtremeGradient(Device::cpu(), n, dt);
  }
  // The gradient program's statements are split reductions at this size.
  Kernel ref = einjit::compile("(max) m := x[i]", on(Device::reference(), DType::f32));
  Kernel g = einjit::compile(ref.gradient().source(), on(Device::cpu(), DType::f32));
  std::string text = g.explain({ties(1000003, 1).to(DType::f32), 1.5});
  CAPTURE(text);
  CHECK(text.find("# statement 1: split reduction") != std::string::npos);
  CHECK(text.find("# statement 2: split reduction") != std::string::npos);
}

TEST_CASE("reduce: bit-identical results called twice and under 1, 2 and 8 oneTBB threads") {
  const std::int64_t n = 1000003;
  int checked = 0;
  for (const SplitCase& c : splitCases()) {
    if (!c.large) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(c.program << " " << einjit::dtypeName(dt));
      Kernel k = einjit::compile(c.program, on(Device::cpu(), dt));
      std::vector<Arg> args;
      for (const Arg& a : c.args(n)) args.push_back(converted(a.tensor(), dt));
      CHECK(splits(k, args));
      const std::vector<unsigned char> first = rerunBits(k, args);
#if EINJIT_HAVE_TBB
      for (int threads : {1, 2, 8}) {
        CAPTURE(threads);
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                  static_cast<std::size_t>(threads));
        tbb::task_arena arena(threads);
        std::vector<unsigned char> got;
        arena.execute([&] { got = rerunBits(k, args); });
        CHECK(got == first);
      }
#endif
      ++checked;
    }
  }
  CHECK(checked >= 28);
}

TEST_CASE("reduce: explain shows the split schedule, not for many outputs or short reductions") {
  Kernel dot = einjit::compile("s := x[i] * y[i]", on(Device::cpu(), DType::f32));
  Tensor x = Tensor::random({1000000}, DType::f32, 1);
  std::string text = dot.explain({x, x.clone()});
  CAPTURE(text);
  CHECK(text.find("# statement 1: split reduction: 61 chunks of 16394 iterations of (i), in "
                  "parallel, partials combined in chunk order") != std::string::npos);
  CHECK(text.find("parallel for split.c in 0:61") != std::string::npos);
  // Few rows, long rows: the rows' prefix is flattened with the columns.
  Kernel rows = einjit::compile("s := A[i,j] ^ 2", on(Device::cpu(), DType::f32));
  std::string t2 = rows.explain({Tensor::random({2, 500000}, DType::f32, 2)});
  CAPTURE(t2);
  CHECK(t2.find("split reduction: 61 chunks of 16394 iterations of (i,j)") != std::string::npos);
  // A short reduction runs as before, and so does a statement with many output elements.
  CHECK(dot.explain({Tensor::random({1000}, DType::f32, 3), Tensor::random({1000}, DType::f32, 4)})
            .find("split reduction") == std::string::npos);
  Kernel mv = einjit::compile("y[i] := A[i,j] * x[j]", on(Device::cpu(), DType::f32));
  CHECK(mv.explain(
              {Tensor::random({512, 4096}, DType::f32, 5), Tensor::random({4096}, DType::f32, 6)})
            .find("split reduction") == std::string::npos);
  // A scatter's output elements are not independent: not split.
  Kernel scatter = einjit::compile("y[t[i]] += A[i,j]", on(Device::cpu(), DType::f32));
  CHECK(scatter
            .explain({Tensor::zeros({4}, DType::f32), Tensor::fromValues({2}, {1, 1}, DType::i64),
                      Tensor::random({2, 100000}, DType::f32, 8)})
            .find("split reduction") == std::string::npos);
}
