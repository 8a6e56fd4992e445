// libFuzzer target for the ONNX loader: any byte string must give a Graph or a Status, never a
// crash, a leak, a hang or an absurd allocation. Built by fuzz/CMakeLists.txt; run scripts/fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // No base folder: external-data references must be refused, not followed.
  streamline::Result<streamline::graph::Graph> g = streamline::graph::import_onnx_bytes(bytes, "", {}, "fuzz input");
  if (g.ok()) {
    auto order = g->topological_order();
    order.status().ignore();
  }
  return 0;
}
