#pragma once
// NumPy .npy files (format versions 1, 2 and 3): what `einjit run --input NAME=file.npy` reads
// and `--save DIR` writes. C order only; dtypes f32 ('<f4'), f64 ('<f8'), i32 ('<i4'), i64
// ('<i8') and bf16. NumPy has no bf16: einjit writes it as '|V2' (two raw bytes per element,
// the top half of the IEEE single, little-endian — what an array of ml_dtypes.bfloat16 holds),
// and reads '|V2' or '<V2' back as bf16. Big-endian files ('>f4', ...) are read too. Every
// problem with a file is an einjit::Error that names the file.
#include "einjit/einjit.h"

#include <string>

namespace einjit::cli {

Tensor readNpy(const std::string& path);
// Writes a host tensor (any strides) in C order; version 1 unless the header needs version 2.
void writeNpy(const std::string& path, const Tensor& t);

} // namespace einjit::cli
