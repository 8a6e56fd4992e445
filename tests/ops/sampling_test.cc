// GridSample and RoiAlign: the CPU kernels against the reference on random inputs (fixed seed) over
// every mode, padding mode and coordinate convention.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

TEST(Sampling, GridSampleMatchesReference) {
  std::mt19937 rng(801);
  const char* modes[] = {"bilinear", "nearest", "bicubic"};
  const char* pads[] = {"zeros", "border", "reflection"};
  int iter = 0;
  for (const char* mode : modes)
    for (const char* pad : pads)
      for (int align = 0; align < 2; ++align, ++iter) {
        const int64_t n = 1 + iter % 2, c = 1 + iter % 3, h = 2 + rng() % 5, w = 2 + rng() % 5;
        Tensor x = random_tensor(Shape{n, c, h, w}, rng, -2.f, 2.f);
        // Grid values a little outside [-1, 1] to exercise the padding modes.
        Tensor grid = random_tensor(
            Shape{n, 1 + static_cast<int64_t>(rng() % 4), 1 + static_cast<int64_t>(rng() % 5), 2}, rng, -1.4f, 1.4f);
        NodeCase nc("GridSample", 16, 2);
        nc.s("mode", mode).s("padding_mode", pad).i("align_corners", align);
        expect_cpu_matches_reference(
            nc, {x, grid}, 1e-5, std::string(mode) + " " + pad + " align " + std::to_string(align), iter % 2 ? 2 : 1);
      }
}

TEST(Sampling, GridSampleIdentityGridReproducesInput) {
  // With align_corners, grid points at pixel centres return the pixels.
  Tensor x = Tensor::from_vector<float>(Shape{1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor grid = Tensor::empty(DType::kFloat32, Shape{1, 2, 3, 2});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      grid.data<float>()[(i * 3 + j) * 2] = -1.f + static_cast<float>(j);
      grid.data<float>()[(i * 3 + j) * 2 + 1] = -1.f + 2.f * static_cast<float>(i);
    }
  NodeCase nc("GridSample", 16, 2);
  nc.i("align_corners", 1);
  auto out = nc.run(cpu_reg(), {x, grid});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0]), values<float>(x));
}

TEST(Sampling, RoiAlignMatchesReference) {
  std::mt19937 rng(802);
  for (int iter = 0; iter < 16; ++iter) {
    // Up to 13 channels on two threads: work splits fall inside a ROI's channels.
    const int64_t n = 1 + iter % 2, c = 1 + (iter * 5) % 13, h = 4 + rng() % 8, w = 4 + rng() % 8, rois = 1 + rng() % 7;
    Tensor x = random_tensor(Shape{n, c, h, w}, rng);
    Tensor boxes = Tensor::empty(DType::kFloat32, Shape{rois, 4});
    Tensor idx = Tensor::empty(DType::kInt64, Shape{rois});
    for (int64_t r = 0; r < rois; ++r) {
      const float x0 = std::uniform_real_distribution<float>(-1.f, static_cast<float>(w))(rng);
      const float y0 = std::uniform_real_distribution<float>(-1.f, static_cast<float>(h))(rng);
      float* b = boxes.data<float>() + r * 4;
      b[0] = x0;
      b[1] = y0;
      b[2] = x0 + std::uniform_real_distribution<float>(0.f, 6.f)(rng);
      b[3] = y0 + std::uniform_real_distribution<float>(0.f, 6.f)(rng);
      idx.data<int64_t>()[r] = static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
    }
    NodeCase nc("RoiAlign", 16, 3);
    nc.s("mode", iter % 4 == 3 ? "max" : "avg")
        .s("coordinate_transformation_mode", iter % 2 ? "half_pixel" : "output_half_pixel")
        .i("output_height", 1 + iter % 3)
        .i("output_width", 2 + iter % 2)
        .i("sampling_ratio", iter % 3)
        .f("spatial_scale", iter % 5 == 0 ? 0.5f : 1.f);
    expect_cpu_matches_reference(nc, {x, boxes, idx}, 1e-5, "RoiAlign " + std::to_string(iter), 1 + iter % 2);
  }
}

TEST(Sampling, RoiAlignRejectsBadBatchIndex) {
  std::mt19937 rng(803);
  NodeCase nc("RoiAlign", 16, 3);
  auto out =
      nc.run(cpu_reg(), {random_tensor(Shape{1, 1, 4, 4}, rng), Tensor::from_vector<float>(Shape{1, 4}, {0, 0, 2, 2}),
                         Tensor::from_vector<int64_t>(Shape{1}, {3})});
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace streamline::ops::testing
