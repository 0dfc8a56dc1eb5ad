#include "secrets/response_scrubber.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "support/compress.hpp"

namespace sandgate::secrets {
namespace {

constexpr std::string_view kToken = "ghs_16C7e42F292c6912E7710c838347Ae178B4a";

std::string gzip(std::string_view plain) {
  return test::gzip_encode(plain);
}
std::string zlib_deflate(std::string_view plain) {
  return test::zlib_deflate_encode(plain);
}
std::string raw_deflate(std::string_view plain) {
  return test::raw_deflate_encode(plain);
}
std::string brotli(std::string_view plain) {
  return test::brotli_encode(plain);
}

// Pushes `encoded` in the pieces `cuts` marks (offsets), pulling after each; the output, or
// nullopt when the scrubber failed.
std::optional<std::string> scrub(ResponseScrubber& s, std::string_view encoded,
                                 const std::vector<std::size_t>& cuts) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::size_t to = i < cuts.size() ? cuts[i] : encoded.size();
    s.push(encoded.substr(from, to - from), i == cuts.size());
    for (std::string_view piece = s.pull(); !piece.empty(); piece = s.pull()) {
      EXPECT_LE(piece.size(), ResponseScrubber::kOutChunk + 1024);
      out += piece;
    }
    if (s.failed()) return std::nullopt;
    from = to;
  }
  EXPECT_TRUE(s.finished());
  return out;
}

std::optional<std::string> scrub_whole(std::vector<Coding> codings, std::string_view encoded,
                                       ScrubLimits limits = {}) {
  ResponseScrubber s({std::string(kToken)}, std::move(codings), limits);
  return scrub(s, encoded, {});
}

const std::string kEcho =
    R"({"headers":{"Authorization":"Bearer )" + std::string(kToken) + R"(","Host":"api.test"}})";
const std::string kRedactedEcho = R"({"headers":{"Authorization":"Bearer )" +
                                  std::string(kToken.size(), '*') + R"(","Host":"api.test"}})";

struct DecodeCase {
  std::string name;
  std::vector<Coding> codings;
  std::function<std::string(std::string_view)> encode;
};

class ScrubberDecodes : public ::testing::TestWithParam<DecodeCase> {};

// Every split of the encoded body into two pieces, and one byte at a time, gives the decoded
// body with the token redacted.
TEST_P(ScrubberDecodes, EverySplit) {
  const DecodeCase& c = GetParam();
  const std::string encoded = c.encode(kEcho);
  if (!c.codings.empty()) {
    ASSERT_EQ(encoded.find(kToken), std::string::npos);
  }
  for (std::size_t cut = 0; cut <= encoded.size(); ++cut) {
    ResponseScrubber s({std::string(kToken)}, c.codings);
    const auto out = scrub(s, encoded, {cut});
    ASSERT_TRUE(out) << "cut at " << cut;
    ASSERT_EQ(*out, kRedactedEcho) << "cut at " << cut;
    EXPECT_EQ(s.redactions(), 1u);
  }
  std::vector<std::size_t> bytes;
  for (std::size_t i = 1; i < encoded.size(); ++i) bytes.push_back(i);
  ResponseScrubber s({std::string(kToken)}, c.codings);
  EXPECT_EQ(scrub(s, encoded, bytes), kRedactedEcho);
}

// A body many output buffers long comes out whole, in bounded pieces.
TEST_P(ScrubberDecodes, LargeBody) {
  const DecodeCase& c = GetParam();
  std::string plain;
  for (int i = 0; plain.size() < 5 * ResponseScrubber::kOutChunk; ++i) {
    plain += "line " + std::to_string(i) + (i % 97 == 0 ? std::string(kToken) : "") + "\n";
  }
  std::string expected = plain;
  for (std::size_t at = expected.find(kToken); at != std::string::npos;
       at = expected.find(kToken, at)) {
    expected.replace(at, kToken.size(), std::string(kToken.size(), '*'));
  }
  const std::string encoded = c.encode(plain);
  ResponseScrubber s({std::string(kToken)}, c.codings);
  EXPECT_EQ(scrub(s, encoded, {encoded.size() / 3, encoded.size() / 2}), expected);
}

// Corrupt data, a stream cut short and bytes after its end are refused, never passed on.
TEST_P(ScrubberDecodes, RefusesWhatItCannotDecode) {
  const DecodeCase& c = GetParam();
  if (c.codings.empty()) GTEST_SKIP() << "identity decodes anything";
  const std::string encoded = c.encode(kEcho);
  EXPECT_EQ(scrub_whole(c.codings, encoded.substr(0, encoded.size() - 3)), std::nullopt)
      << "truncated";
  std::string corrupt = encoded;
  for (std::size_t i = 2; i < corrupt.size(); i += 3) corrupt[i] = static_cast<char>(~corrupt[i]);
  EXPECT_EQ(scrub_whole(c.codings, corrupt), std::nullopt) << "corrupt";
  EXPECT_EQ(scrub_whole(c.codings, encoded + "junk"), std::nullopt) << "trailing bytes";
  EXPECT_EQ(scrub_whole(c.codings, kEcho), std::nullopt) << "not encoded at all";
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ScrubberDecodes,
    ::testing::Values(DecodeCase{"Identity", {}, [](std::string_view p) { return std::string(p); }},
                      DecodeCase{"Gzip", {Coding::gzip}, gzip},
                      DecodeCase{"DeflateZlibWrapped", {Coding::deflate}, zlib_deflate},
                      DecodeCase{"DeflateRaw", {Coding::deflate}, raw_deflate},
                      DecodeCase{"Brotli", {Coding::br}, brotli},
                      DecodeCase{"GzipThenBrotli",
                                 {Coding::gzip, Coding::br},
                                 [](std::string_view p) { return brotli(gzip(p)); }},
                      DecodeCase{"DeflateThenGzip",
                                 {Coding::deflate, Coding::gzip},
                                 [](std::string_view p) { return gzip(zlib_deflate(p)); }},
                      DecodeCase{"GzipTwoMembers",
                                 {Coding::gzip},
                                 [](std::string_view p) {
                                   return gzip(p.substr(0, p.size() / 2)) +
                                          gzip(p.substr(p.size() / 2));
                                 }}),
    [](const auto& row) { return row.param.name; });

TEST(ResponseScrubber, EmptyBodyWithACodingIsEmpty) {
  EXPECT_EQ(scrub_whole({Coding::gzip}, ""), "");
  EXPECT_EQ(scrub_whole({Coding::br, Coding::deflate}, ""), "");
}

TEST(ResponseScrubber, StopsADecompressionBomb) {
  const std::string zeros(4 << 20, '\0');
  ScrubLimits limits;
  limits.free_bytes = 1 << 20;
  limits.max_ratio = 64;
  for (const auto& [name, codings, encoded] :
       std::vector<std::tuple<std::string, std::vector<Coding>, std::string>>{
           {"gzip", {Coding::gzip}, gzip(zeros)}, {"br", {Coding::br}, brotli(zeros)}}) {
    ResponseScrubber s({std::string(kToken)}, codings, limits);
    EXPECT_EQ(scrub(s, encoded, {}), std::nullopt) << name;
    EXPECT_EQ(s.failure(), ResponseScrubber::Failure::too_large) << name;
    EXPECT_LE(s.decoded_bytes(), limits.free_bytes + ResponseScrubber::kOutChunk) << name;
  }
  // Under the bound: the same body, with room for it.
  limits.free_bytes = 8 << 20;
  EXPECT_EQ(scrub_whole({Coding::gzip}, gzip(zeros), limits), zeros);
}

TEST(ResponseScrubber, CorruptFailureIsCorrupt) {
  ResponseScrubber s({std::string(kToken)}, {Coding::gzip});
  EXPECT_EQ(scrub(s, "not gzip at all", {}), std::nullopt);
  EXPECT_EQ(s.failure(), ResponseScrubber::Failure::corrupt);
}

TEST(ResponseScrubber, HeaderValuesAreRedactedAndCounted) {
  ResponseScrubber s({std::string(kToken)}, {Coding::gzip});
  EXPECT_EQ(s.redact("x " + std::string(kToken)), "x " + std::string(kToken.size(), '*'));
  EXPECT_EQ(s.redactions(), 1u);
}

struct CodingsCase {
  std::string name;
  std::vector<std::string_view> fields;
  std::optional<std::vector<Coding>> codings;
};

class ParseCodings : public ::testing::TestWithParam<CodingsCase> {};

TEST_P(ParseCodings, Row) {
  EXPECT_EQ(parse_content_codings(GetParam().fields), GetParam().codings);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ParseCodings,
    ::testing::Values(
        CodingsCase{"None", {}, std::vector<Coding>{}},
        CodingsCase{"Identity", {"identity"}, std::vector<Coding>{}},
        CodingsCase{"Gzip", {"gzip"}, std::vector<Coding>{Coding::gzip}},
        CodingsCase{"XGzipUpper", {"X-GZIP"}, std::vector<Coding>{Coding::gzip}},
        CodingsCase{"Deflate", {"Deflate"}, std::vector<Coding>{Coding::deflate}},
        CodingsCase{"Br", {"br"}, std::vector<Coding>{Coding::br}},
        CodingsCase{"List", {" gzip ,\tbr"}, std::vector<Coding>{Coding::gzip, Coding::br}},
        CodingsCase{
            "TwoFields", {"deflate", "gzip"}, std::vector<Coding>{Coding::deflate, Coding::gzip}},
        CodingsCase{"EmptyMembers", {"gzip,,", ""}, std::vector<Coding>{Coding::gzip}},
        CodingsCase{"Zstd", {"zstd"}, std::nullopt},
        CodingsCase{"Compress", {"compress"}, std::nullopt},
        CodingsCase{"UnknownInList", {"gzip, foo"}, std::nullopt}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace sandgate::secrets
