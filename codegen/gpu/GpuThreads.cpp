// GPU statements without a tile: a thread per output element, scatters (atomic, widened bf16).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

std::string Lowerer::beginWideScatter(const Statement& st, const BoundStatement& bs,
                                      const Ranges& r, const std::string& base) {
  const auto t = static_cast<std::size_t>(st.output);
  const std::string wide = base + ".wide";
  out_.scratch.push_back(
      {wide, Type::f32, spanElements(b_.tensors[t].shape, ctx_.buffers.strides[t])});
  eachTouched(st, bs, r, base + "_widen", [&](const Expr& off) {
    return ir::store(wide, off,
                     ir::cast(Type::f32, ir::load(Type::bf16, bufferName(st.output), off)));
  });
  return wide;
}

void Lowerer::endWideScatter(const Statement& st, const BoundStatement& bs, const Ranges& r,
                             const std::string& base) {
  eachTouched(st, bs, r, base + "_narrow", [&](const Expr& off) {
    return ir::store(bufferName(st.output), off,
                     ir::cast(Type::bf16, ir::load(Type::f32, ctx_.wide, off)));
  });
}

void Lowerer::eachTouched(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          const std::string& name, const std::function<Stmt(const Expr&)>& body) {
  const auto t = static_cast<std::size_t>(st.output);
  std::int64_t count = 1;
  for (std::int64_t e : b_.tensors[t].shape) count *= e;
  if (extentOfGroup(outputIndices(st), r) >= count) return eachElement(st.output, name, body);
  eachOutputPoint(st, bs, r, name, [&]() -> Stmt {
    Expr inside;
    bool dropped = false;
    Expr off = offset(*st.lhs, &inside, &dropped);
    if (dropped) return nullptr;
    return inside ? ir::ifThen(inside, body(off)) : body(off);
  });
}

void Lowerer::eachElement(int t, const std::string& name,
                          const std::function<Stmt(const Expr&)>& body) {
  const auto& shape = b_.tensors[static_cast<std::size_t>(t)].shape;
  const auto& str = ctx_.buffers.strides[static_cast<std::size_t>(t)];
  std::int64_t count = 1;
  for (std::int64_t e : shape) count *= e;
  if (count == 0) return;
  const std::int64_t block = target_.gpuBlock;
  Expr e = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(block)), ir::var("gpu.thread"));
  Expr off = ir::intImm(0), rest = e;
  for (std::size_t d = shape.size(); d-- > 0;) {
    off = ir::add(off,
                  ir::mul(ir::binary(BinOp::Mod, rest, ir::intImm(shape[d])), ir::intImm(str[d])));
    rest = ir::binary(BinOp::Div, rest, ir::intImm(shape[d]));
  }
  ir::Func f = newFunc(name);
  f.body = blockLaunch(ir::ifThen(ir::binary(BinOp::Lt, e, ir::intImm(count)), body(off)),
                       (count + block - 1) / block, block);
  out_.funcs.push_back(std::move(f));
}

void Lowerer::emitGpuGeneric(const Statement& st, const BoundStatement& bs, const Ranges& r,
                             const std::string& name) {
  eachOutputPoint(st, bs, r, name, [&] { return elementBodies(st, bs, r, false); });
}

void Lowerer::eachOutputPoint(const Statement& st, const BoundStatement& bs, const Ranges& r,
                              const std::string& name, const std::function<Stmt()>& body) {
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(st.output)];
  std::size_t fast = nOut ? nOut - 1 : 0;
  for (std::size_t d = 0; d < st.lhs->subs.size(); ++d)
    for (std::size_t v = 0; v < nOut; ++v)
      if (st.lhs->subs[d].coef[v] != 0 && os[d] == 1 && r[v].second - r[v].first > 1) fast = v;
  std::vector<std::size_t> order; // the fastest last
  for (std::size_t v = 0; v < nOut; ++v)
    if (v != fast) order.push_back(v);
  if (nOut) order.push_back(fast);
  f.body = threadPerPoint(order, r, [&](Expr& guard) {
    for (std::size_t v = 0; v < nOut; ++v) {
      if (!bs.dependent[v]) continue;
      guard = both(guard, ir::binary(BinOp::Ge, varExpr_[v], boundExpr(bs.loBound[v])));
      guard = both(guard, ir::binary(BinOp::Lt, varExpr_[v], boundExpr(bs.hiBound[v])));
    }
    return body();
  });
  if (f.body) out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
