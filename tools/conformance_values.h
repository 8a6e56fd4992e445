#pragma once
// Values in ONNX backend-test data beyond plain tensors: input_K.pb / output_K.pb files that hold an
// onnx.SequenceProto or an onnx.OptionalProto (sequence and optional cases) instead of a TensorProto,
// read into AnyValues, and the comparison of a run's value with the expected one.
//
//   std::string name;
//   SL_ASSIGN_OR_RETURN(AnyValue v, read_value_pb(bytes, ValueKind::kSequence, DType::kFloat32, dir, "input_0.pb",
//   &name)); std::string diff = compare_values(expected, got);   // "" when they match
//
// The file says nothing of its own message type, so the caller names the kind the model declares.

#include <string>

#include "conformance_case.h"
#include "core/status.h"
#include "core/value.h"

namespace streamline::tools {

// Parses `bytes` as the message for `kind` (TensorProto for tensors, SequenceProto for sequences,
// OptionalProto for optionals). `declared` is the element type the model declares (bfloat16 data
// stored as uint16 is read as bfloat16; an empty sequence takes it). Sets `*name` to the message's
// name. Unsupported for element types streamline cannot hold or nested kinds; InvalidArgument when
// the bytes are not such a message.
Result<AnyValue> read_value_pb(const std::string& bytes, ValueKind kind, DType declared, const std::string& base_dir,
                               const std::string& what, std::string* name);

// "" when `got` matches `expected`: same kind, both optionals empty or both holding matching
// elements, sequences of the same length with each tensor as compare_tensors has it. Otherwise a
// description ("a sequence of 2 tensors, expected 3", "element 1: shape [2], expected [3]").
std::string compare_values(const AnyValue& expected, const AnyValue& got, const Tolerance& tol = {});

// ONNX test data from before numpy had a bfloat16 stores bfloat16 tensors as uint16 bit patterns;
// this gives such a tensor the dtype the model declares (others unchanged).
Tensor as_declared(Tensor t, DType declared);

}  // namespace streamline::tools
