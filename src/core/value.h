#pragma once
// AnyValue: what one value of an ONNX graph holds at run time: a tensor, a sequence of tensors, or
// an optional holding a tensor, a sequence or nothing. Plans move tensors only; the eager
// interpreter (ops/eager.h) carries AnyValues, so sequences and optionals run node by node.
//
//   AnyValue x = Tensor::scalar<float>(1.f);                        // a tensor
//   AnyValue s = AnyValue::sequence({a, b}, DType::kFloat32);       // a sequence of two tensors
//   AnyValue n = AnyValue::none(ValueKind::kOptionalTensor, DType::kFloat32);  // an empty optional
//   AnyValue o = AnyValue::some(s);                                 // an optional holding s
//   if (o.is_optional() && o.has_element()) use(o.element().items());
//
// Copying is cheap: tensors share their memory and a sequence shares its list of tensors. Values are
// immutable once made (sequence ops make new sequences), so copies may be read from any thread.

#include <memory>
#include <string>
#include <vector>

#include "tensor.h"  // sibling form, as in core/tensor.h

namespace streamline {

// The kinds of value an ONNX graph can carry that streamline holds (ONNX's maps and sparse tensors,
// and sequences of sequences, are not among them).
enum class ValueKind : uint8_t {
  kTensor = 0,
  kSequence = 1,          // sequence of tensors
  kOptionalTensor = 2,    // optional of a tensor
  kOptionalSequence = 3,  // optional of a sequence of tensors
};
// "tensor", "sequence", "optional tensor", "optional sequence".
const char* value_kind_name(ValueKind k);
bool is_optional_kind(ValueKind k);
// The kind an optional of `k` has (kTensor -> kOptionalTensor), and the kind an optional holds.
ValueKind optional_of(ValueKind k);
ValueKind element_kind(ValueKind optional);
// "float32 tensor", "sequence of float32", "optional sequence of int64".
std::string value_type_name(ValueKind k, DType elem);

class AnyValue {
 public:
  // Undefined: an omitted optional input or output.
  AnyValue() = default;
  // A tensor; undefined when `t` is.
  AnyValue(Tensor t);  // NOLINT(google-explicit-constructor)
  // A sequence of tensors of element type `elem` (kUndefined for an empty one of unknown type).
  static AnyValue sequence(std::vector<Tensor> items, DType elem);
  // An empty optional of kind kOptionalTensor or kOptionalSequence.
  static AnyValue none(ValueKind optional_kind, DType elem);
  // An optional holding `inner` (a tensor or a sequence).
  static AnyValue some(const AnyValue& inner);

  bool defined() const { return defined_; }
  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return defined_ && kind_ == ValueKind::kTensor; }
  bool is_sequence() const { return defined_ && kind_ == ValueKind::kSequence; }
  bool is_optional() const { return defined_ && is_optional_kind(kind_); }
  // Element type: the tensor's dtype, the sequence's element type, the optional's.
  DType elem_dtype() const { return elem_; }

  // The tensor of a kTensor value (an undefined Tensor otherwise).
  const Tensor& tensor() const { return tensor_; }
  // The tensors of a kSequence value (empty otherwise).
  const std::vector<Tensor>& items() const;
  // For optionals: whether one holds an element, and that element as a tensor or sequence value
  // (undefined when empty).
  bool has_element() const { return is_optional() && has_; }
  AnyValue element() const;

  // Same value with every tensor deep-copied (Tensor::clone).
  AnyValue clone() const;
  // "float32[2,3]", "sequence of float32 [3 tensors]", "optional tensor of float32 (empty)".
  std::string describe() const;

 private:
  ValueKind kind_ = ValueKind::kTensor;
  bool defined_ = false;
  bool has_ = false;  // optionals: holds an element
  DType elem_ = DType::kUndefined;
  Tensor tensor_;                                     // kTensor, kOptionalTensor holding one
  std::shared_ptr<const std::vector<Tensor>> items_;  // kSequence, kOptionalSequence holding one
};

}  // namespace streamline
