#pragma once
// The tensors a bad-input test passes in, with their contents before the call: after a call
// that fails its checks they must hold exactly what they held (nothing is written on error).
// Views included: the contents are read through the view, so a write through an aliasing view
// shows.
#include "einjit/einjit.h"

#include <vector>

namespace einjit::test {

struct Watch {
  std::vector<Tensor> tensors;
  std::vector<std::vector<double>> before;
  Tensor operator()(Tensor t) {
    tensors.push_back(t);
    before.push_back(t.toVector());
    return t;
  }
};

} // namespace einjit::test
