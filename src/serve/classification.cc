// Top-k classification of an output (classification.h).

#include "serve/classification.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

namespace streamline::serve {
namespace {

// Element i of a numeric tensor as double; false for a dtype that is not numeric.
bool value_at(const Tensor& t, int64_t i, double* out) {
  switch (t.dtype()) {
    case DType::kFloat32:
      *out = t.data<float>()[i];
      return true;
    case DType::kFloat64:
      *out = t.data<double>()[i];
      return true;
    case DType::kFloat16:
      *out = half_to_float(t.data<uint16_t>()[i]);
      return true;
    case DType::kInt64:
      *out = static_cast<double>(t.data<int64_t>()[i]);
      return true;
    case DType::kInt32:
      *out = t.data<int32_t>()[i];
      return true;
    case DType::kInt16:
      *out = t.data<int16_t>()[i];
      return true;
    case DType::kInt8:
      *out = t.data<int8_t>()[i];
      return true;
    case DType::kUInt8:
      *out = t.data<uint8_t>()[i];
      return true;
    case DType::kUInt16:
      *out = t.data<uint16_t>()[i];
      return true;
    case DType::kUInt32:
      *out = t.data<uint32_t>()[i];
      return true;
    case DType::kUInt64:
      *out = static_cast<double>(t.data<uint64_t>()[i]);
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<ClassifiedOutput> classify(const Tensor& t, int64_t k, bool batched, const std::vector<std::string>* labels) {
  if (k < 1) return invalid_argument("classification needs a class count >= 1, got " + std::to_string(k));
  if (t.layout() != Layout::kPlain) return internal_error("classification of a tensor not in the plain layout");
  double probe = 0;
  if (t.numel() > 0 && !value_at(t, 0, &probe))
    return invalid_argument(std::string("classification of a ") + dtype_name(t.dtype()) + " output is not possible");
  const int64_t rows = batched && t.shape().rank() > 0 ? t.shape()[0] : 1;
  const int64_t classes = rows > 0 ? t.numel() / rows : 0;
  const int64_t take = std::min(k, classes);
  ClassifiedOutput out;
  if (batched)
    out.shape = {rows, take};
  else
    out.shape = {take};
  std::vector<int64_t> order(static_cast<size_t>(classes));
  std::vector<double> row(static_cast<size_t>(classes));
  char buf[64];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < classes; ++c) value_at(t, r * classes + c, &row[static_cast<size_t>(c)]);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + take, order.end(), [&](int64_t a, int64_t b) {
      const double x = row[static_cast<size_t>(a)], y = row[static_cast<size_t>(b)];
      return x > y || (x == y && a < b);
    });
    for (int64_t i = 0; i < take; ++i) {
      const int64_t c = order[static_cast<size_t>(i)];
      std::snprintf(buf, sizeof buf, "%f:%lld", row[static_cast<size_t>(c)], static_cast<long long>(c));
      std::string v = buf;
      if (labels && static_cast<size_t>(c) < labels->size()) v += ":" + (*labels)[static_cast<size_t>(c)];
      out.values.push_back(std::move(v));
    }
  }
  return out;
}

std::string serialize_bytes(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    for (int b = 0; b < 4; ++b) out += static_cast<char>((n >> (8 * b)) & 0xff);
    out += v;
  }
  return out;
}

Result<std::vector<std::string>> read_labels(const std::string& path, const std::string& label) {
  std::ifstream in(path);
  if (!in) return not_found(label + ": cannot read the label file");
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
    if (labels.size() > (1u << 24)) return invalid_argument(label + ": more than 16M labels");
  }
  return labels;
}

}  // namespace streamline::serve
