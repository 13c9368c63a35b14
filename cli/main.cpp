// einjit: check, run and demonstrate einjit programs from the shell.
#include "Commands.h"

#include "einjit/Error.h"

#include <algorithm>
#include <iostream>

int main(int argc, char** argv) {
  using namespace einjit::cli;
  if (argc < 2) return help(std::cerr), 2;
  std::string cmd = argv[1];
  Words args(argv + 2, argv + argc);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (!args.empty()) {
      const std::string& of = args[0] == "--help" || args[0] == "-h" ? "help" : args[0];
      if (commandHelp(of, std::cout)) return 0;
      std::cerr << "einjit: unknown command '" << args[0] << "'\n";
      return 2;
    }
    return help(std::cout);
  }
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    if (commandHelp(cmd, std::cout)) return 0;
  }
  try {
    if (cmd == "check") return check(args, std::cout, std::cerr);
    if (cmd == "run") return run(args, std::cout, std::cerr);
    if (cmd == "demo") return demo(args, std::cout, std::cerr);
    if (cmd == "grad") return grad(args, std::cout, std::cerr);
    if (cmd == "gradcheck") return gradcheck(args, std::cout, std::cerr);
    if (cmd == "explain") return explain(args, std::cout, std::cerr);
    if (cmd == "bench") return bench(args, std::cout, std::cerr);
    if (cmd == "cache") return cache(args, std::cout, std::cerr);
    std::cerr << "einjit: unknown command '" << cmd << "'\n";
    help(std::cerr);
    return 2;
  } catch (const einjit::Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "einjit: internal error: " << e.what() << '\n';
    return 3;
  }
}
