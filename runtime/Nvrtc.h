#pragma once
// NVRTC, loaded at run time (dlopen of the toolkit's libnvrtc), so that it needs no GPU and
// no driver: CI compiles every generated kernel through it. compileCuda() returns a cubin for
// the requested architecture, or PTX for the newest architecture NVRTC knows when it cannot
// target that one (the driver then compiles the PTX). A compile error is an einjit::Error with
// NVRTC's log and the numbered generated source.
#include <string>

namespace einjit::runtime::nvrtc {

bool available(std::string* why = nullptr);
std::string version(); // "13.0"

struct Compiled {
  std::string image; // cubin or PTX (NUL-terminated text)
  bool cubin = false;
  std::string target; // "sm_90", "sm_90a" or "compute_90"
  std::string log;
  double ms = 0;
};

// arch: compute capability as major*10+minor (90 for sm_90).
// archSpecific: the source uses the architecture's own feature set (wgmma on sm_90): compiled
// for "sm_90a" (or "compute_90a"), which runs on that architecture only.
Compiled compile(const std::string& source, int arch, bool archSpecific = false,
                 const std::string& name = "einjit.cu");

} // namespace einjit::runtime::nvrtc
