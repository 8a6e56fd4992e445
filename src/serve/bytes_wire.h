#pragma once
// KServe v2 BYTES tensors (string tensors, DType::kString) in their raw form, as both front ends
// carry them in binary request parts, raw_input_contents and raw_output_contents: each element in
// order as a 4-byte little-endian length followed by that many bytes.
//
//   std::string raw = pack_bytes(t);                         // t: a string tensor
//   Tensor back = Tensor::empty(DType::kString, t.shape());
//   SL_RETURN_IF_ERROR(unpack_bytes(raw, &back));            // exactly back.numel() elements
//
// Tensors of fixed-size types are carried as their bytes; wire_bytes() gives the size either way.
// Thread-safe (no state).

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::serve {

// Bytes `t` takes on the wire: nbytes() for fixed-size types, the packed size for strings.
size_t wire_bytes(const Tensor& t);
// Appends `t`'s elements to `out` in the raw form: packed for strings, the bytes otherwise.
void append_wire(const Tensor& t, std::string* out);
inline std::string pack_bytes(const Tensor& t) {
  std::string s;
  append_wire(t, &s);
  return s;
}
// Fills the string tensor `t` (allocated with its shape) from `raw`. InvalidArgument when `raw`
// does not hold exactly t->numel() elements, naming the element where it went wrong.
[[nodiscard]] Status unpack_bytes(std::string_view raw, Tensor* t);

}  // namespace streamline::serve
