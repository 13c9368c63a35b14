// The GPU statement plan's family and index groups, without lowering (part of test_cuda_schedule):
// codegen::planGpuStatement decides the whole plan (schedule/GpuStatementPlan.h) from the
// statement's facts before anything is emitted. Per row: the family, each tile's function and
// groups (I x J over K, batch B, the dependent indices each side masks, the indices of one
// value), its box where it is a core, the layout copies; then lowering the same call must carry
// out that plan: its note starts with the plan's and it emits a function per planned tile.
#include "Compare.h"
#include "CudaCompile.h"
#include "CudaTestSupport.h"

#include "codegen/Lower.h"
#include "codegen/schedule/GpuStatementPlan.h"
#include "runtime/CallLayout.h"
#include "runtime/CudaBackend.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace einjit::test;

namespace {

using Family = einjit::codegen::GpuStatementPlan::Family;

// A tile's groups as names: "i x k over j", with "; batch b", "; masked L a,b / R h,w" and
// "; pinned a,b" where they are not empty, "; tensor cores" where it runs on them.
std::string groupsOf(const einjit::codegen::GpuTilePart& t) {
  auto names = [&](const std::vector<std::size_t>& g) {
    std::string s;
    for (std::size_t v : g) s += (s.empty() ? "" : ",") + t.st.vars[v].name;
    return s;
  };
  const auto& g = t.groups;
  std::string s = names(g.I) + " x " + names(g.J) + " over " + names(g.K);
  if (!g.B.empty()) s += "; batch " + names(g.B);
  if (!g.maskL.empty() || !g.maskR.empty())
    s += "; masked L " + names(g.maskL) + " / R " + names(g.maskR);
  std::vector<std::size_t> pinned;
  for (std::size_t v = 0; v < g.pinned.size(); ++v)
    if (g.pinned[v]) pinned.push_back(v);
  if (!pinned.empty()) s += "; pinned " + names(pinned);
  if (g.mma) s += "; tensor cores";
  return s;
}

} // namespace

