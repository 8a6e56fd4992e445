#include "serve/json_data_sink.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>

#include "serve/model_config.h"

namespace streamline::serve {
namespace {

double as_double(const JsonNumber& n) {
  if (n.kind == JsonNumber::kSigned) return static_cast<double>(n.i);
  if (n.kind == JsonNumber::kUnsigned) return static_cast<double>(n.u);
  return n.d;
}

bool is_number(const JsonNumber& n) {
  return n.kind == JsonNumber::kSigned || n.kind == JsonNumber::kUnsigned || n.kind == JsonNumber::kDouble;
}

// Half-precision types arrive as JSON numbers and are stored as 16-bit patterns.
struct Half {};
struct BFloat {};

// Converts `n` to the element type T at base[index]; false when it is not a valid T.
template <typename T>
bool put_as(const JsonNumber& n, void* base, int64_t index) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat>) {
    if (!is_number(n)) return false;
    const float f = static_cast<float>(as_double(n));
    static_cast<uint16_t*>(base)[index] = std::is_same_v<T, Half> ? float_to_half(f) : float_to_bfloat16(f);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (n.kind != JsonNumber::kBool) return false;
    static_cast<uint8_t*>(base)[index] = n.b ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!is_number(n)) return false;
    static_cast<T*>(base)[index] = static_cast<T>(as_double(n));
  } else if constexpr (std::is_signed_v<T>) {
    if (n.kind != JsonNumber::kSigned) return false;
    if (n.i < std::numeric_limits<T>::min() || n.i > std::numeric_limits<T>::max()) return false;
    static_cast<T*>(base)[index] = static_cast<T>(n.i);
  } else {
    uint64_t x = 0;
    if (n.kind == JsonNumber::kSigned && n.i >= 0)
      x = static_cast<uint64_t>(n.i);
    else if (n.kind == JsonNumber::kUnsigned)
      x = n.u;
    else
      return false;
    if (x > std::numeric_limits<T>::max()) return false;
    static_cast<T*>(base)[index] = static_cast<T>(x);
  }
  return true;
}

using PutFn = bool (*)(const JsonNumber&, void*, int64_t);

PutFn put_for(DType t) {
  switch (t) {
    case DType::kFloat32:
      return &put_as<float>;
    case DType::kFloat64:
      return &put_as<double>;
    case DType::kFloat16:
      return &put_as<Half>;
    case DType::kBFloat16:
      return &put_as<BFloat>;
    case DType::kUInt8:
      return &put_as<uint8_t>;
    case DType::kInt8:
      return &put_as<int8_t>;
    case DType::kUInt16:
      return &put_as<uint16_t>;
    case DType::kInt16:
      return &put_as<int16_t>;
    case DType::kUInt32:
      return &put_as<uint32_t>;
    case DType::kInt32:
      return &put_as<int32_t>;
    case DType::kUInt64:
      return &put_as<uint64_t>;
    case DType::kInt64:
      return &put_as<int64_t>;
    case DType::kBool:
      return &put_as<bool>;
    default:
      return nullptr;
  }
}

// A real that std::from_chars found out of range: infinite when its decimal exponent is above
// zero, else zero (from_chars reports both only at the ends of double's range, so the digits
// before the point and the exponent tell which).
double out_of_range_real(std::string_view text) {
  const bool minus = text.front() == '-';
  size_t i = minus ? 1 : 0;
  int64_t exponent = 0;
  bool nonzero = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    nonzero = nonzero || text[i] != '0';
    if (nonzero) ++exponent;
  }
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9' && !nonzero; ++i) {
      nonzero = text[i] != '0';
      if (!nonzero) --exponent;
    }
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    int64_t e = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
      e = std::min<int64_t>(e * 10 + (text[i] - '0'), 1 << 30);
    exponent += negative ? -e : e;
  }
  const double magnitude = exponent > 0 ? HUGE_VAL : 0.0;
  return minus ? -magnitude : magnitude;
}

}  // namespace

// RapidJSON 1.1 converts reals itself, and its exact (full-precision) conversion reads a zero
// significand with a large exponent ("0e51", "0.0e100") as an arbitrary value (it normalises a
// zero DiyFp), and its faster one is not exact. So the readers take numbers as
// text and convert them here: integers as RapidJSON would, reals with std::from_chars (exact).
JsonNumber JsonNumber::from_text(std::string_view text) {
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  if (text.empty()) return other();
  if (text.find_first_of(".eE") == std::string_view::npos) {
    if (text.front() == '-') {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(begin, end, v);
      if (ec == std::errc() && p == end) return signed_int(v);
    } else {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(begin, end, v);
      if (ec == std::errc() && p == end) return unsigned_int(v);
    }
  }
  double d = 0;
  auto [p, ec] = std::from_chars(begin, end, d);
  if (ec == std::errc::result_out_of_range) return real(out_of_range_real(text));
  if (ec != std::errc() || p != end) return other();
  return real(d);
}

