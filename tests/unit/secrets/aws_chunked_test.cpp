// The aws-chunked body signed again as it streams. The oracle is the S3 documentation's
// example ("Signature Calculations for the Authorization Header: Transferring Payload in
// Multiple Chunks"): 65,536 then 1,024 bytes of 'a' after the seed signature 4f232c43...; a
// body the client signed with anything comes out with exactly the documentation's chunk
// signatures, whatever the pieces it arrives in.
#include "secrets/aws_chunked.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace sandgate::secrets::sigv4 {
namespace {

const Scope kScope{"20130524", "us-east-1", "s3"};
constexpr std::string_view kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr std::string_view kDate = "20130524T000000Z";
constexpr std::string_view kSeed =
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

std::string body(const std::vector<std::string>& signatures) {
  return "10000;chunk-signature=" + signatures[0] + "\r\n" + std::string(65536, 'a') + "\r\n" +
         "400;chunk-signature=" + signatures[1] + "\r\n" + std::string(1024, 'a') + "\r\n" +
         "0;chunk-signature=" + signatures[2] + "\r\n\r\n";
}

const std::vector<std::string> kDocumented = {
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"};

ChunkResigner resigner(bool trailer = false,
                       std::size_t max_chunk = ChunkResigner::kDefaultMaxChunk) {
  return ChunkResigner(kSecret, kScope, std::string(kDate), std::string(kSeed), trailer, max_chunk);
}

// Feeds `in` in pieces of the sizes `split` draws; what came out, or "" when refused.
std::string run(ChunkResigner r, std::string_view in, const std::function<std::size_t()>& split) {
  std::string out;
  while (!in.empty()) {
    const std::size_t n = std::min(in.size(), std::max<std::size_t>(1, split()));
    if (!r.feed(in.substr(0, n), out)) return "";
    in.remove_prefix(n);
  }
  return r.finished() ? out : "";
}

TEST(ChunkResigner, GivesTheChunkSignaturesTheS3DocumentationPrints) {
  const std::string placeholder_signed =
      body({std::string(64, '0'), std::string(64, '1'), std::string(64, '2')});
  const std::string expected = body(kDocumented);
  ASSERT_EQ(expected.size(), 66824u);  // the example's Content-Length: unchanged
  EXPECT_EQ(run(resigner(), placeholder_signed, [] { return std::size_t{1} << 20; }), expected);
  // Any split of what the client sends: one byte at a time, and random pieces.
  EXPECT_EQ(run(resigner(), placeholder_signed, [] { return std::size_t{1}; }), expected);
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    EXPECT_EQ(run(resigner(), placeholder_signed,
                  [&] { return std::uniform_int_distribution<std::size_t>(1, 3000)(rng); }),
              expected)
        << round;
  }
}

TEST(ChunkResigner, SignsTheTrailerFromTheLastChunk) {
  const std::string head = "5;chunk-signature=" + std::string(64, '0') + "\r\nhello\r\n" +
                           "0;chunk-signature=" + std::string(64, '0') + "\r\n";
  const std::string trailer = "x-amz-checksum-crc32c:sOO8/Q==\r\n";
  std::string out;
  ChunkResigner r = resigner(true);
  ASSERT_TRUE(
      r.feed(head + trailer + "x-amz-trailer-signature:" + std::string(64, '9') + "\r\n\r\n", out))
      << r.error();
  ASSERT_TRUE(r.finished());
  // The chain, computed step by step with the signer's own pieces.
  const SigningKey key(kSecret, kScope);
  const std::string first = key.sign(chunk_string_to_sign(kDate, kScope, kSeed, "hello"));
  const std::string last = key.sign(chunk_string_to_sign(kDate, kScope, first, ""));
  const std::string trailer_signature =
      key.sign(trailer_string_to_sign(kDate, kScope, last, "x-amz-checksum-crc32c:sOO8/Q==\n"));
  EXPECT_EQ(out, "5;chunk-signature=" + first + "\r\nhello\r\n0;chunk-signature=" + last + "\r\n" +
                     trailer + "x-amz-trailer-signature:" + trailer_signature + "\r\n\r\n");
}

TEST(ChunkResigner, StopsABodyThatBreaksTheFormat) {
  const std::string sig(64, '0');
  const std::string ok =
      "5;chunk-signature=" + sig + "\r\nhello\r\n0;chunk-signature=" + sig + "\r\n\r\n";
  const auto refused = [](std::string_view in, bool trailer = false, std::size_t max = 1 << 20) {
    std::string out;
    ChunkResigner r = resigner(trailer, max);
    return !r.feed(in, out) && !r.error().empty();
  };
  // Control: the same body, well formed, goes.
  std::string out;
  ChunkResigner control = resigner();
  EXPECT_TRUE(control.feed(ok, out) && control.finished());

  EXPECT_TRUE(refused("5\r\nhello\r\n"));                                 // no signature
  EXPECT_TRUE(refused("5;chunk-signature=" + sig + ";x=1\r\n"));          // an extension
  EXPECT_TRUE(refused("5;chunk-signature=" + sig.substr(1) + "\r\n"));    // short signature
  EXPECT_TRUE(refused("g;chunk-signature=" + sig + "\r\n"));              // not hex
  EXPECT_TRUE(refused(";chunk-signature=" + sig + "\r\n"));               // no size
  EXPECT_TRUE(refused("5;chunk-signature=" + sig + "\r\nhelloXX"));       // no CRLF after
  EXPECT_TRUE(refused("5;chunk-signature=" + sig + "\nhello\r\n"));       // bare LF
  EXPECT_TRUE(refused("11;chunk-signature=" + sig + "\r\n", false, 16));  // over max_chunk
  EXPECT_TRUE(refused(ok + "more"));                                      // after the end
  EXPECT_TRUE(refused("0;chunk-signature=" + sig + "\r\nx-amz-checksum-crc32c:a\r\n\r\n"));
  EXPECT_TRUE(refused("0;chunk-signature=" + sig + "\r\n\r\n", true));  // empty trailer
  EXPECT_TRUE(refused("0;chunk-signature=" + sig + "\r\nnocolon\r\n\r\n", true));
  EXPECT_TRUE(refused(std::string(300, '1')));  // endless header
  EXPECT_TRUE(refused(std::string(100, 'f') + ";chunk-signature=" + sig + "\r\n"));
}

}  // namespace
}  // namespace sandgate::secrets::sigv4
