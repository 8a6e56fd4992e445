// Image helpers and ready-made stages: codecs round-trip images generated here with the same
// libraries, corrupt and truncated files are refused (never a crash), and resize, crop,
// normalise, layout, softmax and top-k match values worked out by hand.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/stages/image_ops.h"
#include "streamline/pipeline.h"

namespace streamline {
namespace {

using runtime::decode_image;
using runtime::encode_jpeg;
using runtime::encode_png;

// A smooth colour gradient (JPEG-friendly), uint8 [h, w, c].
Tensor gradient(int64_t h, int64_t w, int64_t c) {
  Tensor t = Tensor::empty(DType::kUInt8, Shape{h, w, c});
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k)
        t.data<uint8_t>()[(y * w + x) * c + k] = static_cast<uint8_t>(x * 150 / w + y * 40 / h + k * 30);
  return t;
}

Tensor random_image(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(DType::kUInt8, Shape{h, w, c});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 255);
  return t;
}

Tensor floats(const Shape& s, std::vector<float> v) {
  return Tensor::from_vector<float>(s, v);
}

Result<Tensor> decode(const std::vector<uint8_t>& bytes, int channels = 3, int64_t max_pixels = int64_t{1} << 26) {
  return decode_image(bytes.data(), bytes.size(), {.channels = channels, .max_pixels = max_pixels});
}

TEST(ImageCodec, SniffsFormats) {
  auto png = encode_png(gradient(4, 4, 3));
  auto jpg = encode_jpeg(gradient(8, 8, 3), 90);
  ASSERT_TRUE(png.ok() && jpg.ok());
  EXPECT_EQ(runtime::sniff_image_format(png->data(), png->size()), runtime::ImageFormat::kPng);
  EXPECT_EQ(runtime::sniff_image_format(jpg->data(), jpg->size()), runtime::ImageFormat::kJpeg);
  const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a'};
  EXPECT_EQ(runtime::sniff_image_format(gif, sizeof(gif)), runtime::ImageFormat::kUnknown);
  EXPECT_EQ(runtime::sniff_image_format(nullptr, 0), runtime::ImageFormat::kUnknown);
}

TEST(ImageCodec, PngRoundTripIsExact) {
  for (int64_t c : {1, 3}) {
    const Tensor img = random_image(7, 5, c, 3);
    auto bytes = encode_png(img);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    auto back = decode(*bytes, static_cast<int>(c));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    ASSERT_EQ(back->shape(), img.shape());
    EXPECT_EQ(0, std::memcmp(back->raw(), img.raw(), img.nbytes()));
  }
}

