// einjit --help and einjit CMD --help: every command and every flag, from one table.
#include "Commands.h"

#include <algorithm>
#include <ostream>

namespace einjit::cli {

namespace {

struct FlagHelp {
  const char* flag;
  const char* text;
};

const FlagHelp kFlags[] = {
    {"--shape NAME=AxBxC", "tensor NAME of random values, this shape ('scalar': rank 0)"},
    {"--input NAME=FILE.npy", "tensor NAME from a .npy file (f32 f64 i32 i64, bf16 as '|V2')"},
    {"--scalar NAME=VALUE", "value of scalar parameter NAME"},
    {"--seed N", "seed of the random inputs (default 1)"},
    {"--dtype f32|f64|bf16", "dtype of the random tensors (default f32, or an --input file's)"},
    {"--device reference|cpu|cuda[:N]", "the interpreter, the CPU JIT (default) or GPU N"},
    {"--check", "compare with the float64 interpreter (status 1 on a difference)"},
    {"--save DIR", "write each output (and written argument) to DIR/NAME.npy"},
    {"--wrt x,w", "the inputs to differentiate (default: every floating-point one)"},
    {"--cuda", "the generated CUDA C (no GPU needed); same as --device cuda"},
    {"--ir", "also the loop-nest IR"},
    {"--llvm", "the optimized LLVM IR"},
    {"--grad", "the gradient programs too, and (forward + gradients) / forward"},
    {"--reps N", "timed calls (default: as many as fit in 0.5 s)"},
    {"--help", "this text; 'einjit CMD --help' for one command"},
};

struct CommandHelp {
  const char* name;
  const char* synopsis;
  const char* summary;
  std::vector<const char*> flags; // prefixes of kFlags entries
};

const std::vector<CommandHelp>& commands() {
  static const std::vector<CommandHelp> table = {
      {"check",
       "'<program>' [--shape ... | --input ...] [--scalar ...] [--dtype ...]",
       "the canonical program and every index's range (numbers and output shapes with shapes;\n"
       "      without, the checks that need them)",
       {"--shape", "--input", "--scalar", "--dtype"}},
      {"run",
       "'<program>' --shape NAME=AxB ... | --input NAME=FILE.npy ... [options]",
       "run on the given or random inputs; print each output's shape and checksum",
       {"--shape", "--input", "--scalar", "--seed", "--dtype", "--device", "--check", "--save"}},
      {"grad",
       "'<program>' [--wrt x,w]",
       "print the gradient program (gather form) as einjit text",
       {"--wrt"}},
      {"gradcheck",
       "'<program>' --shape NAME=AxB ... [--wrt x,w] [--scalar ...] [--seed N]",
       "the gradient against central finite differences in float64 on random inputs\n"
       "      (status 1 above 1e-6, on a NaN or infinity on one side only, or if nothing compared)",
       {"--shape", "--scalar", "--wrt", "--seed", "--device"}},
      {"explain",
       "'<program>' --shape ... [--device ...] [--cuda] [--ir] [--llvm]",
       "the schedule and generated code of each statement",
       {"--shape", "--input", "--scalar", "--seed", "--dtype", "--device", "--cuda", "--ir",
        "--llvm"}},
      {"bench",
       "'<program>' --shape ... [--device ...] [--grad] [--reps N]",
       "time calls: ms and GFLOP/s per call (median)",
       {"--shape", "--input", "--scalar", "--seed", "--dtype", "--device", "--grad", "--reps"}},
      {"demo",
       "",
       "a strided convolution layer: parsed, ranges inferred, run, differentiated, "
       "checked",
       {}},
      {"cache",
       "[info|clear]",
       "the disk cache of compiled kernels: where, how big, whether it is used; or\n"
       "      delete its entries",
       {}},
      {"help", "[CMD]", "this text, or that of one command", {}},
  };
  return table;
}

void printFlags(std::ostream& out, const std::vector<const char*>& which) {
  for (const FlagHelp& f : kFlags) {
    bool wanted = which.empty() || std::any_of(which.begin(), which.end(), [&](const char* w) {
                    return std::string(f.flag).rfind(w, 0) == 0;
                  });
    if (!wanted) continue;
    std::string flag = f.flag;
    out << "  " << flag << std::string(flag.size() < 33 ? 33 - flag.size() : 1, ' ') << f.text
        << '\n';
  }
}

} // namespace

int help(std::ostream& out) {
  out << "usage: einjit COMMAND '<program>' [options]\n\ncommands:\n";
  for (const CommandHelp& c : commands()) {
    out << "  einjit " << c.name << (*c.synopsis ? " " : "") << c.synopsis << '\n'
        << "      " << c.summary << '\n';
  }
  out << "\noptions:\n";
  printFlags(out, {});
  return 0;
}

bool commandHelp(const std::string& name, std::ostream& out) {
  for (const CommandHelp& c : commands()) {
    if (name != c.name) continue;
    out << "usage: einjit " << c.name << (*c.synopsis ? " " : "") << c.synopsis << "\n\n"
        << c.summary << '\n';
    if (!c.flags.empty()) {
      out << "\noptions:\n";
      printFlags(out, c.flags);
    }
    return true;
  }
  return false;
}

} // namespace einjit::cli
