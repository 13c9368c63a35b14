#pragma once
// What the code generators produce for one program and its argument shapes: each statement's
// schedule note and lowered IR for two fixed CPU targets, and the lowered IR and CUDA C for
// sm_90 and sm_80. The targets are fixed (not the host's), so the text is the same on every
// machine: tests/test_golden.cpp compares it with golden files, and tools/dump-generated.sh
// diffs it between commits.
#include "InterpreterTable.h"
#include "RowMajorBinding.h"

#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "runtime/CallLayout.h"
#if EINJIT_HAVE_CUDA
#include "runtime/CudaBackend.h"
#endif

#include <map>
#include <string>
#include <vector>

namespace einjit::test::generated {

using einjit::DType;
using einjit::Shape;
namespace dsl = einjit::dsl;
namespace codegen = einjit::codegen;

using Shapes = std::map<std::string, Shape>;

struct Case {
  std::string program;
  Shapes shapes;
  std::vector<double> params;
  DType dtype;
  bool cpu = true, gpu = true;
};

using einjit::test::rowMajor;

inline codegen::Target cpuTarget(int vectorBytes, int threads, double gatherCost) {
  codegen::Target t;
  t.vectorBytes = vectorBytes;
  t.threads = threads;
  t.gatherCost = gatherCost;
  return t;
}

inline std::string lowered(const codegen::LoweredProgram& l) {
  std::string out;
  for (std::size_t k = 0; k < l.notes.size(); ++k)
    out += "# statement " + std::to_string(k + 1) + ": " + l.notes[k] + "\n";
  for (int id : l.zeroFill) out += "# zero-filled first: " + std::to_string(id) + "\n";
  out += "# checked " + std::to_string(l.checked) + " prechecked " + std::to_string(l.prechecked) +
         " checks " + std::to_string(l.checks) + "\n";
  for (const auto& s : l.scratch)
    out += "# scratch " + s.name + " " + std::to_string(s.elements) + "\n";
  for (const auto& f : l.funcs) out += codegen::ir::print(f);
  return out;
}

// Which backends' code to dump.
enum class Part { all, cpu, cuda };

// Everything generated for one case (or the error it raised: worth keeping stable too).
inline std::string dump(const Case& c, Part part = Part::all) {
  std::string out =
      "program: " + c.program + "\ndtype: " + std::string(einjit::dtypeName(c.dtype)) + "\n";
  for (const auto& [name, shape] : c.shapes)
    out += "shape " + name + ": " + einjit::test::interp::shapeText(shape) + "\n";
  try {
    const dsl::Program p = dsl::check(c.program);
    std::vector<dsl::ArgSpec> args;
    std::vector<std::vector<std::int64_t>> argStrides;
    for (int id : p.arguments) {
      const std::string& name = p.tensors[static_cast<std::size_t>(id)].name;
      const Shape shape = c.shapes.count(name) ? c.shapes.at(name) : Shape{};
      const bool integer = p.tensors[static_cast<std::size_t>(id)].readAsIndex;
      args.push_back({integer ? DType::i64 : c.dtype, shape});
      argStrides.push_back(rowMajor(shape));
    }
    // A gradient's scalar seeds (dy of a scalar output) are parameters after the forward's.
    std::vector<double> params = c.params;
    params.resize(p.params.size(), 1.0);
    const dsl::BoundProgram b = dsl::bind(p, args, params, c.dtype);
    const codegen::Strides strides = einjit::runtime::callStrides(p, b, argStrides);
    if (part != Part::cuda && c.cpu && c.dtype != DType::bf16) {
      out += "\n## cpu: 64-byte vectors, 2 threads, gathers 13\n" +
             lowered(codegen::lower(p, b, strides, cpuTarget(64, 2, 13)));
      out += "\n## cpu: 32-byte vectors, 1 thread, gathers 4\n" +
             lowered(codegen::lower(p, b, strides, cpuTarget(32, 1, 4)));
    }
#if EINJIT_HAVE_CUDA
    if (part != Part::cpu && c.gpu && c.dtype != DType::f64)
      for (int arch : {90, 80}) {
        const codegen::Aligned16 aligned(p.tensors.size(), true);
        const auto cp = einjit::runtime::generateCuda(p, b, strides, aligned, arch);
        out += "\n## cuda sm_" + std::to_string(arch) + "\n" + lowered(cp.lowered);
        for (const auto& k : cp.cuda.kernels)
          out += "# launch " + k.name + ": " + std::to_string(k.grid) + " x " +
                 std::to_string(k.block) + "\n";
        out += cp.cuda.source;
      }
#endif
  } catch (const std::exception& e) {
    out += "error: " + std::string(e.what()) + "\n";
  }
  return out;
}

// The shapes of a gradient program's arguments: the forward's, and dY shaped like Y.
inline Case gradientCase(const Case& fwd, const std::vector<std::string>& wrt) {
  Case g = fwd;
  try {
    const einjit::Kernel k = einjit::compile(fwd.program);
    g.program = k.gradient(wrt).source();
    const dsl::Program p = dsl::check(fwd.program);
    std::vector<dsl::ArgSpec> args;
    for (int id : p.arguments) {
      const auto& t = p.tensors[static_cast<std::size_t>(id)];
      args.push_back({t.readAsIndex ? DType::i64 : fwd.dtype,
                      fwd.shapes.count(t.name) ? fwd.shapes.at(t.name) : Shape{}});
    }
    const dsl::BoundProgram b = dsl::bind(p, args, fwd.params, fwd.dtype);
    for (std::size_t id = 0; id < p.tensors.size(); ++id)
      g.shapes["d" + p.tensors[id].name] = b.tensors[id].shape;
  } catch (const std::exception& e) {
    g.program = fwd.program + " (gradient: " + e.what() + ")";
  }
  return g;
}

} // namespace einjit::test::generated
