#include "codegen/schedule/GpuAccess.h"

#include <cstdlib>
#include <functional>

namespace einjit::codegen::gpuschedule {

using namespace einjit::dsl;

ir::Type GpuTileContext::elemType(int t) const {
  return irType(binding->tensors[static_cast<std::size_t>(t)].dtype);
}

ir::Type GpuTileContext::valueType() const { return irType(computeDType(binding->dtype)); }

std::string groupNames(const Statement& st, const std::vector<std::size_t>& group) {
  std::string t;
  for (std::size_t v : group) t += (t.empty() ? "" : ",") + st.vars[v].name;
  return t.empty() ? std::string("-") : t;
}

std::int64_t groupExtent(const std::vector<std::size_t>& group, const Box& r) {
  std::int64_t n = 1;
  for (std::size_t v : group) n *= r[v].second - r[v].first;
  return n;
}

void flattenProduct(const CExpr& e, std::vector<const CExpr*>& out) {
  if (e.kind == CKind::Binary && e.binop == dsl::BinOp::Mul) {
    flattenProduct(*e.args[0], out);
    flattenProduct(*e.args[1], out);
  } else {
    out.push_back(&e);
  }
}

bool unitAlong(const GpuBuffers& buffers, const CExpr& e, std::size_t v) {
  if (e.kind == CKind::Read && !e.subs.empty()) {
    std::int64_t c = 0;
    const auto& stv = buffers.strides[static_cast<std::size_t>(e.tensor)];
    bool affine = true;
    for (std::size_t d = 0; d < e.subs.size(); ++d) {
      if (e.subs[d].coef[v] == 0) continue;
      if (e.subs[d].gather || e.subs[d].mode == IndexMode::Wrap) affine = false;
      c += e.subs[d].coef[v] * stv[d];
    }
    if (affine && c == 1) return true;
  }
  for (const auto& a : e.args)
    if (unitAlong(buffers, *a, v)) return true;
  return false;
}

bool unitAlongAny(const GpuBuffers& buffers, const std::vector<const CExpr*>& fs,
                  const std::vector<std::size_t>& K) {
  if (K.empty()) return false;
  for (const CExpr* f : fs)
    if (unitAlong(buffers, *f, K.back())) return true;
  return false;
}

int vectorRead(const GpuTileContext& c, const std::vector<const CExpr*>& fs,
               const std::vector<std::size_t>& along, const Box& r, ir::Type elem,
               bool trustPlain) {
  if (along.empty()) return 0;
  if (fs.size() != 1 || fs[0]->kind != CKind::Read || fs[0]->subs.empty()) return 0;
  const CExpr& f = *fs[0];
  const auto t = static_cast<std::size_t>(f.tensor);
  if (t >= c.buffers.aligned.size() || !c.buffers.aligned[t] || c.elemType(f.tensor) != elem)
    return 0;
  const std::int64_t vec = 16 / ir::typeBytes(elem);
  const auto& stv = c.buffers.strides[t];
  const std::vector<IndexInterval> vars = boxIntervals(r);
  std::vector<std::int64_t> coef(r.size(), 0);
  std::int64_t first = 0;
  for (std::size_t d = 0; d < f.subs.size(); ++d) {
    const Subscript& sub = f.subs[d];
    if (sub.gather) return 0;
    if (!subscriptInside(*c.program, *c.binding, vars, f, d) &&
        !(trustPlain && sub.mode == IndexMode::Plain))
      return 0;
    const std::int64_t k = c.binding->eval(*c.program, sub.constant);
    first += k * stv[d];
    for (std::size_t v = 0; v < r.size() && v < sub.coef.size(); ++v)
      coef[v] += sub.coef[v] * stv[d];
  }
  if (coef[along.back()] != 1) return 0;
  std::vector<bool> inRun(r.size(), false);
  std::int64_t run = 1;
  for (std::size_t q = along.size(); q-- > 0;) {
    const std::size_t v = along[q];
    if (coef[v] != run) break;
    inRun[v] = true;
    run *= r[v].second - r[v].first;
  }
  if (run % vec != 0) return 0;
  for (std::size_t v = 0; v < r.size(); ++v) {
    first += coef[v] * r[v].first;
    if (!inRun[v] && r[v].second - r[v].first > 1 && coef[v] % vec != 0) return 0;
  }
  return first % vec == 0 ? static_cast<int>(vec) : 0;
}

bool separableRead(const GpuTileContext& c, const std::vector<const CExpr*>& fs, const Box& r) {
  if (fs.size() != 1 || fs[0]->kind != CKind::Read || fs[0]->subs.empty()) return false;
  const CExpr& f = *fs[0];
  const auto t = static_cast<std::size_t>(f.tensor);
  const std::vector<IndexInterval> vars = boxIntervals(r);
  std::int64_t span = 1;
  for (std::size_t d = 0; d < f.subs.size(); ++d) {
    const Subscript& sub = f.subs[d];
    if (sub.gather) return false;
    if (!subscriptInside(*c.program, *c.binding, vars, f, d)) return false;
    span += (c.binding->tensors[t].shape[d] - 1) * std::abs(c.buffers.strides[t][d]);
  }
  return span < (std::int64_t{1} << 31);
}

bool provenInside(const GpuTileContext& c, const std::vector<const CExpr*>& fs, const Box& r) {
  const std::vector<IndexInterval> vars = boxIntervals(r);
  std::function<bool(const CExpr&)> ok = [&](const CExpr& e) {
    if (e.kind == CKind::Read)
      for (std::size_t d = 0; d < e.subs.size(); ++d) {
        if (e.subs[d].mode != IndexMode::Plain) continue;
        if (!subscriptInside(*c.program, *c.binding, vars, e, d)) return false;
      }
    for (const auto& a : e.args)
      if (!ok(*a)) return false;
    return true;
  };
  for (const CExpr* f : fs)
    if (!ok(*f)) return false;
  return true;
}

bool outputWritable(const GpuTileContext& c, const Statement& st) {
  // A dimension of extent 0 drops the store unless a plain subscript into one keeps its check.
  const auto& shape = c.binding->tensors[static_cast<std::size_t>(st.output)].shape;
  bool dropped = false, checked = false;
  for (std::size_t d = 0; d < st.lhs->subs.size(); ++d) {
    if (shape[d] != 0) continue;
    dropped = true;
    checked = checked || st.lhs->subs[d].mode == IndexMode::Plain;
  }
  return !dropped || checked;
}

} // namespace einjit::codegen::gpuschedule
