#pragma once
// EINJIT_PERF_MAP: the JIT's loaded functions named for `perf report` (Jit.cpp calls it after
// loading an image).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace einjit::runtime {

// Each function of the object `obj` at its loaded address, its size and name, appended to
// /tmp/perf-PID.map, and the object beside it (JitPerfMap.cpp).
void writePerfMap(std::string_view obj,
                  const std::function<std::optional<std::uint64_t>(const std::string&)>& address);

} // namespace einjit::runtime
