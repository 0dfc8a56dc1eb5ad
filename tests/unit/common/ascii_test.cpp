// ByteSet: the table holds exactly the bytes its predicate accepts, all 256 of them (signed
// chars above 0x7F included), and all_of agrees with std::all_of over the predicate.
#include "common/ascii.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

namespace sandgate {
namespace {

constexpr auto kDigitOrHigh = [](char c) {
  return (c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80;
};
constexpr ByteSet kSet(kDigitOrHigh);

TEST(ByteSet, HoldsExactlyWhatThePredicateAccepts) {
  for (int i = 0; i < 256; ++i) {
    const char c = static_cast<char>(i);
    EXPECT_EQ(kSet.contains(c), kDigitOrHigh(c)) << "byte " << i;
  }
}

TEST(ByteSet, AllOfAgreesWithTheAlgorithm) {
  const std::string_view cases[] = {"", "0", "0123456789", "12a3", "\xff\x80\x37", "9\x7f", " "};
  for (const std::string_view s : cases) {
    EXPECT_EQ(kSet.all_of(s), std::all_of(s.begin(), s.end(), kDigitOrHigh)) << s;
  }
}

static_assert(kSet.contains('5') && !kSet.contains('a') && kSet.all_of("42"));

}  // namespace
}  // namespace sandgate
