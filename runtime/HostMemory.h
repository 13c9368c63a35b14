#pragma once
// Host memory of tensors: 64-byte aligned blocks. A freed large block (64 KiB or more) is kept
// for the next request of the same (page-rounded) size, up to 256 MiB in all, the least
// recently freed given back first. A program's call allocates its outputs and intermediates
// afresh, and the C library returns large freed blocks to the kernel, so without reuse every
// call of a gradient program paid a page fault per 4 KiB of each full-size tensor (more time
// than its loops). clearCaches() gives every kept block back. Sanitizer builds keep nothing,
// so that a use after free is still reported.
#include <cstddef>

namespace einjit::runtime {

// Throws std::bad_alloc.
void* allocateHost(std::size_t bytes);
// p from allocateHost(bytes).
void freeHost(void* p, std::size_t bytes) noexcept;
// Gives the kept blocks back to the C library.
void releaseHostBlocks() noexcept;
// The bytes kept now (tests).
std::size_t keptHostBytes() noexcept;

} // namespace einjit::runtime
