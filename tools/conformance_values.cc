#include "conformance_values.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "graph/onnx_tensor.h"

namespace streamline::tools {
namespace {

Result<Tensor> tensor_of(const onnx::TensorProto& proto, DType declared, const std::string& base_dir,
                         const std::string& what) {
  graph::TensorReadOptions ro;
  ro.base_dir = base_dir;
  SL_ASSIGN_OR_RETURN(Tensor t, graph::tensor_from_onnx(proto, ro, what));
  return as_declared(std::move(t), declared);
}

Result<AnyValue> sequence_of(const onnx::SequenceProto& seq, DType declared, const std::string& base_dir,
                             const std::string& what) {
  if (seq.elem_type() != onnx::SequenceProto::TENSOR && seq.elem_type() != onnx::SequenceProto::UNDEFINED)
    return unsupported(what + " is a sequence of " + onnx::SequenceProto::DataType_Name(seq.elem_type()) +
                       " values; streamline holds sequences of tensors");
  std::vector<Tensor> items;
  DType elem = declared;
  for (int i = 0; i < seq.tensor_values_size(); ++i) {
    SL_ASSIGN_OR_RETURN(Tensor t,
                        tensor_of(seq.tensor_values(i), declared, base_dir, what + " element " + std::to_string(i)));
    elem = t.dtype();
    items.push_back(std::move(t));
  }
  return AnyValue::sequence(std::move(items), elem);
}

}  // namespace

Tensor as_declared(Tensor t, DType declared) {
  if (declared != DType::kBFloat16 || t.dtype() != DType::kUInt16) return t;
  Tensor b = Tensor::empty(DType::kBFloat16, t.shape());
  if (t.nbytes() > 0) std::memcpy(b.raw(), t.raw(), t.nbytes());
  return b;
}

Result<AnyValue> read_value_pb(const std::string& bytes, ValueKind kind, DType declared, const std::string& base_dir,
                               const std::string& what, std::string* name) {
  switch (kind) {
    case ValueKind::kTensor: {
      onnx::TensorProto proto;
      if (!proto.ParseFromString(bytes)) return invalid_argument(what + " is not a TensorProto");
      *name = proto.name();
      SL_ASSIGN_OR_RETURN(Tensor t, tensor_of(proto, declared, base_dir, what));
      return AnyValue(std::move(t));
    }
    case ValueKind::kSequence: {
      onnx::SequenceProto proto;
      if (!proto.ParseFromString(bytes)) return invalid_argument(what + " is not a SequenceProto");
      *name = proto.name();
      return sequence_of(proto, declared, base_dir, what);
    }
    case ValueKind::kOptionalTensor:
    case ValueKind::kOptionalSequence: {
      onnx::OptionalProto proto;
      if (!proto.ParseFromString(bytes)) return invalid_argument(what + " is not an OptionalProto");
      *name = proto.name();
      if (proto.has_tensor_value()) {
        SL_ASSIGN_OR_RETURN(Tensor t, tensor_of(proto.tensor_value(), declared, base_dir, what));
        return AnyValue::some(AnyValue(std::move(t)));
      }
      if (proto.has_sequence_value()) {
        SL_ASSIGN_OR_RETURN(AnyValue s, sequence_of(proto.sequence_value(), declared, base_dir, what));
        return AnyValue::some(s);
      }
      if (proto.has_map_value() || proto.has_optional_value() || proto.has_sparse_tensor_value())
        return unsupported(what + " is an optional of a type streamline does not hold");
      return AnyValue::none(kind, declared);
    }
  }
  return internal_error(what + ": unknown value kind");
}

std::string compare_values(const AnyValue& expected, const AnyValue& got, const Tolerance& tol) {
  if (got.kind() != expected.kind() || !got.defined())
    return "a " + (got.defined() ? value_type_name(got.kind(), got.elem_dtype()) : std::string("missing value")) +
           ", expected a " + value_type_name(expected.kind(), expected.elem_dtype());
  if (expected.is_optional()) {
    if (expected.has_element() != got.has_element())
      return std::string(got.has_element() ? "an optional holding " + got.element().describe() : "an empty optional") +
             ", expected " + (expected.has_element() ? "one holding " + expected.element().describe() : "an empty one");
    return expected.has_element() ? compare_values(expected.element(), got.element(), tol) : "";
  }
  if (expected.is_tensor()) return compare_tensors(expected.tensor(), got.tensor(), tol);
  const auto& want = expected.items();
  const auto& have = got.items();
  if (want.size() != have.size())
    return "a sequence of " + std::to_string(have.size()) + " tensors, expected " + std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (std::string d = compare_tensors(as_declared(want[i], have[i].dtype()), have[i], tol); !d.empty())
      return "element " + std::to_string(i) + ": " + d;
  return "";
}

}  // namespace streamline::tools
