#include "core/shape.h"

#include <algorithm>

namespace streamline {

void Shape::assign(const int64_t* d, size_t n) {
  if (n <= kMaxInlineRank) {
    std::copy(d, d + n, inline_);
    heap_.clear();
  } else {
    heap_.assign(d, d + n);
  }
  rank_ = n;
}

void Shape::push_back(int64_t d) {
  if (rank_ < kMaxInlineRank) {
    inline_[rank_++] = d;
    return;
  }
  if (rank_ == kMaxInlineRank) heap_.assign(inline_, inline_ + kMaxInlineRank);
  heap_.push_back(d);
  ++rank_;
}

void Shape::resize(size_t rank, int64_t fill) {
  std::vector<int64_t> v = to_vector();
  v.resize(rank, fill);
  assign(v.data(), v.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (size_t i = 0; i < rank_; ++i) n *= data()[i];
  return n;
}

int64_t Shape::stride(size_t axis) const {
  int64_t n = 1;
  for (size_t i = axis + 1; i < rank_; ++i) n *= data()[i];
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < rank_; ++i) {
    if (i) s += ",";
    s += std::to_string(data()[i]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  return rank_ == o.rank_ && std::equal(begin(), end(), o.begin());
}

size_t ShapeHash::operator()(const Shape& s) const {
  size_t h = s.rank() * 0x9e3779b97f4a7c15ull;
  for (int64_t d : s) h ^= static_cast<size_t>(d) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.rank(), b.rank());
  Shape s;
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + a.rank() >= r ? a[i + a.rank() - r] : 1;
    const int64_t db = i + b.rank() >= r ? b[i + b.rank() - r] : 1;
    if (da != db && da != 1 && db != 1) return false;
    s.push_back(da == 1 ? db : da);
  }
  *out = s;
  return true;
}

}  // namespace streamline
