// UTF-8 checks: well-formed text passes whole, every kind of ill-formed sequence is found
// at its first byte, and replacing makes any bytes well-formed.
#include "common/base/utf8.h"

#include <gtest/gtest.h>

namespace atl {
namespace {

TEST(Utf8Test, WellFormedTextIsValid) {
  for (const char* text : {"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80",
                           "\xf4\x8f\xbf\xbf"}) {
    EXPECT_EQ(FirstInvalidUtf8(text), std::nullopt) << text;
    EXPECT_EQ(ToValidUtf8(text), text);
  }
}

TEST(Utf8Test, IllFormedSequencesAreFoundWhereTheyStart) {
  EXPECT_EQ(FirstInvalidUtf8("ab\xff"), 2u);            // never a UTF-8 byte
  EXPECT_EQ(FirstInvalidUtf8("a\xc3"), 1u);             // truncated
  EXPECT_EQ(FirstInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xe0\x80\xaf"), 0u);      // overlong
  EXPECT_EQ(FirstInvalidUtf8("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x28\xa1"), 0u);      // bad continuation
}

TEST(Utf8Test, ReplacingMakesAnyBytesValid) {
  EXPECT_EQ(ToValidUtf8("a\xffz"), "a\xef\xbf\xbdz");
  EXPECT_EQ(ToValidUtf8("\xc3"), "\xef\xbf\xbd");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(FirstInvalidUtf8(ToValidUtf8(all)), std::nullopt);
}

}  // namespace
}  // namespace atl
