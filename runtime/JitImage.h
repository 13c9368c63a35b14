#pragma once
// The CPU JIT's compiled code for one program as one byte string (what the compiled-code
// caches keep): one object file per module (Jit.cpp compiles the functions of a program as
// several modules, in parallel), packed as "ejobjs", the number of objects, then each
// object's length and bytes (64-bit little-endian numbers).
#include <string>
#include <string_view>
#include <vector>

namespace einjit::runtime {

std::string packObjects(const std::vector<std::string>& objects);

// The objects of an image, viewing its bytes. A malformed image (truncated, trailing bytes, a
// disk entry of an older layout) is an einjit::Error, which the cache answers by rebuilding.
std::vector<std::string_view> unpackObjects(std::string_view image);

} // namespace einjit::runtime
