#include "codegen/CodeGenParts.h"

namespace einjit::codegen {

using namespace ir;

namespace {

// The loads and stores an outlined loop needs before it compiles as a module of its own: a
// module costs a few milliseconds of set-up, which a short copy loop does not repay.
constexpr std::size_t kMinPartAccesses = 8;

class Accesses : public Visitor {
public:
  std::size_t n = 0;
  void visitLoad(const Load& l) override {
    ++n;
    Visitor::visitLoad(l);
  }
  void visitStore(const Store& s) override {
    ++n;
    Visitor::visitStore(s);
  }
};

// The finder: counts each loop node's places in the tree, then walks it in emission order.
class PartFinder {
public:
  std::vector<PartSite> sites;
  explicit PartFinder(const Stmt& body) {
    count(body);
    walk(body, false);
  }

private:
  std::map<const For*, int> uses_;
  std::map<std::string, Type> locals_;
  std::set<std::string> vars_;

  void count(const Stmt& s) {
    switch (s->kind) {
    case NodeKind::Block:
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) count(x);
      return;
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      count(n.then);
      if (n.otherwise) count(n.otherwise);
      return;
    }
    case NodeKind::Allocate: count(static_cast<const Allocate&>(*s).body); return;
    case NodeKind::For: {
      const auto& n = static_cast<const For&>(*s);
      ++uses_[&n];
      count(n.body);
      return;
    }
    default: return;
    }
  }

  void walk(const Stmt& s, bool repeated) {
    switch (s->kind) {
    case NodeKind::Block:
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) walk(x, repeated);
      return;
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      walk(n.then, repeated);
      if (n.otherwise) walk(n.otherwise, repeated);
      return;
    }
    case NodeKind::Allocate: {
      const auto& n = static_cast<const Allocate&>(*s);
      locals_[n.buffer] = n.elem;
      walk(n.body, repeated);
      locals_.erase(n.buffer);
      return;
    }
    case NodeKind::For: {
      const auto& n = static_cast<const For&>(*s);
      if (n.forKind == ForKind::Outlined && !repeated && uses_[&n] == 1) {
        Accesses a;
        a.visit(n.body);
        if (a.n >= kMinPartAccesses) sites.push_back({&n, locals_, vars_});
      }
      vars_.insert(n.var);
      walk(n.body, repeated || n.forKind == ForKind::Unrolled || n.forKind == ForKind::Vectorized);
      vars_.erase(n.var);
      return;
    }
    default: return;
    }
  }
};

} // namespace

std::vector<PartSite> findParts(const Stmt& body) { return PartFinder(body).sites; }

} // namespace einjit::codegen
