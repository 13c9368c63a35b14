#include "Inputs.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace einjit::cli {

namespace {

// Valid values for an index tensor: [0, extent) of the first dimension it gathers into.
std::int64_t gatherExtent(const dsl::Program& prog, int indexTensor,
                          const std::map<std::string, Shape>& shapes) {
  std::int64_t best = -1;
  std::function<void(const dsl::CExpr&)> walk = [&](const dsl::CExpr& e) {
    if (e.kind == dsl::CKind::Read) {
      for (std::size_t d = 0; d < e.subs.size(); ++d) {
        const auto& s = e.subs[d];
        if (!s.gather) continue;
        if (s.gather->tensor == indexTensor && best < 0) {
          auto it = shapes.find(prog.tensors[static_cast<std::size_t>(e.tensor)].name);
          if (it != shapes.end() && d < it->second.size()) best = it->second[d];
        }
        walk(*s.gather);
      }
    }
    for (const auto& a : e.args) walk(*a);
  };
  for (const auto& st : prog.stmts) walk(*st.rhs);
  return best;
}

} // namespace

std::vector<Arg> Inputs::positional() const {
  std::vector<Arg> call;
  for (const Tensor& t : tensors) call.emplace_back(t);
  for (double s : scalars) call.emplace_back(s);
  return call;
}

// Random tensors for every argument (index tensors get valid indices) and the scalars.
Inputs makeInputs(const dsl::Program& prog, const Arguments& args) {
  Inputs in;
  for (std::size_t i = 0; i < prog.arguments.size(); ++i) {
    int id = prog.arguments[i];
    const auto& info = prog.tensors[static_cast<std::size_t>(id)];
    auto it = args.shapes.find(info.name);
    if (it == args.shapes.end())
      dsl::fail(*prog.source, info.firstUse, "missing --shape " + info.name + "=...");
    std::uint64_t seed = args.seed * 1000003u + i;
    if (info.readAsIndex) {
      std::int64_t hi = gatherExtent(prog, id, args.shapes);
      in.tensors.push_back(Tensor::randomInt(it->second, 0, hi > 0 ? hi : 1, DType::i64, seed));
    } else {
      in.tensors.push_back(Tensor::random(it->second, args.dtype, seed));
    }
  }
  for (const auto& prm : prog.params) {
    auto it = args.scalars.find(prm.name);
    if (it == args.scalars.end())
      dsl::fail(*prog.source, prm.firstUse, "missing --scalar " + prm.name + "=...",
                dsl::parameterNotes(prog, static_cast<int>(&prm - prog.params.data())));
    in.scalars.push_back(it->second);
  }
  for (const auto& [name, s] : args.shapes)
    if (prog.findTensor(name) < 0 ||
        !prog.tensors[static_cast<std::size_t>(prog.findTensor(name))].isArgument)
      throw Error("--shape " + name + ": the program has no tensor argument named '" + name + "'");
  return in;
}

std::vector<dsl::ArgSpec> specsOf(const std::vector<Tensor>& ts) {
  std::vector<dsl::ArgSpec> specs;
  for (const Tensor& t : ts) specs.push_back({t.dtype(), t.shape()});
  return specs;
}

double relativeError(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  std::vector<double> va = a.toVector(), vb = b.toVector();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) != std::isnan(vb[i])) return INFINITY;
    if (std::isnan(va[i])) continue;
    den = std::max(den, std::fabs(vb[i]));
    if (va[i] != vb[i]) num = std::max(num, std::fabs(va[i] - vb[i]));
  }
  return num == 0 ? 0 : num / std::max(den, 1e-300);
}

double toleranceFor(DType t) { return t == DType::f64 ? 1e-10 : t == DType::bf16 ? 1e-2 : 1e-4; }

} // namespace einjit::cli
