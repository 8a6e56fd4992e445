// String tensors, AnyValue (tensor / sequence / optional), UTF-8 round trips and .npy string arrays.

#include "core/value.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/npy.h"
#include "core/utf8.h"

namespace streamline {
namespace {

TEST(StringTensor, HoldsStringsAndClonesThemDeeply) {
  Tensor t = Tensor::from_strings(Shape{2, 2}, {"a", "a much longer string than fits in place", ""});
  ASSERT_EQ(t.dtype(), DType::kString);
  ASSERT_NE(t.strings(), nullptr);
  EXPECT_EQ(t.strings()[1], "a much longer string than fits in place");
  EXPECT_EQ(t.strings()[2], "");  // filled in order, the rest stay empty
  EXPECT_EQ(t.strings()[3], "");
  EXPECT_EQ(t.nbytes(), 0u);  // no fixed-size bytes to copy
  EXPECT_EQ(t.describe(), "string[2,2]");
  Tensor c = t.clone();
  c.strings()[1] = "changed";
  EXPECT_EQ(t.strings()[1], "a much longer string than fits in place");
  EXPECT_EQ(c.strings()[0], "a");
  // Numeric tensors have no strings.
  EXPECT_EQ(Tensor::scalar<float>(1.f).strings(), nullptr);
  // An empty string tensor is still a defined tensor with storage.
  Tensor e = Tensor::empty(DType::kString, Shape{0, 3});
  EXPECT_TRUE(e.defined());
  EXPECT_EQ(e.numel(), 0);
}

TEST(Tensor, ClonesCopyEveryByteAndOwnTheirStorage) {
  // Large enough for a kept mapping of its own; the clone's storage is not zeroed first, so every
  // byte must come from the copy.
  const Shape shape{3, 1 << 18};
  Tensor t = Tensor::empty(DType::kFloat32, shape, Layout::kChannelsLast);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i % 977) - 400.f;
  for (int round = 0; round < 2; ++round) {  // the second one may reuse the first one's mapping
    Tensor c = t.clone();
    ASSERT_NE(c.raw(), t.raw());
    EXPECT_EQ(c.shape(), shape);
    EXPECT_EQ(c.layout(), Layout::kChannelsLast);
    EXPECT_EQ(std::memcmp(c.raw(), t.raw(), t.nbytes()), 0);
    c.data<float>()[5] = 1e9f;
  }
  EXPECT_EQ(p[5], 5.f - 400.f);
  // for_overwrite: storage of the right size, to be filled by the caller.
  Tensor w = Tensor::for_overwrite(DType::kInt64, Shape{4, 5});
  ASSERT_NE(w.raw(), nullptr);
  EXPECT_EQ(w.nbytes(), 4u * 5u * 8u);
  Tensor s = Tensor::for_overwrite(DType::kString, Shape{2});
  EXPECT_EQ(s.strings()[1], "");
}

// sole_owner: only a tensor that holds its storage alone, so that nothing else can see a write.
TEST(Tensor, SoleOwnerOnlyWhenNothingElseSharesTheStorage) {
  Tensor a = Tensor::empty(DType::kFloat32, Shape{2, 3});
  EXPECT_TRUE(a.sole_owner());
  {
    const Tensor copy = a;  // NOLINT(performance-unnecessary-copy-initialization): the point of the test
    EXPECT_FALSE(a.sole_owner());
    EXPECT_FALSE(copy.sole_owner());
  }
  EXPECT_TRUE(a.sole_owner());
  Tensor r = a.reshaped(Shape{6});
  EXPECT_FALSE(a.sole_owner());
  EXPECT_FALSE(r.sole_owner());
  a = Tensor();
  EXPECT_TRUE(r.sole_owner());  // the last holder
  float borrowed[4] = {};
  EXPECT_FALSE(Tensor::view(DType::kFloat32, Shape{4}, borrowed).sole_owner());
  EXPECT_FALSE(Tensor().sole_owner());
}

TEST(AnyValue, KindsAndAccessors) {
  const Tensor a = Tensor::scalar<float>(1.f);
  const Tensor b = Tensor::from_vector<float>(Shape{2}, {2.f, 3.f});
  AnyValue none;
  EXPECT_FALSE(none.defined());
  AnyValue t = a;
  EXPECT_TRUE(t.is_tensor());
  EXPECT_EQ(t.elem_dtype(), DType::kFloat32);
  EXPECT_EQ(AnyValue(Tensor()).defined(), false);

  AnyValue s = AnyValue::sequence({a, b}, DType::kFloat32);
  EXPECT_TRUE(s.is_sequence());
  EXPECT_FALSE(s.is_tensor());
  ASSERT_EQ(s.items().size(), 2u);
  EXPECT_EQ(s.items()[1].shape(), Shape{2});
  EXPECT_EQ(s.describe(), "sequence of float32 [2 tensors]");
  EXPECT_TRUE(t.items().empty());

  AnyValue empty = AnyValue::none(ValueKind::kOptionalSequence, DType::kInt64);
  EXPECT_TRUE(empty.is_optional());
  EXPECT_FALSE(empty.has_element());
  EXPECT_FALSE(empty.element().defined());
  EXPECT_EQ(empty.kind(), ValueKind::kOptionalSequence);
  EXPECT_EQ(empty.describe(), "optional sequence of int64 (empty)");

  AnyValue some = AnyValue::some(s);
  EXPECT_EQ(some.kind(), ValueKind::kOptionalSequence);
  ASSERT_TRUE(some.has_element());
  EXPECT_TRUE(some.element().is_sequence());
  EXPECT_EQ(some.element().items().size(), 2u);
  EXPECT_TRUE(some.items().empty());  // an optional is not itself a sequence
  AnyValue some_tensor = AnyValue::some(t);
  EXPECT_EQ(some_tensor.kind(), ValueKind::kOptionalTensor);
  EXPECT_TRUE(some_tensor.element().is_tensor());
  EXPECT_EQ(some_tensor.element().tensor().data<float>()[0], 1.f);
}

TEST(AnyValue, CloneCopiesEveryTensor) {
  Tensor a = Tensor::from_vector<float>(Shape{2}, {1.f, 2.f});
  AnyValue s = AnyValue::sequence({a}, DType::kFloat32);
  AnyValue c = AnyValue::some(s).clone();
  a.data<float>()[0] = 9.f;
  EXPECT_EQ(s.items()[0].data<float>()[0], 9.f);  // copies of values share tensors
  EXPECT_EQ(c.element().items()[0].data<float>()[0], 1.f);
}

TEST(AnyValue, KindHelpersAndNames) {
  EXPECT_EQ(optional_of(ValueKind::kSequence), ValueKind::kOptionalSequence);
  EXPECT_EQ(optional_of(ValueKind::kTensor), ValueKind::kOptionalTensor);
  EXPECT_EQ(element_kind(ValueKind::kOptionalTensor), ValueKind::kTensor);
  EXPECT_TRUE(is_optional_kind(ValueKind::kOptionalTensor));
  EXPECT_FALSE(is_optional_kind(ValueKind::kSequence));
  EXPECT_EQ(value_type_name(ValueKind::kSequence, DType::kString), "sequence of string");
  EXPECT_EQ(value_type_name(ValueKind::kTensor, DType::kInt64), "int64 tensor");
}

TEST(Utf8, RoundTripsEverythingIncludingInvalidBytes) {
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // café € 😀
  const std::u32string cps = utf8_decode(text);
  ASSERT_EQ(cps.size(), 8u);
  EXPECT_EQ(cps[3], U'\u00e9');
  EXPECT_EQ(cps[5], U'\u20ac');
  EXPECT_EQ(cps[7], U'\U0001F600');
  EXPECT_EQ(utf8_encode(cps), text);
  // A lone continuation byte, a truncated sequence and 0xFF survive unchanged.
  const std::string bad = "a\x80z\xe2\x82\xff";
  EXPECT_EQ(utf8_encode(utf8_decode(bad)), bad);
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("sl_value_test_") + name)).string();
}

TEST(Npy, StringArraysRoundTripAsUnicode) {
  Tensor t = Tensor::from_strings(Shape{3}, {"monday", "", "caf\xc3\xa9"});
  const std::string path = temp_path("strings.npy");
  ASSERT_TRUE(write_npy(path, t).ok());
  auto back = read_npy(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->dtype(), DType::kString);
  ASSERT_EQ(back->shape(), Shape{3});
  EXPECT_EQ(back->strings()[0], "monday");
  EXPECT_EQ(back->strings()[1], "");
  EXPECT_EQ(back->strings()[2], "caf\xc3\xa9");
  std::filesystem::remove(path);
}

// A .npy file written by hand: header then data.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

TEST(Npy, ByteStringsAndTruncatedStringData) {
  auto s = parse_npy(npy_bytes("|S3", "(2,)", std::string("ab\0xyz", 6)));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->strings()[0], "ab");
  EXPECT_EQ(s->strings()[1], "xyz");
  // Two strings of width 4 need 32 bytes; 8 are there. Huge counts of empty strings are refused too.
  EXPECT_EQ(parse_npy(npy_bytes("<U4", "(2,)", std::string(8, 'a'))).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_npy(npy_bytes("<U0", "(1099511627776,)", "")).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline
