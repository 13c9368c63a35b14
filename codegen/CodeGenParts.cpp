#include "codegen/CodeGenParts.h"

#include "codegen/CodeGenLLVM.h"

#include "codegen/IROperator.h"

#include <cstdlib>
#include <cstring>

namespace einjit::codegen {

using namespace ir;

namespace {

// The loads and stores an outlined loop's code writes out (Accesses) before it compiles as a
// module of its own: a module costs a few milliseconds of set-up, which a short copy loop does
// not repay.
constexpr std::size_t kMinPartAccesses = 8;

// Counted as emitted: an unrolled loop's body once per iteration, a vector loop's once per
// vector step (both written out), any other loop's once.
class Accesses : public Visitor {
public:
  std::size_t n = 0;
  void visitLoad(const Load& l) override {
    n += times_;
    Visitor::visitLoad(l);
  }
  void visitStore(const Store& s) override {
    n += times_;
    Visitor::visitStore(s);
  }
  void visitFor(const For& f) override {
    std::int64_t lo = 0, hi = 0;
    std::size_t copies = 1;
    if (isConst(f.lo, &lo) && isConst(f.hi, &hi) && hi > lo) {
      if (f.forKind == ForKind::Unrolled) copies = static_cast<std::size_t>(hi - lo);
      if (f.forKind == ForKind::Vectorized && f.width > 1)
        copies = static_cast<std::size_t>((hi - lo + f.width - 1) / f.width);
    }
    const std::size_t saved = times_;
    times_ *= copies;
    Visitor::visitFor(f);
    times_ = saved;
  }

private:
  std::size_t times_ = 1;
};

// Whether a loop's body holds a register tile of its own: a local buffer allocated directly in
// it (a micro-kernel's accumulators, or an edge tile's), not in a loop nested inside.
bool holdsTile(const For& n) {
  if (n.body->kind == NodeKind::Allocate) return true;
  if (n.body->kind != NodeKind::Block) return false;
  for (const Stmt& s : static_cast<const Block&>(*n.body).stmts)
    if (s->kind == NodeKind::Allocate) return true;
  return false;
}

// The buffers a statement reads and writes.
class Accessed : public Visitor {
public:
  std::set<std::string> read, written;
  void visitLoad(const Load& l) override {
    read.insert(l.buffer);
    Visitor::visitLoad(l);
  }
  void visitStore(const Store& s) override {
    written.insert(s.buffer);
    Visitor::visitStore(s);
  }
};

class VarNames : public Visitor {
public:
  std::set<std::string> names;
  void visitVar(const Var& n) override { names.insert(n.name); }
};

// One step of the way from the function's body to a loop: an enclosing loop, or the branch of
// an if (a local buffer allocated on the way is passed to the part, PartSite::locals).
struct Step {
  const For* loop = nullptr;
  const IfThen* branch = nullptr;
  bool otherwise = false;
};

// A tile loop's part body (PartSite::body) and the enclosing loops' variables it takes.
void tileBody(PartSite& site, const std::vector<Step>& way) {
  const For& n = *site.loop;
  Stmt s = forLoop(n.var, n.lo, n.hi, n.forKind, n.body, n.width); // a node of its own
  std::vector<std::string> passed;
  for (auto it = way.rbegin(); it != way.rend(); ++it) {
    if (it->branch) {
      s = ifThen(it->otherwise ? unary(UnOp::Not, it->branch->cond) : it->branch->cond, s);
      continue;
    }
    const For& l = *it->loop;
    std::int64_t lo = 0, hi = 0;
    const bool constant = isConst(l.lo, &lo) && isConst(l.hi, &hi);
    if (constant ? hi == lo + 1 : print(l.hi) == print(add(l.lo, intImm(1)))) { // a binding
      s = forLoop(l.var, l.lo, l.hi, ForKind::Serial, s);
      continue;
    }
    const Expr at = var(atName(l.var));
    s = ifThen(binary(BinOp::And, le(l.lo, at), lt(at, l.hi)),
               forLoop(l.var, at, add(at, intImm(1)), ForKind::Serial, s));
    passed.push_back(l.var);
  }
  VarNames used;
  used.visit(s);
  for (auto it = passed.rbegin(); it != passed.rend(); ++it)
    if (used.names.count(atName(*it))) site.passed.push_back(*it);
  site.body = s;
}

// The finder: counts each loop node's places in the tree, then walks it in emission order.
class PartFinder {
public:
  std::vector<PartSite> sites;
  PartFinder(const Stmt& body, bool tiles) : tiles_(tiles) {
    count(body);
    walk(body, false);
    // A single tile loop stays in its caller's module: apart, it would compile alone all the
    // same, after the caller's.
    // An edge tile's copy compiles apart only from a single tile loop: several are parts of
    // their own already, each with its copies.
    std::size_t tileLoops = 0;
    for (bool t : tile_) tileLoops += t;
    for (std::size_t k = sites.size(); k-- > 0;)
      if (tileLoops < 2 ? tile_[k] : sites[k].edge)
        sites.erase(sites.begin() + static_cast<std::ptrdiff_t>(k));
  }

private:
  bool tiles_;
  bool inTile_ = false;
  // Inside an outlined loop (a function of its own, whose way from the body starts there): no
  // tile loops.
  bool inOutlined_ = false;
  // Inside a tile loop (a site or not): the buffers allocated in it (an edge copy reads one).
  bool inTileLoop_ = false;
  bool inEdge_ = false;
  std::set<std::string> tileLocals_;
  std::vector<bool> tile_; // by site: a tile loop (else an outlined loop)
  std::map<const For*, int> uses_;
  std::map<std::string, Type> locals_;
  std::set<std::string> vars_;
  std::vector<Step> way_; // from the body to the node being walked

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
      way_.push_back({nullptr, &n, false});
      walk(n.then, repeated);
      way_.back().otherwise = true;
      if (n.otherwise) walk(n.otherwise, repeated);
      way_.pop_back();
      return;
    }
    case NodeKind::Allocate: {
      const auto& n = static_cast<const Allocate&>(*s);
      locals_[n.buffer] = n.elem;
      if (inTileLoop_) tileLocals_.insert(n.buffer);
      walk(n.body, repeated);
      locals_.erase(n.buffer);
      tileLocals_.erase(n.buffer);
      return;
    }
    case NodeKind::For: {
      const auto& n = static_cast<const For&>(*s);
      const bool tileLoop =
          tiles_ && !inTileLoop_ && !inOutlined_ && n.forKind == ForKind::Serial && holdsTile(n);
      const bool tile = tileLoop && !inTile_;
      bool tileSite = false;
      bool edgeSite = false;
      if (inTileLoop_ && !inEdge_ && !inOutlined_ && n.forKind == ForKind::Rolled && !repeated &&
          uses_[&n] == 1 && edgeParts()) {
        Accessed a;
        a.visit(n.body);
        bool readsTile = false, writesLocal = false;
        for (const std::string& b : a.read) readsTile = readsTile || tileLocals_.count(b) > 0;
        for (const std::string& b : a.written) writesLocal = writesLocal || locals_.count(b) > 0;
        if (readsTile && !writesLocal) {
          sites.push_back({&n, locals_, vars_, nullptr, {}, true});
          tile_.push_back(false);
          edgeSite = true;
        }
      }
      if ((n.forKind == ForKind::Outlined || tile) && !repeated && uses_[&n] == 1) {
        Accesses a;
        a.visit(n.body);
        if (a.n >= kMinPartAccesses) {
          sites.push_back({&n, locals_, vars_, nullptr, {}});
          tile_.push_back(n.forKind != ForKind::Outlined);
          tileSite = n.forKind != ForKind::Outlined;
          if (tileSite) tileBody(sites.back(), way_);
        }
      }
      vars_.insert(n.var);
      const bool savedInTile = inTile_, savedInOutlined = inOutlined_;
      const bool savedInTileLoop = inTileLoop_, savedInEdge = inEdge_;
      inTile_ = inTile_ || tileSite;
      inOutlined_ = inOutlined_ || n.forKind == ForKind::Outlined;
      inTileLoop_ = inTileLoop_ || tileLoop;
      inEdge_ = inEdge_ || edgeSite;
      way_.push_back({&n, nullptr, false});
      walk(n.body, repeated || n.forKind == ForKind::Unrolled || n.forKind == ForKind::Vectorized);
      way_.pop_back();
      inTile_ = savedInTile;
      inOutlined_ = savedInOutlined;
      inTileLoop_ = savedInTileLoop;
      inEdge_ = savedInEdge;
      vars_.erase(n.var);
      return;
    }
    default: return;
    }
  }
};

} // namespace

std::string atName(const std::string& var) { return var + ".at"; }

bool edgeParts() {
  static const bool on = [] {
    const char* e = std::getenv("EINJIT_JIT_EDGE_PARTS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

std::vector<PartSite> findParts(const Stmt& body, bool tiles) {
  return PartFinder(body, tiles).sites;
}

} // namespace einjit::codegen
