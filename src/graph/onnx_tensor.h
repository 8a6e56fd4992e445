#pragma once
// Converting ONNX TensorProto payloads (initializers, tensor attributes) into streamline Tensors.
//
//   TensorReadOptions ro;
//   ro.base_dir = "/models/resnet";                 // where external-data files live
//   SL_ASSIGN_OR_RETURN(Tensor w, tensor_from_onnx(proto, ro, "initializer 'conv1.weight'"));
//
// Data comes from raw_data, from the typed repeated fields, or from an external-data file. Every
// size is checked against the bytes actually present before anything is allocated, so a corrupt
// length gives InvalidArgument, never a huge allocation. Used by the ONNX importer; not thread-
// hostile (no shared state), so concurrent calls are fine.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/ir.h"

namespace streamline::graph {

struct TensorReadOptions {
  // Folder that external-data locations are relative to; empty refuses external data.
  std::string base_dir;
  // Largest external-data read for one tensor, in bytes.
  int64_t max_external_bytes = int64_t{64} << 30;
};

// The streamline DType for an ONNX element type id (STRING is kString); kUndefined when streamline
// cannot hold it (complex and the other types DType lacks, unknown ids).
DType dtype_from_onnx(int32_t elem_type);
// Lower-case name of an ONNX element type id for messages: "float", "string", "complex64", "id 99".
std::string onnx_type_name(int32_t elem_type);

// Declared dims of a TensorShapeProto: dim_value -> fixed, dim_param -> symbol, neither -> unknown.
DimList dims_from_onnx(const onnx::TensorShapeProto& shape);

// Converts `proto`. `what` names the tensor in messages ("initializer 'w'").
// String tensors come from string_data. Errors: Unsupported for complex/unknown element types and
// segmented tensors;
// InvalidArgument for negative dims, an element count that does not match the data, or a bad
// external-data reference; NotFound for a missing external-data file.
Result<Tensor> tensor_from_onnx(const onnx::TensorProto& proto, const TensorReadOptions& options,
                                const std::string& what);

// Bytes of payload `proto` carries in memory (raw_data plus typed fields); for deciding what to drop.
size_t onnx_payload_bytes(const onnx::TensorProto& proto);
// Frees the payload of `proto` (raw_data and typed fields), keeping name, type and dims.
void drop_onnx_payload(onnx::TensorProto* proto);

}  // namespace streamline::graph
