#pragma once
// The inputs `streamline perf` sends, from --input-data as perf_analyzer reads it:
//
//   random   seeded random values (floats in [-1, 1), integers in [0, 1000)), one request
//   zero     zeros, one request
//   FILE     a JSON file {"data": [{"INPUT": [1, 2, ...]}, ...]}: one request per entry, sent in
//            turn. A tensor is a (nested) list of numbers or booleans, {"b64": "..."} (its bytes,
//            little-endian), or {"content": <either>, "shape": [d0, ...]}. Each entry gives one
//            batch row of a batched input (repeated for -b rows) or the whole tensor; a "shape"
//            without the batch dimension gets it. Lists of entries ([[{...}], [{...}]], the
//            form for sequence models) are sent one entry after another.
//
//   SL_ASSIGN_OR_RETURN(auto requests, make_perf_requests(shaped, declared, batch, "data.json", 0));

#include <string>
#include <vector>

#include "perf_client.h"

namespace streamline::tools {

// Requests for inputs of concrete shape `shaped` (the model's inputs in `declared` order, with
// -1 for the dimensions it leaves open; a batched input's first dimension is `batch` in `shaped`).
// InvalidArgument naming the file, the entry and the input for data that does not fit; NotFound
// for a missing file; Unsupported for datatypes perf cannot make (BYTES).
[[nodiscard]] Result<std::vector<RequestInputs>> make_perf_requests(const std::vector<RemoteTensor>& shaped,
                                                                    const std::vector<RemoteTensor>& declared,
                                                                    int64_t batch, const std::string& input_data,
                                                                    uint32_t seed);
// The same from the JSON text itself; `source` names it in errors.
[[nodiscard]] Result<std::vector<RequestInputs>> parse_perf_input_json(const std::string& json,
                                                                       const std::string& source,
                                                                       const std::vector<RemoteTensor>& shaped,
                                                                       const std::vector<RemoteTensor>& declared,
                                                                       int64_t batch);
// Standard base64 (padding optional, whitespace ignored); InvalidArgument on other characters.
[[nodiscard]] Result<std::string> decode_base64(const std::string& text);

}  // namespace streamline::tools
