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

// Each escaped spelling an echo commonly writes is found, as a whole, in the bytes as they
// are: the output keeps their length (THREATS 30).
struct EscapeCase {
  std::string name;
  std::string input;  // holds one spelling of kToken between "<" and ">"
  std::size_t redactions;
};

constexpr std::string_view kToken = "ab+c/d=e_f.g";

class RedactorEscapes : public ::testing::TestWithParam<EscapeCase> {};

TEST_P(RedactorEscapes, FoundWholeInEveryChunking) {
  const EscapeCase& c = GetParam();
  const std::size_t open = c.input.find('<');
  const std::size_t close = c.input.rfind('>');
  std::string expected = c.input;
  if (c.redactions > 0) {
    std::fill(expected.begin() + static_cast<std::ptrdiff_t>(open) + 1,
              expected.begin() + static_cast<std::ptrdiff_t>(close), '*');
  }
  const std::vector<std::string> needles = {std::string(kToken)};
  std::size_t count = 0;
  EXPECT_EQ(one_shot(needles, c.input, &count), expected);
  EXPECT_EQ(count, c.redactions);
  Redactor header(needles);
  EXPECT_EQ(header.redact(c.input), expected);
  // Every split in two, and one byte at a time.
  for (std::size_t cut = 0; cut <= c.input.size(); ++cut) {
    Redactor r(needles);
    std::string out = r.feed(std::string_view(c.input).substr(0, cut));
    out += r.feed(std::string_view(c.input).substr(cut));
    out += r.finish();
    ASSERT_EQ(out, expected) << "cut at " << cut;
    ASSERT_EQ(r.redactions(), c.redactions) << "cut at " << cut;
  }
  Redactor bytes(needles);
  std::string out;
  for (const char ch : c.input) {
    out += bytes.feed(std::string_view(&ch, 1));
    EXPECT_LE(bytes.held(), kToken.size() * Redactor::kMaxSpelling);
  }
  out += bytes.finish();
  EXPECT_EQ(out, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, RedactorEscapes,
    ::testing::Values(
        EscapeCase{"Plain", "x<ab+c/d=e_f.g>y", 1},
        EscapeCase{"JsonSlash", R"(x<ab+c\/d=e_f.g>y)", 1},
        EscapeCase{"JsonUnicodeLower", R"(x<ab\u002bc\u002fd\u003de\u005ff\u002eg>y)", 1},
        EscapeCase{"JsonUnicodeUpper", R"(x<ab\u002Bc\u002Fd\u003De_f.g>y)", 1},
        EscapeCase{"JsonUnicodeLetters", R"(x<\u0061b+c/d=e_f.g>y)", 1},
        EscapeCase{"PercentUpper", "x<ab%2Bc%2Fd%3De_f.g>y", 1},
        EscapeCase{"PercentLower", "x<ab%2bc%2fd%3de_f.g>y", 1},
        EscapeCase{"PercentSomeOnly", "x<ab%2Bc/d%3De_f.g>y", 1},
        EscapeCase{"PercentEverything", "x<%61%62%2B%63%2F%64%3D%65%5F%66%2E%67>y", 1},
        EscapeCase{"HtmlDecimal", "x<ab&#43;c&#47;d&#61;e_f.g>y", 1},
        EscapeCase{"HtmlDecimalLeadingZeros", "x<ab&#0043;c/d=e_f.g>y", 1},
        EscapeCase{"HtmlHexLower", "x<ab&#x2b;c&#x2f;d&#x3d;e_f.g>y", 1},
        EscapeCase{"HtmlHexUpper", "x<ab&#X2B;c&#x2F;d=e_f.g>y", 1},
        EscapeCase{"HtmlNamed", "x<ab&plus;c&sol;d&equals;e&lowbar;f&period;g>y", 1},
        EscapeCase{"Mixed", R"(x<ab%2Bc\/d&#61;e\u005ff.g>y)", 1},
        EscapeCase{"WrongCharacterEscaped", "x<ab%2Cc/d=e_f.g>y", 0},
        EscapeCase{"BrokenEscape", "x<ab%2c/d=e_f.g>y", 0},
        EscapeCase{"DoubleEscapedIsOutOfReach", "x<ab%252Bc/d=e_f.g>y", 0},
        EscapeCase{"HtmlWithoutSemicolon", "x<ab&#43c/d=e_f.g>y", 0},
        EscapeCase{"UnknownEntity", "x<ab&nope;c/d=e_f.g>y", 0},
        EscapeCase{"LoneEscapeCharacters", "x<%&\\ab+c/d=e_f.>y", 0}),
    [](const auto& row) { return row.param.name; });

// A needle that itself holds an escape character is found as it is, and escaped.
TEST(Redactor, NeedleWithEscapeCharacters) {
  const std::vector<std::string> needles = {"p%2Bq&r"};
  EXPECT_EQ(one_shot(needles, "<p%2Bq&r>"), "<*******>");
  EXPECT_EQ(one_shot(needles, "<p%252Bq%26r>"), "<***********>");
  EXPECT_EQ(one_shot(needles, "<p%2Bq&amp;r>"), "<***********>");
}

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

// The same with escapes everywhere: broken and complete ones, spellings of the needles mixed
// in; any chunking gives the one-shot output, and no spelling of a needle is left whole.
TEST(Redactor, RandomChunkingWithEscapesMatchesOneShot) {
  std::mt19937 rng(20261206);
  const std::vector<std::string> needles = {"a+b/c", "%2B&x", "q"};
  const std::vector<std::string> spellings = {
      "a+b/c", R"(a\u002bb\/c)", "a%2Bb%2fc", "a&#43;b&#x2F;c", "a&plus;b&sol;c",
      "%2B&x", "%252B%26x",      "%2B&amp;x", R"(\u0071)",      "&#113;"};
  const std::string alphabet = R"(ab+/c%2B&#x;u0\qlpsF1)";
  for (int round = 0; round < 500; ++round) {
    std::string input;
    const std::size_t length = rng() % 300;
    for (std::size_t i = 0; i < length; ++i) {
      if (rng() % 25 == 0) {
        input += spellings[rng() % spellings.size()];
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
      const std::size_t n = std::min<std::size_t>(input.size() - at, rng() % 13);
      out += r.feed(std::string_view(input).substr(at, n));
      at += n;
    }
    out += r.finish();
    ASSERT_EQ(out, expected) << "round " << round << ": " << input;
    ASSERT_EQ(r.redactions(), expected_count) << "round " << round;
    for (const auto& spelling : spellings) {
      ASSERT_EQ(out.find(spelling), std::string::npos) << spelling << " in " << out;
    }
  }
}

}  // namespace
}  // namespace sandgate::secrets
