#pragma once
// The einjit command-line tool's commands. Each takes the words after the command name,
// prints to the given streams and returns the process exit status.
#include <iosfwd>
#include <string>
#include <vector>

namespace einjit::cli {

using Words = std::vector<std::string>;

int check(const Words& args, std::ostream& out, std::ostream& err);
int run(const Words& args, std::ostream& out, std::ostream& err);
int demo(const Words& args, std::ostream& out, std::ostream& err);
int grad(const Words& args, std::ostream& out, std::ostream& err);
int gradcheck(const Words& args, std::ostream& out, std::ostream& err);
int explain(const Words& args, std::ostream& out, std::ostream& err);
int bench(const Words& args, std::ostream& out, std::ostream& err);
int cache(const Words& args, std::ostream& out, std::ostream& err);
// Every command and flag; commandHelp: one command's (false for an unknown name).
int help(std::ostream& out);
bool commandHelp(const std::string& name, std::ostream& out);

} // namespace einjit::cli
