// The loop-nest IR as text: `einjit explain --ir`, test expectations, and the kernel cache key.
#include "codegen/IR.h"

#include "dsl/Printer.h"

#include <sstream>

namespace einjit::codegen::ir {

namespace {

std::string number(double v) { return dsl::formatNumber(v, false); }

class Printer {
public:
  std::string expr(const Expr& e) {
    switch (e->kind) {
    case NodeKind::IntImm: return std::to_string(static_cast<const IntImm&>(*e).value);
    case NodeKind::FloatImm: {
      std::string s = number(static_cast<const FloatImm&>(*e).value);
      return e->type == Type::f32 ? s + "f" : s;
    }
    case NodeKind::Var: return static_cast<const Var&>(*e).name;
    case NodeKind::Param:
      return "param" + std::to_string(static_cast<const Param&>(*e).index) + ":" +
             std::string(typeName(e->type));
    case NodeKind::Load: {
      const auto& n = static_cast<const Load&>(*e);
      std::string s = n.buffer + "[" + expr(n.index) + "]";
      return n.mask ? "(" + s + " where " + expr(n.mask) + ")" : s;
    }
    case NodeKind::Cast: {
      const auto& n = static_cast<const Cast&>(*e);
      return std::string(typeName(n.type)) + "(" + expr(n.value) + ")";
    }
    case NodeKind::Unary: {
      const auto& n = static_cast<const Unary&>(*e);
      return (n.op == UnOp::Neg ? "-" : "!") + expr(n.a);
    }
    case NodeKind::Binary: {
      const auto& n = static_cast<const Binary&>(*e);
      std::string_view op = binOpName(n.op);
      if (std::isalpha(static_cast<unsigned char>(op[0])))
        return std::string(op) + "(" + expr(n.a) + ", " + expr(n.b) + ")";
      return "(" + expr(n.a) + " " + std::string(op) + " " + expr(n.b) + ")";
    }
    case NodeKind::Select: {
      const auto& n = static_cast<const Select&>(*e);
      return "select(" + expr(n.cond) + ", " + expr(n.a) + ", " + expr(n.b) + ")";
    }
    case NodeKind::Call: {
      const auto& n = static_cast<const Call&>(*e);
      std::string s = std::string(dsl::functionName(n.fn)) + "(";
      for (std::size_t i = 0; i < n.args.size(); ++i) s += (i ? ", " : "") + expr(n.args[i]);
      return s + ")";
    }
    case NodeKind::Check: {
      const auto& n = static_cast<const Check&>(*e);
      return "check(" + expr(n.index) + ", " + std::to_string(n.extent) + ")";
    }
    default: return "<stmt>";
    }
  }

