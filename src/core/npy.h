#pragma once
// Reading and writing NumPy .npy files (format versions 1.0 to 3.0, little-endian, C order).
// String tensors are NumPy unicode arrays ('<U<n>', read and written as UTF-8 strings); byte-string
// arrays ('|S<n>') read as strings too.
//
//   SL_ASSIGN_OR_RETURN(Tensor t, read_npy("x.npy"));
//   SL_RETURN_IF_ERROR(write_npy("y.npy", t));

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(const std::string& bytes, const std::string& what = "npy data");
// Writes a plain-layout tensor; a channels-last tensor is an InvalidArgument.
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace streamline
