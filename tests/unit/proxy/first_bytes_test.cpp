#include "proxy/first_bytes.hpp"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

std::vector<std::uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

StreamStart kind_of(std::string_view s) {
  const auto b = bytes(s);
  return classify_first_bytes(b).kind;
}

struct Row {
  const char* name;
  std::string input;
  StreamStart kind;
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class Classify : public testing::TestWithParam<Row> {};

TEST_P(Classify, AsALenientServerReadsIt) {  // THREATS 7, 27
  EXPECT_EQ(static_cast<int>(kind_of(GetParam().input)), static_cast<int>(GetParam().kind));
}

const std::string kRequest = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";

INSTANTIATE_TEST_SUITE_P(
    Table, Classify,
    testing::Values(
        Row{"empty", "", StreamStart::need_more}, Row{"origin_form", kRequest, StreamStart::http},
        Row{"line_without_headers_yet", "GET / HTTP/1.1\r\n", StreamStart::http},
        Row{"lower_case_method", "get / http/1.1\r\n", StreamStart::http},
        Row{"mixed_case_method", "Post /x HTTP/1.0\r\n", StreamStart::http},
        Row{"leading_empty_line", "\r\n" + kRequest, StreamStart::http},
        Row{"leading_bare_lf", "\n\n" + kRequest, StreamStart::http},
        Row{"leading_space", " " + kRequest, StreamStart::http},
        Row{"two_spaces", "GET  / HTTP/1.1\r\n", StreamStart::http},
        Row{"tabs", "GET\t/\tHTTP/1.1\r\n", StreamStart::http},
        Row{"space_in_target", "GET /a b HTTP/1.1\r\n", StreamStart::http},
        Row{"dashed_method", "M-SEARCH * HTTP/1.1\r\n", StreamStart::http},
        Row{"only_empty_lines", "\r\n\r\n", StreamStart::need_more},
        Row{"method_prefix", "GE", StreamStart::need_more},
        Row{"target_without_line_end", "GET /path", StreamStart::need_more},
        Row{"version_split", "GET / HT", StreamStart::need_more},
        Row{"http09_no_version", "GET /\r\n", StreamStart::other},
        Row{"connect", "CONNECT a.test:443 HTTP/1.1\r\n", StreamStart::proxy_request},
        Row{"connect_lower", "connect a.test:443", StreamStart::proxy_request},
        Row{"connect_tab", "CONNECT\ta.test:443", StreamStart::proxy_request},
        Row{"connect_split_after_method", "CONNECT ", StreamStart::proxy_request},
        Row{"connect_prefix", "CONN", StreamStart::need_more},
        Row{"absolute_form", "GET http://b.test/ HTTP/1.1\r\n", StreamStart::proxy_request},
        Row{"absolute_two_spaces", "GET  http://b.test/", StreamStart::proxy_request},
        Row{"absolute_tab", "GET\thttp://b.test/", StreamStart::proxy_request},
        Row{"absolute_lower_method", "get http://b.test/", StreamStart::proxy_request},
        Row{"absolute_upper_scheme", "GET HTTPS://b.test/", StreamStart::proxy_request},
        Row{"absolute_leading_space", " GET http://b.test/", StreamStart::proxy_request},
        Row{"absolute_other_scheme", "GET ftp://b.test/", StreamStart::proxy_request},
        Row{"absolute_split_in_scheme", "GET htt", StreamStart::need_more},
        Row{"absolute_split_in_separator", "GET http:/", StreamStart::need_more},
        Row{"authority_target_with_get", "GET b.test:80 HTTP/1.1\r\n", StreamStart::http},
        Row{"ssh_banner", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", StreamStart::other},
        Row{"smtp_ehlo", "EHLO client.test\r\n", StreamStart::other},
        Row{"redis_inline", "PING\r\n", StreamStart::other},
        Row{"binary", std::string("\x00\x01\x02", 3), StreamStart::other},
        // Any token is a method, as for sandgate's own request parser (found by first_bytes_fuzz).
        Row{"long_method", "ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n", StreamStart::http},
        Row{"digit_method", "GET2 / HTTP/1.1\r\n", StreamStart::http},
        Row{"token_method", "5UT /x HTTP/1.0\r\n", StreamStart::http},
        Row{"symbol_method", "GET_X! http://b.test/ HTTP/1.1\r\n", StreamStart::proxy_request},
        Row{"token_without_blank", "SSH-2.0-OpenSSH_9.2\r\n", StreamStart::other},
        Row{"long_token_prefix", std::string(100, 'A'), StreamStart::need_more},
        Row{"lone_handshake_byte", "\x16", StreamStart::need_more},
        Row{"handshake_record_header_split", "\x16\x03", StreamStart::need_more},
        Row{"handshake_then_not_tls", "\x16X", StreamStart::other},
        Row{"endless_empty_lines", std::string(70 * 1024, '\n'), StreamStart::undecidable},
        Row{"endless_target", "GET /" + std::string(70 * 1024, 'a'), StreamStart::undecidable}),
    [](const auto& row) { return std::string(row.param.name); });

std::vector<std::uint8_t> corpus(const char* name) {
  std::ifstream in(std::string(SANDGATE_TEST_CORPUS_DIR) + "/client_hello/" + name,
                   std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A ClientHello is waited for however it is split, one byte at a time included, and over
// several records (THREATS 4: a lone 0x16 first must not pass as "other").
TEST(Classify, ClientHelloSplitAnywhereIsWaitedFor) {
  for (const char* file : {"sni_alpn.bin", "sni_alpn_50_byte_records.bin"}) {
    const auto hello = corpus(file);
    ASSERT_GT(hello.size(), 50u) << file;
    for (std::size_t n = 1; n < hello.size(); ++n) {
      const auto k = classify_first_bytes(std::span(hello.data(), n)).kind;
      ASSERT_EQ(static_cast<int>(k), static_cast<int>(StreamStart::need_more))
          << file << " cut at " << n;
    }
    const FirstBytes whole = classify_first_bytes(hello);
    ASSERT_EQ(static_cast<int>(whole.kind), static_cast<int>(StreamStart::tls)) << file;
    EXPECT_TRUE(whole.hello.sni.has_value()) << file;
  }
}

TEST(Classify, BrokenClientHelloIsMalformed) {
  auto hello = corpus("sni_alpn.bin");
  ASSERT_GT(hello.size(), 10u);
  hello[5] = 0x02;  // handshake type ServerHello
  EXPECT_EQ(static_cast<int>(classify_first_bytes(hello).kind),
            static_cast<int>(StreamStart::tls_malformed));
}

TEST(Classify, HttpReportsTheSkippedPrefix) {
  const auto b = bytes("\r\n \r\n" + kRequest);
  const FirstBytes f = classify_first_bytes(b);
  EXPECT_EQ(static_cast<int>(f.kind), static_cast<int>(StreamStart::http));
  EXPECT_EQ(f.skipped, 5u);
}

}  // namespace
}  // namespace sandgate::proxy
