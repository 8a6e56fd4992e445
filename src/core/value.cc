#include "core/value.h"

namespace streamline {

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor:
      return "tensor";
    case ValueKind::kSequence:
      return "sequence";
    case ValueKind::kOptionalTensor:
      return "optional tensor";
    case ValueKind::kOptionalSequence:
      return "optional sequence";
  }
  return "?";
}

bool is_optional_kind(ValueKind k) {
  return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence;
}

ValueKind optional_of(ValueKind k) {
  return k == ValueKind::kSequence || k == ValueKind::kOptionalSequence ? ValueKind::kOptionalSequence
                                                                        : ValueKind::kOptionalTensor;
}

ValueKind element_kind(ValueKind optional) {
  return optional == ValueKind::kOptionalSequence || optional == ValueKind::kSequence ? ValueKind::kSequence
                                                                                      : ValueKind::kTensor;
}

std::string value_type_name(ValueKind k, DType elem) {
  const std::string e = dtype_name(elem);
  switch (k) {
    case ValueKind::kTensor:
      return e + " tensor";
    case ValueKind::kSequence:
      return "sequence of " + e;
    case ValueKind::kOptionalTensor:
      return "optional tensor of " + e;
    case ValueKind::kOptionalSequence:
      return "optional sequence of " + e;
  }
  return e;
}

AnyValue::AnyValue(Tensor t) : defined_(t.defined()), elem_(t.dtype()), tensor_(std::move(t)) {}

AnyValue AnyValue::sequence(std::vector<Tensor> items, DType elem) {
  AnyValue v;
  v.kind_ = ValueKind::kSequence;
  v.defined_ = true;
  v.elem_ = elem;
  v.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return v;
}

AnyValue AnyValue::none(ValueKind optional_kind, DType elem) {
  AnyValue v;
  v.kind_ = optional_of(optional_kind);
  v.defined_ = true;
  v.elem_ = elem;
  return v;
}

AnyValue AnyValue::some(const AnyValue& inner) {
  AnyValue v = inner;
  v.kind_ = optional_of(inner.kind());
  v.defined_ = inner.defined();
  v.has_ = inner.defined();
  return v;
}

const std::vector<Tensor>& AnyValue::items() const {
  static const std::vector<Tensor> kNone;
  return items_ && (kind_ == ValueKind::kSequence) ? *items_ : kNone;
}

AnyValue AnyValue::element() const {
  if (!has_element()) return AnyValue();
  AnyValue v = *this;
  v.kind_ = element_kind(kind_);
  v.has_ = false;
  return v;
}

AnyValue AnyValue::clone() const {
  AnyValue v = *this;
  if (tensor_.defined()) v.tensor_ = tensor_.clone();
  if (items_) {
    std::vector<Tensor> copies;
    copies.reserve(items_->size());
    for (const Tensor& t : *items_) copies.push_back(t.clone());
    v.items_ = std::make_shared<const std::vector<Tensor>>(std::move(copies));
  }
  return v;
}

std::string AnyValue::describe() const {
  if (!defined_) return "undefined";
  switch (kind_) {
    case ValueKind::kTensor:
      return tensor_.describe();
    case ValueKind::kSequence:
      return value_type_name(kind_, elem_) + " [" + std::to_string(items().size()) + " tensors]";
    case ValueKind::kOptionalTensor:
    case ValueKind::kOptionalSequence:
      return value_type_name(kind_, elem_) + (has_ ? " holding " + element().describe() : " (empty)");
  }
  return "?";
}

}  // namespace streamline
