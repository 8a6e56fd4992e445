#include "core/tensor.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/small_types.h"

namespace streamline {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kPlain:
      return "plain";
    case Layout::kChannelsLast:
      return "channels_last";
    case Layout::kBlocked8:
      return "nChw8c";
    case Layout::kBlocked16:
      return "nChw16c";
  }
  return "unknown";
}

Tensor Tensor::empty(DType dtype, const Shape& shape, Layout layout) {
  return allocated(dtype, shape, layout, /*zero=*/true);
}

Tensor Tensor::for_overwrite(DType dtype, const Shape& shape, Layout layout) {
  return allocated(dtype, shape, layout, /*zero=*/false);
}

Tensor Tensor::allocated(DType dtype, const Shape& shape, Layout layout, bool zero) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.layout_ = layout;
  if (dtype == DType::kString) {
    // One constructed std::string per element; the array deleter destroys them.
    const auto n = static_cast<size_t>(std::max<int64_t>(shape.numel(), 0));
    std::shared_ptr<std::string[]> strings(new (std::nothrow) std::string[std::max<size_t>(n, 1)]);
    if (!strings) return Tensor();
    t.data_ = strings.get();
    t.owner_ = std::move(strings);
    return t;
  }
  auto buf = zero ? AlignedBuffer::allocate(t.nbytes()) : AlignedBuffer::allocate_for_overwrite(t.nbytes());
  if (!buf) return Tensor();
  t.data_ = buf->data();
  t.owner_ = std::move(buf);
  return t;
}

Tensor Tensor::view(DType dtype, const Shape& shape, void* data, Layout layout) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.layout_ = layout;
  t.data_ = data;
  return t;
}

Tensor Tensor::from_strings(const Shape& shape, const std::vector<std::string>& values) {
  Tensor t = empty(DType::kString, shape);
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i) t.strings()[i] = values[i];
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = data_ ? for_overwrite(dtype_, shape_, layout_) : empty(dtype_, shape_, layout_);
  if (dtype_ == DType::kString) {
    if (data_) std::copy(strings(), strings() + numel(), t.strings());
    return t;
  }
  if (nbytes() && data_) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_.to_string();
}

double element_as_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i];
    case DType::kFloat64:
      return t.data<double>()[i];
    case DType::kFloat16:
      return half_to_float(t.data<uint16_t>()[i]);
    case DType::kBFloat16:
      return bfloat16_to_float(t.data<uint16_t>()[i]);
    case DType::kInt64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kInt32:
      return t.data<int32_t>()[i];
    case DType::kInt16:
      return t.data<int16_t>()[i];
    case DType::kInt8:
      return t.data<int8_t>()[i];
    case DType::kUInt64:
      return static_cast<double>(t.data<uint64_t>()[i]);
    case DType::kUInt32:
      return t.data<uint32_t>()[i];
    case DType::kUInt16:
      return t.data<uint16_t>()[i];
    case DType::kUInt8:
      return t.data<uint8_t>()[i];
    case DType::kBool:
      return t.data<uint8_t>()[i] ? 1.0 : 0.0;
    default:
      if (is_small_type(t.dtype())) return small_to_float(t.dtype(), t.data<uint8_t>()[i]);
      return 0.0;
  }
}

int64_t element_as_int64(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt64:
      return t.data<int64_t>()[i];
    case DType::kInt32:
      return t.data<int32_t>()[i];
    case DType::kUInt64:
      return static_cast<int64_t>(t.data<uint64_t>()[i]);
    default:
      return static_cast<int64_t>(element_as_double(t, i));
  }
}

}  // namespace streamline
