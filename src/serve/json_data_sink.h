#pragma once
// Streams the values of one KServe v2 "data" member into a tensor, event by event, as a SAX JSON
// reader reports them: no document is built, so decoding costs the tensor and nothing per value.
//
//   Tensor t = Tensor::empty(DType::kFloat32, Shape({2, 3}));
//   DataSink sink(&t, DType::kFloat32, {2, 3});
//   // the reader calls, for [[1,2,3],[4,5,6]]:
//   sink.start_array(); sink.start_array(); sink.scalar(JsonNumber::signed_int(1)); ...
//   Status s = sink.finish();      // InvalidArgument unless the data filled the shape
//
// The data is either flat (numel values in one list) or nested exactly as the shape (a list of
// dims[0] lists of dims[1] ... values); a bare value stands for a one-element tensor. Anything else
// (ragged lists, values and lists mixed, nesting deeper than the shape) is refused as it is seen.
// Errors come in the order of the DOM decoder this replaced: structure, then count, then values.
// Values convert as the KServe JSON rules say: integers into integer types within range, any
// number into floating types, true/false into BOOL. Messages name the element or the list and do
// not name the input (the caller adds that). Not thread-safe; one sink per value.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::serve {

// One scalar as the reader reported it.
struct JsonNumber {
  enum Kind { kSigned, kUnsigned, kDouble, kBool, kOther };
  Kind kind = kOther;
  int64_t i = 0;   // kSigned
  uint64_t u = 0;  // kUnsigned: above INT64_MAX
  double d = 0;    // kDouble
  bool b = false;  // kBool

  static JsonNumber signed_int(int64_t v) { return {kSigned, v, 0, 0, false}; }
  static JsonNumber unsigned_int(uint64_t v) {
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return signed_int(static_cast<int64_t>(v));
    return {kUnsigned, 0, v, 0, false};
  }
  static JsonNumber real(double v) { return {kDouble, 0, 0, v, false}; }
  static JsonNumber boolean(bool v) { return {kBool, 0, 0, 0, v}; }
  static JsonNumber other() { return {}; }  // a string or null: never a valid element
  // The number `text` stands for, the text being a JSON number as RapidJSON hands it over with
  // kParseNumbersAsStringsFlag (its grammar checked, its exponent within RapidJSON's bounds):
  // an integer within int64 or uint64 as such, anything else the nearest double (infinite past
  // the largest, zero below the smallest).
  static JsonNumber from_text(std::string_view text);
};

class DataSink {
 public:
  // `tensor`: allocated with `dtype` and `dims` (plain layout), filled in order; nullptr checks the
  // structure and counts the values without storing them (a count the body cannot hold).
  DataSink(Tensor* tensor, DType dtype, std::vector<int64_t> dims);

  // Each returns false once the structure cannot fit the shape; error() says why. A value that is
  // not valid for the dtype (an object counts as one such value) does not stop the walk: the count
  // is checked first, as the protocol's own error order has it, and finish() reports either.
  [[nodiscard]] bool scalar(const JsonNumber& n);
  [[nodiscard]] bool start_array();
  [[nodiscard]] bool end_array();
  [[nodiscard]] bool start_object();
  [[nodiscard]] bool end_object();

  // After the whole value: OK when it held exactly the shape's elements, each valid.
  [[nodiscard]] Status finish() const;
  const std::string& error() const { return error_; }

 private:
  enum class Mode { kUnknown, kFlat, kNested };
  using PutFn = bool (*)(const JsonNumber& n, void* base, int64_t index);

  bool fail(std::string message);
  bool value(const JsonNumber* n);  // one element where it stands; nullptr: an object
  bool put(const JsonNumber* n);    // stores value index_ (when it has a place) and counts it
  bool bump();                      // one more entry in the list at depth_, within its dim
  std::string count_message(int64_t given) const;
  std::string shape_text() const;

  void* base_;
  DType dtype_;
  std::vector<int64_t> dims_;
  int64_t numel_ = 1;
  PutFn put_ = nullptr;
  Mode mode_ = Mode::kUnknown;
  int depth_ = 0;                // lists open
  std::vector<int64_t> counts_;  // entries so far in the open list at each depth
  int64_t index_ = 0;            // values seen
  int object_depth_ = 0;         // inside an object standing for one element
  std::string error_;            // the structure does not fit: the walk stopped
  std::string element_error_;    // the first value not valid for the dtype
};

}  // namespace streamline::serve
