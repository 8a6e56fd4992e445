#include "graph/onnx_import.h"

namespace streamline::graph {

Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options) {
  return unsupported("ONNX import not built yet");
}
Result<Graph> import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& options,
                                const std::string& what) {
  return unsupported("ONNX import not built yet");
}

}  // namespace streamline::graph