TEST_CASE("cuda: each GPU family's plan and index groups, without lowering, as lowering runs it") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    DType dtype;
    int arch;
    Family family;
    std::vector<std::string> tiles;                     // each planned tile: "function: groups"
    std::string copies;                                 // the layout copies' tensors ("": none)
    std::pair<std::int64_t, std::int64_t> coreOf{0, 0}; // CoreBorder: the core's range of `u`
  };
  const char* strided = "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:29, v in 0:29, "
                        "h in max(0, cdiv(u-2, 2)):min(14, fdiv(u, 2)+1), w in max(0, "
                        "cdiv(v-2, 2)):min(14, fdiv(v, 2)+1)";
  const std::vector<Row> rows = {
      // plain SIMT tile
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {512, 512}}, {"B", {512, 512}}},
       DType::f32,
       90,
       Family::Tile,
       {"s0: i x k over j"},
       ""},
      // tensor cores (mma.sync on sm_80)
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {1024, 1024}}, {"B", {1024, 1024}}},
       DType::bf16,
       80,
       Family::Tile,
       {"s0: i x k over j; tensor cores"},
       ""},
      // a 1x1 convolution: its filter's a, b of one value leave the groups
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {8, 64, 32, 32}}, {"k", {64, 64, 1, 1}}},
       DType::f32,
       90,
       Family::Tile,
       {"s0: o x n,h,w over c; pinned a,b"},
       ""},
      // a stride-1 input gradient: the filter taps' dependent ranges masked on dy's side (they
      // read only u, v of its group), the reduction run with o last (whole slices per tap)
      {"dx[n,c,u,v] := dy[n,o,u-a,v-b] * k[o,c,a,b] where u in 0:32, v in 0:32, "
       "a in max(0, u-29):min(3, u+1), b in max(0, v-29):min(3, v+1)",
       {{"dy", {8, 64, 30, 30}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       Family::Tile,
       {"s0: c x n,u,v over a,b,o; masked L  / R a,b"},
       ""},
      // batch-fast tensors: the tile over batch-outermost copies
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
       {{"A", {256, 128, 8}}, {"B", {8, 256, 128}}},
       DType::f32,
       90,
       Family::Tile,
       {"s0: i x k over j; batch b"},
       "A, C"},
      // a bf16 convolution over channel-fast copies, the channel run last (wgmma on sm_90)
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {8, 64, 30, 30}}, {"k", {64, 64, 3, 3}}},
       DType::bf16,
       90,
       Family::Tile,
       {"s0: o x n,h,w over a,b,c; tensor cores"},
       "x, k"},
      // a strided input gradient: four residue phases, each a masked tile
      {strided,
       {{"dy", {8, 64, 14, 14}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       Family::Phases,
       {"s0_phase00: c x n,u,v over h,w,o; masked L  / R h,w",
        "s0_phase10: c x n,u,v over h,w,o; masked L  / R h,w",
        "s0_phase01: c x n,u,v over h,w,o; masked L  / R h,w",
        "s0_phase11: c x n,u,v over h,w,o; masked L  / R h,w"},
       ""},
      // a band whose ranges fill a quarter of their hull (no masked tile) and are whole for
      // u in 24:41: that core is a tile, its borders threads
      {"y[i,u] := A[i,a] * B[u,a] where u in 0:256, a in max(0, u-40):min(64, u+40)",
       {{"A", {256, 64}}, {"B", {256, 64}}},
       DType::f32,
       90,
       Family::CoreBorder,
       {"s0_core: i x u over a"},
       "",
       {24, 41}},
  };
  for (const Row& r : rows) {
    const std::string program = r.program;
    CAPTURE(program);
    CAPTURE(r.arch);
    Kernel k = einjit::compile(r.program, on(Device::cuda(), r.dtype));
    const auto& p = k.program();
    std::map<std::string, Tensor> in;
    std::vector<einjit::dsl::ArgSpec> specs;
    std::vector<std::vector<std::int64_t>> strides;
    for (int id : p.arguments) {
      const auto& t = p.tensors[static_cast<std::size_t>(id)];
      in[t.name] = Tensor::random(r.shapes.at(t.name), r.dtype, 1);
      specs.push_back({in[t.name].dtype(), in[t.name].shape()});
      strides.push_back(in[t.name].strides());
    }
    const auto bound = einjit::dsl::bind(p, specs, {}, r.dtype);
    const auto plan = einjit::codegen::planGpuStatement(
        p, bound, einjit::runtime::callStrides(p, bound, strides),
        einjit::runtime::cudaTarget(r.arch), 0, einjit::codegen::Aligned16(p.tensors.size(), true));
    CAPTURE(describe(plan));
    CHECK(plan.family == r.family);
    std::vector<std::string> tiles;
    for (const auto& t : plan.tiles) tiles.push_back(t.name + ": " + groupsOf(t));
    CHECK(tiles == r.tiles);
    CHECK((plan.relayout ? plan.relayout->tensors : std::string()) == r.copies);
    if (r.family == Family::CoreBorder) {
      REQUIRE(plan.tiles.size() == 1);
      const auto& core = plan.tiles[0];
      CHECK(core.r[1] == r.coreOf);
      CHECK(core.r[0] == std::pair<std::int64_t, std::int64_t>{0, 256}); // i: whole
      CHECK(!core.bs.dependent[2]);                                      // a: its hull
    }
    // Lowering carries this plan out: the note is the plan's (the phases' launches merged
    // afterwards, where they are), and each planned tile is a function of its own.
    const auto cp = cudaFor(k, in, {}, r.dtype, r.arch);
    const std::string lowered = cp.lowered.notes.at(0);
    CAPTURE(lowered);
    const std::string merged = "; the phases in one launch";
    std::string note = lowered;
    const bool oneLaunch = note.find(merged) != std::string::npos;
    if (oneLaunch) note.erase(note.find(merged), merged.size());
    CHECK(note.rfind(describe(plan), 0) == 0);
    std::vector<std::string> funcs;
    for (const auto& f : cp.lowered.funcs) funcs.push_back(f.name);
    for (const auto& t : plan.tiles) {
      // Merged residue phases run as one function, named after the statement's phases.
      const std::string name = oneLaunch ? "s0_phases" : t.name;
      CHECK(std::find(funcs.begin(), funcs.end(), name) != funcs.end());
    }
  }
}
