// BitwiseAnd/Or/Xor/Not on every integer width with broadcasting, BitCast between types of one
// width, and Where on dtypes moved by width (int8, float16).

#include <cstring>

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

TEST(Bitwise, BinaryOpsBroadcastOnEveryWidth) {
  const Tensor a16 = Tensor::from_vector<int16_t>(Shape{2, 3}, {-1, 0x0f0f, 12, 7, -32768, 5});
  const Tensor b16 = Tensor::from_vector<int16_t>(Shape{3}, {0x00ff, 0x7fff, -4});
  auto run = [](const char* op, const Tensor& a, const Tensor& b) {
    auto r = NodeCase(op, 18, 2).run(cpu_reg(), {a, b});
    EXPECT_TRUE(r.ok()) << op << ": " << r.status().to_string();
    return r.ok() ? (*r)[0] : Tensor();
  };
  const Tensor and16 = run("BitwiseAnd", a16, b16);
  ASSERT_EQ(and16.shape(), (Shape{2, 3}));
  std::vector<int16_t> want;
  for (int i = 0; i < 6; ++i) want.push_back(static_cast<int16_t>(a16.data<int16_t>()[i] & b16.data<int16_t>()[i % 3]));
  EXPECT_EQ(values<int16_t>(and16), want);
  const Tensor a8 = Tensor::from_vector<uint8_t>(Shape{2}, {0xf0, 0x0f});
  const Tensor b8 = Tensor::from_vector<uint8_t>(Shape{}, {0x3c});
  EXPECT_EQ(values<uint8_t>(run("BitwiseOr", a8, b8)), (std::vector<uint8_t>{0xfc, 0x3f}));
  EXPECT_EQ(values<uint8_t>(run("BitwiseXor", a8, b8)), (std::vector<uint8_t>{0xcc, 0x33}));
  const Tensor a64 = Tensor::from_vector<uint64_t>(Shape{1}, {0xffff0000ffff0000ull});
  const Tensor b64 = Tensor::from_vector<uint64_t>(Shape{1}, {0x0000ffffffff0000ull});
  EXPECT_EQ(values<uint64_t>(run("BitwiseAnd", a64, b64)), (std::vector<uint64_t>{0x00000000ffff0000ull}));
  auto n32 = NodeCase("BitwiseNot", 18, 1).run(cpu_reg(), {Tensor::from_vector<int32_t>(Shape{2}, {0, -5})});
  ASSERT_TRUE(n32.ok());
  EXPECT_EQ(values<int32_t>((*n32)[0]), (std::vector<int32_t>{-1, 4}));
  // Floats have no bitwise ops; mixed dtypes are refused.
  std::mt19937 rng(1);
  const Tensor f = random_tensor(Shape{2}, rng);
  EXPECT_FALSE(NodeCase("BitwiseAnd", 18, 2).run(cpu_reg(), {f, f}).ok());
  EXPECT_FALSE(NodeCase("BitwiseOr", 18, 2).run(cpu_reg(), {a8, a16}).ok());
}

TEST(Bitwise, BitCastKeepsTheBits) {
  const Tensor f = Tensor::from_vector<float>(Shape{2, 2}, {1.f, -2.5f, 0.f, 3.25f});
  NodeCase to_i32("BitCast", 26, 1);
  to_i32.i("to", static_cast<int64_t>(DType::kInt32));
  auto r = to_i32.run(cpu_reg(), {f});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].dtype(), DType::kInt32);
  ASSERT_EQ((*r)[0].shape(), f.shape());
  EXPECT_EQ(std::memcmp((*r)[0].raw(), f.raw(), f.nbytes()), 0);
  NodeCase to_half("BitCast", 26, 1);
  to_half.i("to", static_cast<int64_t>(DType::kFloat16));
  auto h = to_half.run(cpu_reg(), {Tensor::from_vector<uint16_t>(Shape{1}, {0x3c00})});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(cpu::load_f(DType::kFloat16, (*h)[0].raw(), 0), 1.0);
  // Widths must match.
  NodeCase to_i64("BitCast", 26, 1);
  to_i64.i("to", static_cast<int64_t>(DType::kInt64));
  EXPECT_FALSE(to_i64.run(cpu_reg(), {f}).ok());
}

TEST(Bitwise, WhereMovesAnyWidth) {
  const Tensor c = Tensor::from_vector<bool>(Shape{3}, {true, false, true});
  const Tensor x = Tensor::from_vector<int8_t>(Shape{3}, {1, 2, 3});
  const Tensor y = Tensor::from_vector<int8_t>(Shape{1}, {-7});
  auto r = NodeCase("Where", 16, 3).run(cpu_reg(), {c, x, y});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<int8_t>((*r)[0]), (std::vector<int8_t>{1, -7, 3}));
  Tensor hx = Tensor::empty(DType::kFloat16, Shape{3}), hy = Tensor::empty(DType::kFloat16, Shape{3});
  for (int i = 0; i < 3; ++i) {
    cpu::store_f(DType::kFloat16, hx.raw(), i, i + 0.5);
    cpu::store_f(DType::kFloat16, hy.raw(), i, -i);
  }
  auto h = NodeCase("Where", 16, 3).run(cpu_reg(), {c, hx, hy});
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(cpu::load_f(DType::kFloat16, (*h)[0].raw(), 1), -1.0);
  EXPECT_EQ(cpu::load_f(DType::kFloat16, (*h)[0].raw(), 2), 2.5);
}

}  // namespace
}  // namespace streamline::ops::testing