TEST(ImageCodec, GreyPngExpandsToRgb) {
  const Tensor grey = random_image(3, 4, 1, 5);
  auto bytes = encode_png(grey);
  ASSERT_TRUE(bytes.ok());
  auto rgb = decode(*bytes, 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  ASSERT_EQ(rgb->shape(), (Shape{3, 4, 3}));
  for (int64_t p = 0; p < 12; ++p)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(rgb->data<uint8_t>()[p * 3 + k], grey.data<uint8_t>()[p]) << p;
}

TEST(ImageCodec, JpegRoundTripIsClose) {
  const Tensor img = gradient(32, 48, 3);
  auto bytes = encode_jpeg(img, 95);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto back = decode(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->shape(), img.shape());
  double sum = 0;
  int worst = 0;
  for (int64_t i = 0; i < img.numel(); ++i) {
    const int d = std::abs(int{back->data<uint8_t>()[i]} - int{img.data<uint8_t>()[i]});
    worst = std::max(worst, d);
    sum += d;
  }
  EXPECT_LT(worst, 24);
  EXPECT_LT(sum / static_cast<double>(img.numel()), 3.0);
  // Grey output from a colour JPEG.
  auto grey = decode(*bytes, 1);
  ASSERT_TRUE(grey.ok()) << grey.status().to_string();
  EXPECT_EQ(grey->shape(), (Shape{32, 48, 1}));
}

TEST(ImageCodec, GreyJpegDecodesToEqualChannels) {
  auto bytes = encode_jpeg(gradient(16, 16, 1), 90);
  ASSERT_TRUE(bytes.ok());
  auto rgb = decode(*bytes, 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  for (int64_t p = 0; p < 256; ++p) {
    EXPECT_EQ(rgb->data<uint8_t>()[p * 3], rgb->data<uint8_t>()[p * 3 + 1]);
    EXPECT_EQ(rgb->data<uint8_t>()[p * 3], rgb->data<uint8_t>()[p * 3 + 2]);
  }
}

TEST(ImageCodec, GarbageIsInvalidArgument) {
  EXPECT_EQ(decode({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode({1, 2, 3, 4, 5}).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> fake_jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0};
  auto r = decode(fake_jpeg);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("JPEG"), std::string::npos) << r.status().message();
  std::vector<uint8_t> fake_png = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  r = decode(fake_png);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("PNG"), std::string::npos) << r.status().message();
  EXPECT_EQ(decode({0xFF, 0xD8, 0xFF}).status().code(), StatusCode::kInvalidArgument);
}

// Every proper prefix of a valid file is refused: libjpeg's "premature end" warnings count.
TEST(ImageCodec, TruncatedFilesAreRefused) {
  auto jpg = encode_jpeg(gradient(24, 40, 3), 85);
  auto png = encode_png(random_image(9, 11, 3, 8));
  ASSERT_TRUE(jpg.ok() && png.ok());
  for (const auto* file : {&*jpg, &*png}) {
    for (size_t cut = 0; cut < file->size(); cut += std::max<size_t>(1, file->size() / 97)) {
      std::vector<uint8_t> part(file->begin(), file->begin() + static_cast<std::ptrdiff_t>(cut));
      auto r = decode(part);
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "cut at " << cut << " of " << file->size();
    }
    std::vector<uint8_t> last_byte_missing(file->begin(), file->end() - 1);
    EXPECT_EQ(decode(last_byte_missing).status().code(), StatusCode::kInvalidArgument);
  }
}

// Random byte damage: decoding either fails with InvalidArgument or yields an image of the
// declared size; it never crashes or exits.
TEST(ImageCodec, DamagedFilesNeverCrash) {
  auto jpg = encode_jpeg(gradient(24, 40, 3), 85);
  auto png = encode_png(random_image(9, 11, 3, 8));
  ASSERT_TRUE(jpg.ok() && png.ok());
  std::mt19937 rng(42);
  int refused = 0;
  for (const auto* file : {&*jpg, &*png}) {
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<uint8_t> bad = *file;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bad[2 + rng() % (bad.size() - 2)] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto r = decode(bad);
      if (r.ok()) {
        EXPECT_EQ(r->shape().rank(), 3u);
        EXPECT_EQ(r->shape()[2], 3);
      } else {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 100);
  // PNG data is CRC-checked: any damaged byte inside a chunk is caught.
  std::vector<uint8_t> bad = *png;
  bad[bad.size() / 2] ^= 0x5A;
  EXPECT_EQ(decode(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(ImageCodec, MaxPixelsRefusesBeforeDecoding) {
  auto jpg = encode_jpeg(gradient(16, 16, 3), 90);
  auto png = encode_png(gradient(16, 16, 3));
  ASSERT_TRUE(jpg.ok() && png.ok());
  for (const auto* file : {&*jpg, &*png}) {
    auto r = decode(*file, 3, 255);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("max_pixels"), std::string::npos) << r.status().message();
    EXPECT_TRUE(decode(*file, 3, 256).ok());
  }
  EXPECT_EQ(decode(*png, 2).status().code(), StatusCode::kInvalidArgument);  // channels
}

TEST(ImageOps, ResizeKeepsConstantsAndIdentity) {
  Tensor img = random_image(5, 7, 3, 1);
  auto same = runtime::resize_bilinear(img, 5, 7);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(0, std::memcmp(same->raw(), img.raw(), img.nbytes()));
  Tensor flat = Tensor::empty(DType::kUInt8, Shape{6, 9, 2});
  for (int64_t i = 0; i < flat.numel(); ++i) flat.data<uint8_t>()[i] = 77;
  auto big = runtime::resize_bilinear(flat, 13, 4);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->shape(), (Shape{13, 4, 2}));
  for (int64_t i = 0; i < big->numel(); ++i) ASSERT_EQ(big->data<uint8_t>()[i], 77);
}

TEST(ImageOps, ResizeMatchesHalfPixelBilinear) {
  // Halving: half-pixel centres land between source pixels, so each output is a 2x2 block mean.
  Tensor src = floats(Shape{4, 4, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  auto half = runtime::resize_bilinear(src, 2, 2);
  ASSERT_TRUE(half.ok());
  const float want[] = {2.5f, 4.5f, 10.5f, 12.5f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(half->data<float>()[i], want[i]) << i;
  // Doubling [0, 4]: sources -0.25 (clamped), 0.25, 0.75, 1.25 (clamped to the last pixel).
  auto twice = runtime::resize_bilinear(floats(Shape{1, 2, 1}, {0, 4}), 1, 4);
  ASSERT_TRUE(twice.ok());
  const float want2[] = {0.f, 1.f, 3.f, 4.f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(twice->data<float>()[i], want2[i]) << i;
  // uint8 rounds to nearest.
  Tensor u = Tensor::from_vector<uint8_t>(Shape{1, 2, 1}, {0, 3});
  auto ur = runtime::resize_bilinear(u, 1, 4);
  ASSERT_TRUE(ur.ok());
  const uint8_t want3[] = {0, 1, 2, 3};  // 0, 0.75, 2.25, 3
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ur->data<uint8_t>()[i], want3[i]) << i;
}

TEST(ImageOps, ShorterSideThenCentreCrop) {
  // Pixel value = x coordinate, so the crop offset shows in the values.
  Tensor img = Tensor::empty(DType::kFloat32, Shape{100, 200, 1});
  for (int64_t y = 0; y < 100; ++y)
    for (int64_t x = 0; x < 200; ++x) img.data<float>()[y * 200 + x] = static_cast<float>(x);
  auto scaled = runtime::resize_shorter_side(img, 50);
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ(scaled->shape(), (Shape{50, 100, 1}));
  auto crop = runtime::center_crop(*scaled, 50, 50);
  ASSERT_TRUE(crop.ok());
  EXPECT_EQ(crop->shape(), (Shape{50, 50, 1}));
  // Output x' of the scaled image samples source 2x' + 0.5; the crop starts at x' = 25.
  EXPECT_FLOAT_EQ(crop->data<float>()[0], 50.5f);
  EXPECT_FLOAT_EQ(crop->data<float>()[49], 148.5f);
  auto tall = runtime::resize_shorter_side(Tensor::empty(DType::kUInt8, Shape{30, 10, 3}), 20);
  ASSERT_TRUE(tall.ok());
  EXPECT_EQ(tall->shape(), (Shape{60, 20, 3}));
  EXPECT_EQ(runtime::center_crop(*scaled, 51, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::resize_bilinear(img, 0, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::resize_bilinear(Tensor::empty(DType::kInt64, Shape{2, 2, 1}), 3, 3).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::resize_bilinear(Tensor::empty(DType::kUInt8, Shape{2, 2}), 3, 3).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ImageOps, NormalizeAndLayout) {
  Tensor img = Tensor::from_vector<uint8_t>(Shape{1, 2, 3}, {0, 51, 102, 153, 204, 255});
  const std::vector<float> mean{0.5f, 0.f, 0.25f}, sd{0.5f, 2.f, 0.25f};
  auto n = runtime::normalize_hwc(img, mean, sd, 1.f / 255.f);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  const float want[] = {-1.f, 0.1f, 0.6f, 0.2f, 0.4f, 3.f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(n->data<float>()[i], want[i], 1e-6f) << i;
  auto nchw = runtime::hwc_to_nchw(*n);
  ASSERT_TRUE(nchw.ok());
  EXPECT_EQ(nchw->shape(), (Shape{1, 3, 1, 2}));
  const float planar[] = {-1.f, 0.2f, 0.1f, 0.4f, 0.6f, 3.f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(nchw->data<float>()[i], planar[i], 1e-6f) << i;
  const std::vector<float> two{1.f, 2.f}, zero{0.f};
  EXPECT_EQ(runtime::normalize_hwc(img, two, sd, 1.f).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::normalize_hwc(img, mean, zero, 1.f).status().code(), StatusCode::kInvalidArgument);
  auto u8 = runtime::hwc_to_nchw(img);
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(u8->data<uint8_t>()[1], 153);
}

TEST(ImageOps, SoftmaxAndTopK) {
  Tensor logits = floats(Shape{2, 4}, {1.f, 3.f, 2.f, 3.f, -1.f, NAN, 5.f, 0.f});
  auto top = runtime::top_k_last_axis(logits, 3);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->indices.shape(), (Shape{2, 3}));
  const int64_t want_idx[] = {1, 3, 2, 2, 3, 0};  // row 1: 5 (2), 0 (3), -1 (0); NaN last
  for (int i = 0; i < 6; ++i) EXPECT_EQ(top->indices.data<int64_t>()[i], want_idx[i]) << i;
  EXPECT_FLOAT_EQ(top->scores.data<float>()[0], 3.f);
  EXPECT_FLOAT_EQ(top->scores.data<float>()[3], 5.f);

  auto sm = runtime::softmax_last_axis(floats(Shape{3}, {0.f, std::log(2.f), std::log(5.f)}));
  ASSERT_TRUE(sm.ok());
  EXPECT_NEAR(sm->data<float>()[0], 0.125f, 1e-6f);
  EXPECT_NEAR(sm->data<float>()[1], 0.25f, 1e-6f);
  EXPECT_NEAR(sm->data<float>()[2], 0.625f, 1e-6f);
  auto one = runtime::top_k_last_axis(*sm, 10);  // k clamped; rank 1 in, rank 1 out
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->indices.shape(), (Shape{3}));
  EXPECT_EQ(one->indices.data<int64_t>()[0], 2);
  EXPECT_EQ(runtime::top_k_last_axis(logits, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::top_k_last_axis(Tensor::empty(DType::kInt64, Shape{4}), 1).status().code(),
            StatusCode::kInvalidArgument);
}

// The stages check their wiring and options when the pipeline is built.
TEST(ImageStages, BuildChecksWiringAndOptions) {
  auto build = [](std::shared_ptr<Stage> stage, std::vector<std::string> outs) {
    PipelineBuilder b;
    b.input("in");
    b.add_stage({.name = "s", .inputs = {"in"}, .outputs = std::move(outs)}, std::move(stage));
    return b.build().status();
  };
  Status s = build(stages::top_k(), {"only_one"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("stage 's'"), std::string::npos) << s.message();
  EXPECT_EQ(build(stages::top_k({.k = 0}), {"a", "b"}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(build(stages::top_k(), {"a", "b"}).ok());
  EXPECT_EQ(build(stages::decode_image({.channels = 4}), {"a"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(build(stages::resize_image({.height = 224, .width = 224, .shorter_side = 100}), {"a"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(build(stages::normalize_image({.mean = {}, .std = {1.f}}), {"a"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(build(stages::hwc_to_nchw(), {"a", "b"}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(build(stages::preprocess_image(), {"a"}).ok());
}

// decode -> resize -> normalise -> layout as separate stages equals the helpers called in turn;
// a corrupt file fails its own request at the decode stage.
TEST(ImageStages, ChainMatchesHelpers) {
  PipelineBuilder b;
  b.input("file");
  b.add_stage({.name = "decode", .inputs = {"file"}, .outputs = {"rgb"}}, stages::decode_image());
  b.add_stage({.name = "resize", .inputs = {"rgb"}, .outputs = {"small"}},
              stages::resize_image({.height = 12, .width = 12, .shorter_side = 14}));
  b.add_stage({.name = "norm", .inputs = {"small"}, .outputs = {"f"}}, stages::normalize_image());
  b.add_stage({.name = "layout", .inputs = {"f"}, .outputs = {"x"}}, stages::hwc_to_nchw());
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto png = encode_png(random_image(20, 30, 3, 11));
  ASSERT_TRUE(png.ok());
  InferRequest req;
  req.inputs["file"] = Tensor::from_vector<uint8_t>(Shape{static_cast<int64_t>(png->size())}, *png);
  InferResponse r = (*p)->infer(req);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  auto rgb = decode(*png);
  ASSERT_TRUE(rgb.ok());
  auto scaled = runtime::resize_shorter_side(*rgb, 14);
  ASSERT_TRUE(scaled.ok());
  auto crop = runtime::center_crop(*scaled, 12, 12);
  ASSERT_TRUE(crop.ok());
  const stages::NormalizeImageOptions no;
  auto f = runtime::normalize_hwc(*crop, no.mean, no.std, no.scale);
  ASSERT_TRUE(f.ok());
  auto x = runtime::hwc_to_nchw(*f);
  ASSERT_TRUE(x.ok());
  const Tensor& got = r.outputs.at("x");
  ASSERT_EQ(got.shape(), (Shape{1, 3, 12, 12}));
  EXPECT_EQ(0, std::memcmp(got.raw(), x->raw(), x->nbytes()));

  InferRequest bad;
  bad.inputs["file"] = Tensor::from_vector<uint8_t>(Shape{10}, std::vector<uint8_t>(png->begin(), png->begin() + 10));
  InferResponse br = (*p)->infer(bad);
  EXPECT_EQ(br.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(br.status.message().find("stage 'decode'"), std::string::npos) << br.status.message();
  InferRequest wrong_type;
  wrong_type.inputs["file"] = floats(Shape{4}, {1, 2, 3, 4});
  EXPECT_EQ((*p)->infer(wrong_type).status.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline
