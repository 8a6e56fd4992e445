#pragma once
// Shared by the serve fuzz targets: quiet logs, a fatal check that libFuzzer reports as a crash,
// and the round trip of decoded inputs through the response encoders.

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "core/logging.h"
#include "core/tensor.h"
#include "streamline/serving.h"

namespace streamline::fuzz {

// An invariant the code under test promises; a violation aborts, which libFuzzer reports with
// the input that caused it.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// Warnings about unknown fields and parameters, and protobuf's complaints about strings that are
// not UTF-8, are expected by the thousand.
inline void quiet_logs() {
  set_log_level(LogLevel::kError);
  google::protobuf::SetLogHandler(nullptr);
}

// A response whose outputs are the request's inputs (the encoders then see every dtype and shape
// the decoders let through).
inline InferResponse echo_response(const std::map<std::string, Tensor>& inputs) {
  InferResponse r;
  r.outputs = inputs;
  return r;
}

}  // namespace streamline::fuzz
