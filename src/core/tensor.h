#pragma once
// Tensor: a dtype, a logical shape, a physical layout and a pointer to the elements.
//
//   Tensor t = Tensor::empty(DType::kFloat32, Shape{2, 3});   // owns zeroed, aligned memory
//   t.data<float>()[0] = 1.f;
//   Tensor v = Tensor::view(DType::kFloat32, Shape{6}, t.raw()); // borrows; caller keeps t alive
//
// Copying a Tensor is cheap: owned memory is shared (std::shared_ptr), never duplicated. Use
// clone() for a deep copy. A Tensor is not synchronised: concurrent writers need external ordering.
//
// String tensors (DType::kString) hold one std::string per element, made by empty() (all "") and
// destroyed with the tensor; strings() gives them. They have no fixed byte size (nbytes() is 0), so
// only kernels registered for kString may touch them, and they never live in a plan's arena.
//
//   Tensor s = Tensor::from_strings(Shape{2}, {"monday", "tuesday"});
//   s.strings()[1] += "!";

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// Sibling form: public core headers resolve the same in src/core/ and installed in
// include/streamline/core/ (cmake/install.cmake).
#include "allocator.h"
#include "dtype.h"
#include "shape.h"

namespace streamline {

// Physical arrangement of a tensor's elements. The shape is always the logical (ONNX) shape.
enum class Layout : uint8_t {
  kPlain = 0,         // dense row-major in the logical shape (NCHW for images)
  kChannelsLast = 1,  // rank-4 logical NCHW stored as NHWC
  kBlocked8 = 2,      // rank-4 logical NCHW stored as nChw8c (channels in blocks of 8 innermost);
                      // only for C % 8 == 0, so it takes the same bytes as the plain tensor
  kBlocked16 = 3,     // the same with blocks of 16 (nChw16c, for AVX-512); only for C % 16 == 0
};
const char* layout_name(Layout l);
// Channels per block of a blocked layout (8 or 16); 0 for plain and channels-last.
inline int layout_block(Layout l) {
  return l == Layout::kBlocked8 ? 8 : l == Layout::kBlocked16 ? 16 : 0;
}
inline bool is_blocked(Layout l) {
  return layout_block(l) != 0;
}
// The blocked layout with `block` channels per block (8 or 16).
inline Layout blocked_layout(int block) {
  return block == 16 ? Layout::kBlocked16 : Layout::kBlocked8;
}

class Tensor {
 public:
  Tensor() = default;

  // Allocates owned, zeroed, 64-byte aligned memory.
  static Tensor empty(DType dtype, const Shape& shape, Layout layout = Layout::kPlain);
  // The same, its bytes unspecified (string elements empty): for a tensor the caller then fills
  // whole, as a copy does.
  static Tensor for_overwrite(DType dtype, const Shape& shape, Layout layout = Layout::kPlain);
  // Borrows `data`; the caller keeps it alive and sized for the shape.
  static Tensor view(DType dtype, const Shape& shape, void* data, Layout layout = Layout::kPlain);
  // Owned tensor filled from host values.
  template <typename T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& values);
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>(Shape{}, {value});
  }
  // Owned string tensor; `values` fills it in order (missing elements stay "").
  static Tensor from_strings(const Shape& shape, const std::vector<std::string>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Layout layout() const { return layout_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  // The elements of a kString tensor; nullptr for any other dtype.
  std::string* strings() const { return dtype_ == DType::kString ? static_cast<std::string*>(data_) : nullptr; }

  // Deep copy into owned memory (strings are copied one by one).
  Tensor clone() const;
  // Same memory, another shape with the same element count.
  Tensor reshaped(const Shape& shape) const;
  void set_layout(Layout l) { layout_ = l; }
  // Keeps `owner` alive as long as this tensor (used by views into shared storage).
  void set_owner(std::shared_ptr<void> owner) { owner_ = std::move(owner); }
  // True when this tensor owns its storage and no other tensor, view or owner shares it: nothing
  // else can read or write its elements.
  bool sole_owner() const { return data_ && owner_ && owner_.use_count() == 1; }

  std::string describe() const;  // "float32[1,3,224,224]"

 private:
  static Tensor allocated(DType dtype, const Shape& shape, Layout layout, bool zero);

  DType dtype_ = DType::kUndefined;
  Shape shape_;
  Layout layout_ = Layout::kPlain;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

template <typename T>
Tensor Tensor::from_vector(const Shape& shape, const std::vector<T>& values) {
  Tensor t = empty(DTypeOf<T>::value, shape);
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i) t.data<T>()[i] = values[i];
  return t;
}

// Reads element i of a numeric tensor as double / int64 (any supported dtype). For tests, shape
// arguments and constant folding; not for hot loops.
double element_as_double(const Tensor& t, int64_t i);
int64_t element_as_int64(const Tensor& t, int64_t i);

}  // namespace streamline
