#include <gtest/gtest.h>

#include "core/status.h"

namespace streamline {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("not positive: " + std::to_string(x));
  return x * 2;
}

Status use(int x, int* out) {
  SL_ASSIGN_OR_RETURN(*out, parse_positive(x));
  return ok_status();
}

TEST(Status, OkAndErrorsCarryCodeAndMessage) {
  EXPECT_TRUE(ok_status().ok());
  Status s = not_found("model 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NotFound: model 'x'");
  EXPECT_EQ(s.with_context("load").message(), "load: model 'x'");
}

TEST(Status, AssignOrReturnPropagates) {
  int v = 0;
  EXPECT_TRUE(use(3, &v).ok());
  EXPECT_EQ(v, 6);
  Status s = use(-1, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v, 6);
}

TEST(Status, ResultFromOkStatusIsInternalError) {
  Result<int> r{ok_status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace streamline
