// How the CLI fills the dimensions a model leaves open, and says so with the flag that sets them.

#include <gtest/gtest.h>

#include "tools/cli_common.h"

namespace streamline::tools {
namespace {

const DeclaredInput kTokens{"input_ids", {-1, -1}, {"batch", "sequence"}};

TEST(FillDynamicDims, SequenceAndBatchAreNamedWithTheirFlags) {
  auto f = fill_dynamic_dims({kTokens}, {}, 0, false);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->dims, (std::vector<std::vector<int64_t>>{{1, 1}}));
  ASSERT_EQ(f->notes.size(), 2u);
  EXPECT_EQ(f->notes[0], "input 'input_ids': dimension 0 ('batch') is dynamic; using 1 (set it with --batch N)");
  EXPECT_EQ(f->notes[1],
            "input 'input_ids': dimension 1 ('sequence') is dynamic; using 1 (set it with --shape "
            "input_ids=1,<sequence>)");
}

TEST(FillDynamicDims, GivenBatchIsUsedAndNotNoted) {
  auto f = fill_dynamic_dims({kTokens}, {}, 4, false);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dims[0], (std::vector<int64_t>{4, 1}));
  ASSERT_EQ(f->notes.size(), 1u);
  EXPECT_NE(f->notes[0].find("--shape input_ids=4,<sequence>"), std::string::npos) << f->notes[0];
}

TEST(FillDynamicDims, GivenInputsAndFixedDimsAreLeftAlone) {
  const DeclaredInput image{"pixels", {-1, 3, 224, 224}, {"N", "", "", ""}};
  auto f = fill_dynamic_dims({kTokens, image}, {true, false}, 2, false);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dims[0], kTokens.dims);  // given by --shape or --input: the caller's shape wins
  EXPECT_EQ(f->dims[1], (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_TRUE(f->notes.empty());
}

TEST(FillDynamicDims, UnnamedDimensions) {
  // A model that gives a dimension neither a size nor a name: it must be given.
  const DeclaredInput open{"x", {1, -1, 8}, {}};
  auto local = fill_dynamic_dims({open}, {}, 0, false);
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.status().message().find("--shape x=1,<d1>,8"), std::string::npos) << local.status().message();
  // A server's metadata names no dimension: they are dynamic, filled with 1 and noted.
  auto remote = fill_dynamic_dims({{"x", {-1, -1, 8}, {}}}, {}, 0, true);
  ASSERT_TRUE(remote.ok());
  EXPECT_EQ(remote->dims[0], (std::vector<int64_t>{1, 1, 8}));
  ASSERT_EQ(remote->notes.size(), 2u);
  EXPECT_EQ(remote->notes[1], "input 'x': dimension 1 is dynamic; using 1 (set it with --shape x=1,<d1>,8)");
}

TEST(ParseDims, RefusesWhatIsNotADimension) {
  EXPECT_EQ(*parse_dims("x=1,3,224", "1,3,224"), (std::vector<int64_t>{1, 3, 224}));
  for (const char* bad : {"1,-3", "1,,3", "1,3,", "a", "99999999999999999999", "4294967296"})
    EXPECT_FALSE(parse_dims(std::string("x=") + bad, bad).ok()) << bad;
}

TEST(RandomTensor, AnInputTooLargeIsAnErrorNotACrash) {
  auto t = random_tensor(DType::kInt64, Shape{100000, 10000000}, 1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(t.status().message().find("[100000,10000000]"), std::string::npos) << t.status().message();
  // Products that overflow 64 bits too.
  EXPECT_FALSE(random_tensor(DType::kFloat32, Shape{2147483647, 2147483647, 2147483647}, 1).ok());
  auto small = random_tensor(DType::kFloat32, Shape{2, 3}, 1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->numel(), 6);
}

}  // namespace
}  // namespace streamline::tools
