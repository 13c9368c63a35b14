// einjit grad and einjit gradcheck.
#include "Commands.h"

#include "Arguments.h"

#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "grad/Differentiate.h"

#include <cstdio>
#include <ostream>

namespace einjit::cli {

int grad(const Words& words, std::ostream& out, std::ostream&) {
  Arguments a = parseArguments(words);
  dsl::Program p = dsl::check(a.program);
  grad::Gradient g = grad::differentiate(p, a.wrt);
  out << dsl::printProgram(g.program) << '\n';
  for (const std::string& s : g.scatters) out << "# scatter: " << s << '\n';
  for (const std::string& s : g.masked) out << "# masked gather: " << s << '\n';
  return 0;
}

// Central finite differences in float64 on random inputs against the gradient program run on
// --device (the JIT by default); prints the largest relative error per input and fails above 1e-6.
int gradcheck(const Words& words, std::ostream& out, std::ostream&) {
  Arguments a = parseArguments(words);
  GradCheckResult r =
      einjit::gradcheck(a.program, a.shapes, a.scalars, a.wrt, a.seed, 1e-6, a.device);
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "d%s: max relative error %.3g over %lld element(s)\n",
                  r.inputs[i].c_str(), r.maxRelativeError[i],
                  static_cast<long long>(r.compared[i]));
    out << buf;
  }
  // Nothing compared is no pass: said as such, and the status is that of a failure.
  if (r.passed)
    out << "gradcheck: PASS\n";
  else if (r.why.rfind("nothing to compare", 0) == 0)
    out << "gradcheck: EMPTY (" << r.why << ")\n";
  else
    out << "gradcheck: FAIL (" << r.why << ")\n";
  return r.passed ? 0 : 1;
}

} // namespace einjit::cli
