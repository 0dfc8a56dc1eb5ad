#include "secrets/redactor.hpp"

#include <gtest/gtest.h>

#include <random>

namespace sandgate::secrets {
namespace {

std::string one_shot(const std::vector<std::string>& needles, std::string_view text,
                     std::size_t* count = nullptr) {
  Redactor r(needles);
  std::string out = r.feed(text);
  out += r.finish();
  if (count != nullptr) *count = r.redactions();
  return out;
}

struct RedactCase {
  std::string name;
  std::vector<std::string> needles;
  std::string input;
  std::string output;
  std::size_t redactions;
};

class RedactorTable : public ::testing::TestWithParam<RedactCase> {};

TEST_P(RedactorTable, OneShot) {
  const RedactCase& c = GetParam();
  std::size_t count = 0;
  EXPECT_EQ(one_shot(c.needles, c.input, &count), c.output);
  EXPECT_EQ(count, c.redactions);
  Redactor header(c.needles);
  EXPECT_EQ(header.redact(c.input), c.output);
  EXPECT_EQ(header.redactions(), c.redactions);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, RedactorTable,
    ::testing::Values(RedactCase{"Nothing", {"ghs_abc"}, "hello world", "hello world", 0},
                      RedactCase{"Once", {"ghs_abc"}, "token=ghs_abc;", "token=*******;", 1},
                      RedactCase{"Twice", {"ghs_abc"}, "ghs_abcghs_abc", "**************", 2},
                      RedactCase{"WholeInput", {"s3cr3t"}, "s3cr3t", "******", 1},
                      RedactCase{"Overlapping", {"aba"}, "ababa", "*****", 2},
                      RedactCase{"TwoNeedlesOverlap", {"abc", "bcdef"}, "xabcdefx", "x******x", 2},
                      RedactCase{
                          "Base64Form", {"tok", "eDp0b2s="}, "Basic eDp0b2s=", "Basic ********", 1},
                      RedactCase{"Prefix only", {"ghs_abc"}, "ghs_ab", "ghs_ab", 0},
                      RedactCase{"EmptyNeedleIgnored", {""}, "abc", "abc", 0},
                      RedactCase{"NoNeedles", {}, "abc", "abc", 0},
                      RedactCase{"Binary",
                                 {std::string("\0\xff", 2)},
                                 std::string("a\0\xff"
                                             "b",
                                             4),
                                 "a**b",
                                 1}),
    [](const auto& row) {
      std::string n = row.param.name;
      for (char& ch : n) {
        if (ch == ' ') ch = '_';
      }
      return n;
    });

TEST(Redactor, AcrossChunkBoundaries) {
  Redactor r({"SECRETTOKEN"});
  std::string out = r.feed("abc SECR");
  EXPECT_LE(r.held(), 10u);
  out += r.feed("ETTO");
  out += r.feed("KEN def");
  out += r.finish();
  EXPECT_EQ(out, "abc *********** def");
  EXPECT_EQ(r.redactions(), 1u);
}

TEST(Redactor, HoldsBackAtMostLongestNeedleMinusOne) {
  Redactor r({"short", "a-much-longer-needle"});
  for (int i = 0; i < 100; ++i) {
    const std::string released = r.feed(std::string(37, 'x'));
    EXPECT_LE(r.held(), 19u);
    if (i > 0) {
      EXPECT_EQ(released.size(), 37u);  // steady state: as much out as in
    }
  }
}

// Any chunking of any input gives the one-shot output (and count).
TEST(Redactor, RandomChunkingMatchesOneShot) {
  std::mt19937 rng(20261202);
  const std::vector<std::string> needles = {"ghs_16C7e42F292c6912E7710c838347Ae178B4a",
                                            "Z2hzXzE2QzdlNDJG", "abab", "b"};
  const std::string alphabet = "abgh_sZ2Q16C7e42F9x";
  for (int round = 0; round < 300; ++round) {
    std::string input;
    const std::size_t length = rng() % 400;
    for (std::size_t i = 0; i < length; ++i) {
      if (rng() % 40 == 0) {
        input += needles[rng() % needles.size()];
      } else {
        input += alphabet[rng() % alphabet.size()];
      }
    }
    std::size_t expected_count = 0;
    const std::string expected = one_shot(needles, input, &expected_count);
    ASSERT_EQ(expected.size(), input.size());

    Redactor r(needles);
    std::string out;
    for (std::size_t at = 0; at < input.size();) {
      const std::size_t n = std::min<std::size_t>(input.size() - at, rng() % 9);
      out += r.feed(std::string_view(input).substr(at, n));
      at += n;
    }
    out += r.finish();
    ASSERT_EQ(out, expected) << "round " << round;
    ASSERT_EQ(r.redactions(), expected_count) << "round " << round;
    for (const auto& needle : needles) {
      ASSERT_EQ(out.find(needle), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace sandgate::secrets
