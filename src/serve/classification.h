#pragma once
// Triton's classification extension: an output requested with class_count k (HTTP: the output's
// parameters.classification; gRPC: its "classification" parameter) comes back as BYTES, the k
// largest values of each row as "<value>:<index>" or, when the output has a label file
// (label_filename in config.pbtxt, one label a line), "<value>:<index>:<label>".
//
//   SL_ASSIGN_OR_RETURN(ClassifiedOutput c, classify(tensor, /*k=*/3, /*batched=*/true, &labels));
//   // c.shape = [rows, 3], c.values[0] = "12.500000:7:cat"
//   std::string raw = serialize_bytes(c.values);   // KServe's BYTES: 4-byte length, then bytes
//
// Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::serve {

struct ClassifiedOutput {
  std::vector<int64_t> shape;       // [rows, k] for a batched output, [k] otherwise
  std::vector<std::string> values;  // row-major, each row by decreasing value
};

// Top-k of `t` per row (batched: dim 0 is the batch, the rest flattened; else all of it).
// InvalidArgument for k < 1 or a dtype that is not numeric; k above the class count is cut to it.
[[nodiscard]] Result<ClassifiedOutput> classify(const Tensor& t, int64_t k, bool batched,
                                                const std::vector<std::string>* labels);

// KServe's raw BYTES layout: each element as a 4-byte little-endian length followed by its bytes.
std::string serialize_bytes(const std::vector<std::string>& values);

// Reads a label file: one label a line (a trailing newline does not add an empty label).
[[nodiscard]] Result<std::vector<std::string>> read_labels(const std::string& path, const std::string& label);

}  // namespace streamline::serve
