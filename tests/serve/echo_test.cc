// Bounded echoes and valid UTF-8 in what the server sends (echo.h): a reason or a message quoting
// the bytes of a broken config.pbtxt (a stray \xff) used to reach JSON and protobuf strings as they
// were, and Triton's client could not decode the repository index.

#include "serve/echo.h"

#include <gtest/gtest.h>

#include <string>

#include "serve/json_util.h"

namespace streamline::serve {
namespace {

TEST(EchoTest, ValidUtf8ReplacesEachStrayByte) {
  EXPECT_EQ(valid_utf8("plain"), "plain");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(valid_utf8("a\xff\xfe"
                       "b"),
            "a??b");
  EXPECT_EQ(valid_utf8("\xc3"), "?");                                   // cut short
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "??");                              // overlong
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "???");                         // a surrogate
  EXPECT_EQ(valid_utf8(std::string("\0x", 2)), std::string("\0x", 2));  // NUL is valid UTF-8
}

TEST(EchoTest, CappedMessagesAreValidUtf8) {
  EXPECT_EQ(cap_message("name '\xff\xfe' does not match"), "name '??' does not match");
  const std::string long_text(10000, 'a');
  const std::string capped = cap_message(long_text + "\xff");
  EXPECT_LE(capped.size(), kMaxErrorMessage + 32);
  EXPECT_NE(capped.find("more)"), std::string::npos);
}

TEST(EchoTest, JsonStringsAndKeysAreWrittenAsValidUtf8) {
  JsonOut out;
  out.w.StartObject();
  json_key_string(out.w, "reason\xff", "bad byte \xff here");
  out.w.EndObject();
  EXPECT_EQ(out.str(), "{\"reason?\":\"bad byte ? here\"}");
}

}  // namespace
}  // namespace streamline::serve
