#include "Inputs.h"

#include "Npy.h"

#include "runtime/RandomInputs.h"

namespace einjit::cli {

std::vector<Arg> Inputs::positional() const {
  std::vector<Arg> call;
  for (const Tensor& t : tensors) call.emplace_back(t);
  for (double s : scalars) call.emplace_back(s);
  return call;
}

// Random tensors for every argument (index tensors get valid indices) and the scalars.
Inputs makeInputs(const dsl::Program& prog, const Arguments& given) {
  Arguments args = given;
  // Tensors read from files: their shapes join --shape's; a floating-point file sets the dtype
  // of the random tensors unless --dtype says otherwise.
  std::map<std::string, Tensor> files;
  for (const auto& [name, path] : args.inputs) {
    int id = prog.findTensor(name);
    if (id < 0 || !prog.tensors[static_cast<std::size_t>(id)].isArgument)
      throw Error("--input " + name + ": the program has no tensor argument named '" + name + "'");
    if (args.shapes.count(name))
      throw Error("--input " + name + " and --shape " + name + ": give one of them");
    Tensor t = readNpy(path);
    args.shapes[name] = t.shape();
    if (!args.dtypeGiven && isFloat(t.dtype())) args.dtype = t.dtype();
    files[name] = t;
  }
  Inputs in;
  bool gathers = false;
  for (int id : prog.arguments) {
    const auto& info = prog.tensors[static_cast<std::size_t>(id)];
    if (!args.shapes.count(info.name))
      dsl::fail(*prog.source, info.firstUse,
                "missing --shape " + info.name + "=... (or --input " + info.name + "=file.npy)");
    gathers = gathers || (info.readAsIndex && !files.count(info.name));
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
  // Index tensors hold valid indices, spread over the whole range the shapes allow.
  dsl::BoundProgram bound;
  if (gathers) bound = bindShapes(prog, args.shapes, args.scalars, args.dtype);
  for (std::size_t i = 0; i < prog.arguments.size(); ++i) {
    int id = prog.arguments[i];
    const auto& info = prog.tensors[static_cast<std::size_t>(id)];
    const Shape& shape = args.shapes.at(info.name);
    std::uint64_t seed = args.seed * 1000003u + i;
    if (files.count(info.name))
      in.tensors.push_back(files.at(info.name));
    else
      in.tensors.push_back(info.readAsIndex ? randomIndices(prog, bound, id, shape, seed)
                                            : Tensor::random(shape, args.dtype, seed));
  }
  in.dtype = args.dtype;
  return in;
}

std::vector<dsl::ArgSpec> specsOf(const std::vector<Tensor>& ts) {
  std::vector<dsl::ArgSpec> specs;
  for (const Tensor& t : ts) specs.push_back({t.dtype(), t.shape()});
  return specs;
}

} // namespace einjit::cli