DataSink::DataSink(Tensor* tensor, DType dtype, std::vector<int64_t> dims)
    : base_(tensor ? tensor->raw() : nullptr), dtype_(dtype), dims_(std::move(dims)), put_(put_for(dtype)) {
  for (int64_t d : dims_) numel_ *= d;
}

bool DataSink::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return false;
}

std::string DataSink::shape_text() const {
  return Shape(dims_).to_string();
}

std::string DataSink::count_message(int64_t given) const {
  return std::to_string(given) + " elements given, shape " + shape_text() + " holds " + std::to_string(numel_);
}

bool DataSink::put(const JsonNumber* n) {
  const int64_t at = index_++;
  if (!put_) return fail(std::string("datatype ") + dtype_name(dtype_) + " cannot be given as JSON");
  if (base_ == nullptr || at >= numel_ || !element_error_.empty()) return true;  // counting only
  if (n == nullptr || !put_(*n, base_, at))
    element_error_ = "element " + std::to_string(at) + " is not a valid " + dtype_to_kserve(dtype_) + " value";
  return true;
}

bool DataSink::bump() {
  const size_t level = static_cast<size_t>(depth_ - 1);
  if (++counts_[level] > dims_[level])
    return fail("\"data\" does not match shape " + shape_text() + ": a list at depth " + std::to_string(depth_) +
                " holds more than " + std::to_string(dims_[level]) + " entries");
  return true;
}

bool DataSink::value(const JsonNumber* n) {
  if (depth_ == 0) return put(n);  // "data": 5
  if (depth_ == 1 && mode_ == Mode::kUnknown) mode_ = Mode::kFlat;
  if (mode_ == Mode::kNested) {
    if (static_cast<size_t>(depth_) < dims_.size())
      return fail("\"data\" does not match shape " + shape_text() + ": a value at depth " + std::to_string(depth_) +
                  " where a list belongs");
    if (!bump()) return false;
  }
  return put(n);
}

bool DataSink::scalar(const JsonNumber& n) {
  if (!error_.empty()) return false;
  if (object_depth_ > 0) return true;  // inside an object standing for a value
  return value(&n);
}

bool DataSink::start_object() {
  if (!error_.empty()) return false;
  if (object_depth_++ > 0) return true;
  return value(nullptr);  // one value, never a valid one; what is inside does not count
}

bool DataSink::end_object() {
  if (!error_.empty()) return false;
  --object_depth_;
  return true;
}

bool DataSink::start_array() {
  if (!error_.empty()) return false;
  if (object_depth_ > 0) return true;
  if (depth_ == 0) {
    depth_ = 1;
    counts_.assign(1, 0);
    return true;
  }
  if (depth_ == 1) {
    if (mode_ == Mode::kFlat)
      return fail("\"data\" mixes values and lists (give it flat, or nested as shape " + shape_text() + ")");
    mode_ = Mode::kNested;
  }
  if (static_cast<size_t>(depth_) >= dims_.size())
    return fail("\"data\" is nested deeper than its shape " + shape_text());
  if (!bump()) return false;
  ++depth_;
  counts_.push_back(0);
  return true;
}

bool DataSink::end_array() {
  if (!error_.empty()) return false;
  if (object_depth_ > 0) return true;
  const size_t level = static_cast<size_t>(depth_ - 1);
  if (mode_ == Mode::kNested && counts_[level] != dims_[level])
    return fail("\"data\" does not match shape " + shape_text() + ": a list at depth " + std::to_string(depth_) +
                " holds " + std::to_string(counts_[level]) + " entries, not " + std::to_string(dims_[level]));
  counts_.pop_back();
  --depth_;
  return true;
}

Status DataSink::finish() const {
  if (!error_.empty()) return invalid_argument(error_);
  // The count first, then the values: a wrong count is the first thing to fix.
  if (index_ != numel_) return invalid_argument(count_message(index_));
  if (!element_error_.empty()) return invalid_argument(element_error_);
  if (base_ == nullptr && numel_ > 0) return internal_error("the data was counted but not stored");
  return ok_status();
}

}  // namespace streamline::serve
