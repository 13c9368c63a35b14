#include "codegen/Target.h"

#include <mutex>
#include <optional>

namespace einjit::codegen {

namespace {

std::mutex overrideMutex;
std::optional<SplitPolicy> splitOverride;

} // namespace

void overrideSplitPolicy(const SplitPolicy* policy) {
  std::lock_guard<std::mutex> lock(overrideMutex);
  if (policy)
    splitOverride = *policy;
  else
    splitOverride.reset();
}

SplitPolicy splitPolicy(const Target& t) {
  std::lock_guard<std::mutex> lock(overrideMutex);
  return splitOverride ? *splitOverride : t.split;
}

} // namespace einjit::codegen
