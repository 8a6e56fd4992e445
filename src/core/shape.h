#pragma once
// Shape: the dimensions of a tensor, stored inline (no heap) for up to kMaxInlineRank dims.
//
//   Shape s{1, 3, 224, 224};
//   int64_t n = s.numel();        // 150528
//   std::string t = s.to_string(); // "[1,3,224,224]"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace streamline {

class Shape {
 public:
  static constexpr int kMaxInlineRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }
  Shape(const Shape& o) { assign(o.data(), o.rank()); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.data(), o.rank());
    return *this;
  }
  ~Shape() = default;

  size_t rank() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t* data() const { return rank_ <= kMaxInlineRank ? inline_ : heap_.data(); }
  int64_t* data() { return rank_ <= kMaxInlineRank ? inline_ : heap_.data(); }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + rank_; }
  std::span<const int64_t> dims() const { return {data(), rank_}; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  int64_t back() const { return data()[rank_ - 1]; }

  void push_back(int64_t d);
  void resize(size_t rank, int64_t fill = 1);

  // Product of dims (1 for a scalar).
  int64_t numel() const;
  // Elements after dimension `axis` (exclusive), i.e. the stride of `axis` in a dense layout.
  int64_t stride(size_t axis) const;
  std::string to_string() const;

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  void assign(const int64_t* d, size_t n);

  size_t rank_ = 0;
  int64_t inline_[kMaxInlineRank] = {};
  std::vector<int64_t> heap_;
};

// Hash for use as a map key (plan caches).
struct ShapeHash {
  size_t operator()(const Shape& s) const;
};

// NumPy broadcasting of two shapes; false when incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace streamline