  void stmt(const Stmt& s, int indent) {
    std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
    switch (s->kind) {
    case NodeKind::For: {
      const auto& n = static_cast<const For&>(*s);
      out << pad << forKindName(n.forKind) << " " << n.var << " in " << expr(n.lo) << ":"
          << expr(n.hi);
      if (n.forKind == ForKind::Vectorized) out << " x" << n.width;
      out << " {\n";
      stmt(n.body, indent + 1);
      out << pad << "}\n";
      return;
    }
    case NodeKind::Block:
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) stmt(x, indent);
      return;
    case NodeKind::Store: {
      const auto& n = static_cast<const Store&>(*s);
      out << pad << (n.nonTemporal ? "stream " : "") << n.buffer << "[" << expr(n.index)
          << (n.atomicAdd ? "] atomic+= " : "] = ") << expr(n.value) << "\n";
      return;
    }
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      out << pad << "if " << expr(n.cond) << " {\n";
      stmt(n.then, indent + 1);
      if (n.otherwise) {
        out << pad << "} else {\n";
        stmt(n.otherwise, indent + 1);
      }
      out << pad << "}\n";
      return;
    }
    case NodeKind::Allocate: {
      const auto& n = static_cast<const Allocate&>(*s);
      out << pad << (n.shared ? "shared " : "local ") << n.buffer << ": " << typeName(n.elem) << "["
          << n.size << "]\n";
      stmt(n.body, indent);
      return;
    }
    case NodeKind::Barrier:
      out << pad << (static_cast<const Barrier&>(*s).asyncProxy ? "fence.proxy.async; " : "")
          << "barrier\n";
      return;
    case NodeKind::Wgmma: {
      const auto& n = static_cast<const Wgmma&>(*s);
      auto opnd = [&](const WgmmaOperand& o) {
        return o.buffer + "[" + expr(o.base) + " + s*" + std::to_string(o.kStep) + ", lbo " +
               std::to_string(o.lbo) + ", sbo " + std::to_string(o.sbo) +
               (o.swizzle128 ? ", swizzle 128" : "") + (o.kMajor ? ", k-major]" : ", mn-major]");
      };
      out << pad << "wgmma.m64n" << n.n << "k16 x " << n.steps << " " << n.acc << "["
          << expr(n.accBase) << "...] += " << opnd(n.a) << " x " << opnd(n.b)
          << (n.pending ? ", " + std::to_string(n.pending) + " left in flight" : std::string())
          << "\n";
      return;
    }
    case NodeKind::Mma: {
      const auto& n = static_cast<const Mma&>(*s);
      auto opnd = [&](const MmaOperand& o) {
        return o.buffer + "[" + expr(o.base) + " + i*" + std::to_string(o.step) + ", stride " +
               std::to_string(o.stride) + (o.kMajor ? ", k-major]" : "]");
      };
      out << pad << "mma.m16n8k16 x " << n.mt << "x" << n.nt << " " << n.acc << "["
          << expr(n.accBase) << "...] += " << opnd(n.a) << " x " << opnd(n.b) << "\n";
      return;
    }
    case NodeKind::CopyAsync: {
      const auto& n = static_cast<const CopyAsync&>(*s);
      out << pad << "copy.async." << n.bytes << " " << n.dst << "[" << expr(n.dstIndex) << "] <- "
          << (n.cond ? expr(n.cond) + " ? " : std::string()) << n.src << "[" << expr(n.srcIndex)
          << "]" << (n.cond ? " : 0" : "") << "\n";
      return;
    }
    case NodeKind::CopyVector: {
      const auto& n = static_cast<const CopyVector&>(*s);
      out << pad << "copy.vector." << n.bytes << " " << n.dst << "[" << expr(n.dstIndex) << "] <- "
          << n.src << "[" << expr(n.srcIndex) << "]\n";
      return;
    }
    case NodeKind::Evaluate:
      out << pad << "evaluate " << expr(static_cast<const Evaluate&>(*s).value) << "\n";
      return;
    case NodeKind::Prefetch: {
      const auto& n = static_cast<const Prefetch&>(*s);
      out << pad << (n.ahead ? "prefetch.ahead " : "prefetch ") << n.buffer << "["
          << expr(n.index) << "]\n";
      return;
    }
    case NodeKind::AsyncCommit: out << pad << "async.commit\n"; return;
    case NodeKind::AsyncWait:
      out << pad << (static_cast<const AsyncWait&>(*s).products ? "wgmma.wait " : "async.wait ")
          << static_cast<const AsyncWait&>(*s).pending << "\n";
      return;
    default: out << pad << "<expr>\n";
    }
  }

  std::ostringstream out;
};

} // namespace

std::string print(const Expr& e) { return Printer().expr(e); }

std::string print(const Stmt& s, int indent) {
  Printer p;
  p.stmt(s, indent);
  return p.out.str();
}

std::string print(const Func& f) {
  Printer p;
  p.out << "func " << f.name << "(";
  for (std::size_t i = 0; i < f.buffers.size(); ++i)
    p.out << (i ? ", " : "") << f.buffers[i].name << ": " << typeName(f.buffers[i].elem) << "*";
  p.out << ")";
  if (f.parallel)
    p.out << " parallel " << f.parallelLo << ":" << f.parallelHi << " grain " << f.grain;
  p.out << " {\n";
  p.stmt(f.body, 1);
  p.out << "}\n";
  return p.out.str();
}

} // namespace einjit::codegen::ir
