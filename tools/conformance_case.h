#pragma once
// One ONNX backend-test case (a folder with model.onnx and test_data_set_N/ folders holding
// input_K.pb / output_K.pb TensorProto files), run in the current process.
//
//   CaseOutcome o = run_case_in_process("/usr/share/libonnx-testdata/data/node/test_abs", 1);
//   std::cout << format_case_line(o) << std::endl;     // what a case child prints
//
// `streamline conformance` runs each case in its own child process (see conformance_runner.h);
// the child calls run_case_in_process and prints one result line, which the parent parses back
// with parse_case_line. Nothing here aborts on a bad case: every problem becomes an outcome.

#include <optional>
#include <string>

#include "core/tensor.h"

namespace streamline::tools {

enum class CaseStatus { kPassed, kFailed, kUnsupported, kError, kCrashed };

// "passed", "failed", "unsupported", "error", "crashed".
const char* case_status_name(CaseStatus s);
std::optional<CaseStatus> case_status_from_name(const std::string& s);

struct CaseOutcome {
  CaseStatus status = CaseStatus::kError;
  std::string detail;  // empty when passed
};

// Loads the case's model (graph passes on, `threads` intra-op threads), runs every data set and
// compares each output with the expected one.
CaseOutcome run_case_in_process(const std::string& case_dir, int threads);

// Tolerances of numpy.isclose: |got - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// Compares `got` with `expected`: same dtype and shape, floats (float16/bfloat16/float32/float64)
// within `tol` with NaN equal to NaN at the same position, every other type exact. Returns "" when
// they match, else a description: "dtype int32, expected int64", "shape [2,3], expected [3,2]",
// "3 of 60 values differ; max abs error E at index I (expected X, got Y)".
std::string compare_tensors(const Tensor& expected, const Tensor& got, const Tolerance& tol = {});

// The op a case tests, read from its model: for an expanded function body the op whose function
// it is (taken from the body's value names), else the first node that is not a Constant (domain-
// qualified outside ai.onnx, e.g. "ai.onnx.ml::Scaler"); "?" when the model cannot be read.
std::string case_op(const std::string& case_dir);

// The one line a case child prints: "@@case\tSTATUS\tDETAIL" (tabs/newlines in DETAIL become spaces).
std::string format_case_line(const CaseOutcome& o);
// Finds the result line in a child's stdout; nullopt when there is none.
std::optional<CaseOutcome> parse_case_line(const std::string& child_stdout);

}  // namespace streamline::tools
