#include "http/request_head.hpp"

#include <gtest/gtest.h>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/serializer.hpp>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sandgate::http {
namespace {

namespace bh = boost::beast::http;
using Form = RequestHead::Form;

// What a successful parse must produce.
struct Parsed {
  Form form;
  std::string scheme;
  std::string host;
  std::uint16_t port;
  std::string path_and_query;
  bool keep_alive = true;
  bool chunked = false;
  std::optional<std::uint64_t> content_length = std::nullopt;
};

struct Row {
  std::string name;
  std::string head;
  Errc error;  // Errc::ok: the parse succeeds and matches `parsed`
  std::optional<Parsed> parsed;
  HeadLimits limits = {};
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

Row ok(std::string name, std::string head, Parsed parsed) {
  return {std::move(name), std::move(head), Errc::ok, std::move(parsed)};
}
Row bad(std::string name, std::string head, Errc error, HeadLimits limits = {}) {
  return {std::move(name), std::move(head), error, std::nullopt, limits};
}

// A GET through the proxy for http://a.example/ with extra field lines (each ending in CRLF).
std::string get_with(const std::string& fields) {
  return "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n" + fields + "\r\n";
}
std::string post_with(const std::string& fields) {
  return "POST http://a.example/upload HTTP/1.1\r\nHost: a.example\r\n" + fields + "\r\n";
}
std::string request_line(const std::string& line, const std::string& host = "a.example") {
  return line + "\r\nHost: " + host + "\r\n\r\n";
}

const Parsed kPlainGet{Form::absolute, "http", "a.example", 80, "/"};

Parsed with_length(std::uint64_t n) {
  Parsed p{Form::absolute, "http", "a.example", 80, "/upload"};
  p.content_length = n;
  return p;
}

std::vector<Row> rows() {
  constexpr auto absolute = Form::absolute;
  Parsed chunked{absolute, "http", "a.example", 80, "/upload"};
  chunked.chunked = true;
  Parsed http10{absolute, "http", "a.example", 80, "/"};
  http10.keep_alive = false;
  Parsed closing = kPlainGet;
  closing.keep_alive = false;

  return {
      // --- accepted --------------------------------------------------------------------
      ok("absolute_with_query", request_line("GET http://a.example/p/q?x=1&y=%20 HTTP/1.1"),
         {absolute, "http", "a.example", 80, "/p/q?x=1&y=%20"}),
      ok("absolute_explicit_port",
         request_line("GET http://a.example:8080/ HTTP/1.1", "a.example:8080"),
         {absolute, "http", "a.example", 8080, "/"}),
      ok("absolute_no_path", request_line("GET http://a.example HTTP/1.1"), kPlainGet),
      ok("absolute_query_without_path", request_line("GET http://a.example?x HTTP/1.1"),
         {absolute, "http", "a.example", 80, "/?x"}),
      // A case-only difference at the very end of the target (Boost 1.81's beast::iequals read
      // a byte past it; request_head_fuzz, fails under the asan-ubsan preset on the old code).
      ok("absolute_mixed_case_host_ending_the_target",
         request_line("GET http://A.EXAMPLE HTTP/1.1"), {absolute, "http", "A.EXAMPLE", 80, "/"}),
      bad("mixed_case_scheme_ending_the_target", request_line("GET htTp:// HTTP/1.1"),
          Errc::unsupported_target),
      ok("host_names_default_port", request_line("GET http://a.example/ HTTP/1.1", "a.example:80"),
         kPlainGet),
      ok("target_names_default_port", request_line("GET http://a.example:80/ HTTP/1.1"), kPlainGet),
      ok("scheme_and_host_case_insensitive",
         request_line("GET HTTP://A.Example/ HTTP/1.1", "a.EXAMPLE"),
         {absolute, "http", "A.Example", 80, "/"}),
      ok("absolute_ipv6",
         request_line("GET http://[2001:db8::1]:8080/ HTTP/1.1", "[2001:DB8::1]:8080"),
         {absolute, "http", "2001:db8::1", 8080, "/"}),
      ok("absolute_ipv4", request_line("GET http://10.0.0.1/ HTTP/1.1", "10.0.0.1"),
         {absolute, "http", "10.0.0.1", 80, "/"}),
      ok("underscore_host", request_line("GET http://_x.a.example/ HTTP/1.1", "_x.a.example"),
         {absolute, "http", "_x.a.example", 80, "/"}),
      ok("http10_without_host", "GET http://a.example/ HTTP/1.0\r\n\r\n", http10),
      ok("http10_keep_alive", "GET http://a.example/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
         kPlainGet),
      ok("http10_proxy_connection_ignored",
         "GET http://a.example/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n", http10),
      ok("connection_close", get_with("Connection: close\r\n"), closing),
      ok("close_in_second_connection_field",
         get_with("Connection: keep-alive\r\nConnection: close\r\n"), closing),
      ok("close_in_token_list", get_with("Connection: foo, CLOSE\r\n"), closing),
      ok("content_length", post_with("Content-Length: 5\r\n"), with_length(5)),
      ok("content_length_zero", post_with("Content-Length: 0\r\n"), with_length(0)),
      ok("content_length_leading_zeros", post_with("Content-Length: 007\r\n"), with_length(7)),
      ok("content_length_max", post_with("Content-Length: 18446744073709551615\r\n"),
         with_length(18446744073709551615u)),
      ok("chunked", post_with("Transfer-Encoding: chunked\r\n"), chunked),
      ok("chunked_mixed_case", post_with("transfer-encoding:  Chunked \r\n"), chunked),
      ok("connect", "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
         {Form::authority, "", "a.example", 443, ""}),
      ok("connect_host_without_port", "CONNECT a.example:443 HTTP/1.1\r\nHost: A.example\r\n\r\n",
         {Form::authority, "", "a.example", 443, ""}),
      ok("connect_ipv6", "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n",
         {Form::authority, "", "::1", 8443, ""}),
      ok("connect_http10_without_host", "CONNECT a.example:22 HTTP/1.0\r\n\r\n",
         {Form::authority, "", "a.example", 22, "", false}),
      ok("connect_content_length_zero",
         "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\nContent-Length: 0\r\n\r\n",
         {Form::authority, "", "a.example", 443, "", true, false, 0}),
      ok("origin_form", request_line("GET /index.html?a=b HTTP/1.1", "a.example:8080"),
         {Form::origin, "", "a.example", 8080, "/index.html?a=b"}),
      ok("origin_form_double_slash", request_line("GET //b.example/x HTTP/1.1"),
         {Form::origin, "", "a.example", 80, "//b.example/x"}),
      ok("options_asterisk", request_line("OPTIONS * HTTP/1.1"),
         {Form::asterisk, "", "a.example", 80, "*"}),
      ok("options_absolute", request_line("OPTIONS http://a.example HTTP/1.1"), kPlainGet),
      ok("extension_method", request_line("PROPFIND http://a.example/ HTTP/1.1"), kPlainGet),
      ok("whatwg_unescaped_query", request_line("GET http://a.example/a|b?x[]={1}^` HTTP/1.1"),
         {absolute, "http", "a.example", 80, "/a|b?x[]={1}^`"}),
      ok("obs_text_value", get_with("X-Name: caf\xc3\xa9\r\n"), kPlainGet),
      ok("empty_value", get_with("X-Empty:\r\n"), kPlainGet),
      ok("tab_inside_value", get_with("X-Tab: a\tb\r\n"), kPlainGet),
      ok("host_with_ows", "GET http://a.example/ HTTP/1.1\r\nHost: \t a.example \r\n\r\n",
         kPlainGet),
      ok("tchar_symbols_in_name", get_with("X-!#$%&'*+.^_`|~: 1\r\n"), kPlainGet),

      // --- framing ---------------------------------------------------------------------
      bad("cl_then_te", post_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
          Errc::content_length_with_te),
      bad("te_then_cl", post_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"),
          Errc::content_length_with_te),
      bad("te_gzip_with_cl", post_with("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n"),
          Errc::content_length_with_te),
      bad("cl_repeated_different", post_with("Content-Length: 5\r\nContent-Length: 6\r\n"),
          Errc::conflicting_length),
      bad("cl_repeated_same", post_with("Content-Length: 5\r\nContent-Length: 5\r\n"),
          Errc::conflicting_length),
      bad("cl_list_different", post_with("Content-Length: 5, 6\r\n"), Errc::conflicting_length),
      bad("cl_list_same", post_with("Content-Length: 5, 5\r\n"), Errc::conflicting_length),
      bad("cl_letters", post_with("Content-Length: abc\r\n"), Errc::malformed_request),
      bad("cl_plus_sign", post_with("Content-Length: +5\r\n"), Errc::malformed_request),
      bad("cl_negative", post_with("Content-Length: -1\r\n"), Errc::malformed_request),
      bad("cl_hex", post_with("Content-Length: 0x10\r\n"), Errc::malformed_request),
      bad("cl_inner_space", post_with("Content-Length: 1 2\r\n"), Errc::malformed_request),
      bad("cl_empty", post_with("Content-Length:\r\n"), Errc::malformed_request),
      bad("cl_overflow", post_with("Content-Length: 18446744073709551616\r\n"),
          Errc::malformed_request),
      bad("te_gzip", post_with("Transfer-Encoding: gzip\r\n"), Errc::bad_transfer_encoding),
      bad("te_gzip_chunked", post_with("Transfer-Encoding: gzip, chunked\r\n"),
          Errc::bad_transfer_encoding),
      bad("te_chunked_chunked", post_with("Transfer-Encoding: chunked, chunked\r\n"),
          Errc::bad_transfer_encoding),
      bad("te_identity", post_with("Transfer-Encoding: identity\r\n"), Errc::bad_transfer_encoding),
      bad("te_empty", post_with("Transfer-Encoding:\r\n"), Errc::bad_transfer_encoding),
      bad("te_chunked_with_params", post_with("Transfer-Encoding: chunked;q=1\r\n"),
          Errc::bad_transfer_encoding),
      bad("te_repeated", post_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
          Errc::bad_transfer_encoding),
      bad("te_on_http10", "POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
          Errc::bad_transfer_encoding),
      bad("connect_with_body",
          "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\n",
          Errc::malformed_request),
      bad("connect_chunked",
          "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n",
          Errc::malformed_request),

      // --- field syntax ------------------------------------------------------------------
      bad("obs_fold_space", get_with("X-A: one\r\n two\r\n"), Errc::obs_fold),
      bad("obs_fold_tab", get_with("X-A: one\r\n\ttwo\r\n"), Errc::obs_fold),
      bad("whitespace_before_first_field",
          "GET http://a.example/ HTTP/1.1\r\n Host: a.example\r\n\r\n", Errc::obs_fold),
      bad("bare_lf_in_fields", get_with("X-A: 1\nX-B: 2\r\n"), Errc::invalid_header),
      bad("bare_cr_in_value", get_with("X-A: 1\r2\r\n"), Errc::invalid_header),
      bad("lf_only_terminator", "GET http://a.example/ HTTP/1.1\r\nHost: a.example\n\n",
          Errc::invalid_header),
      bad("nul_in_value", get_with(std::string("X-A: a\0b\r\n", 10)), Errc::invalid_header),
      bad("control_in_value",
          get_with("X-A: a\x01"
                   "b\r\n"),
          Errc::invalid_header),
      bad("del_in_value", get_with("X-A: a\x7f\r\n"), Errc::invalid_header),
      bad("escape_in_value", get_with("X-A: \x1b[31m\r\n"), Errc::invalid_header),
      bad("nul_in_name", get_with(std::string("X\0A: 1\r\n", 8)), Errc::invalid_header),
      bad("space_before_colon", get_with("X-A : 1\r\n"), Errc::invalid_header),
      bad("tab_before_colon", get_with("X-A\t: 1\r\n"), Errc::invalid_header),
      bad("space_in_name", get_with("X A: 1\r\n"), Errc::invalid_header),
      bad("separator_in_name", get_with("X@A: 1\r\n"), Errc::invalid_header),
      bad("non_ascii_name", get_with("X-\xc3\xa9: 1\r\n"), Errc::invalid_header),
      bad("empty_name", get_with(": 1\r\n"), Errc::invalid_header),
      bad("no_colon", get_with("X-A\r\n"), Errc::invalid_header),
      bad("bad_connection_list", get_with("Connection: a b\r\n"), Errc::invalid_header),

      // --- request line ------------------------------------------------------------------
      bad("bare_lf_request_line", "GET http://a.example/ HTTP/1.1\nHost: a.example\r\n\r\n",
          Errc::malformed_request),
      bad("bare_cr_request_line", "GET http://a.example/\r HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::malformed_request),
      bad("leading_empty_line", "\r\nGET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::malformed_request),
      bad("separator_in_method", request_line("G@T http://a.example/ HTTP/1.1"),
          Errc::malformed_request),
      bad("control_in_method", request_line("G\x01T http://a.example/ HTTP/1.1"),
          Errc::malformed_request),
      bad("double_space", request_line("GET  http://a.example/ HTTP/1.1"), Errc::malformed_request),
      bad("tab_separator", request_line("GET\thttp://a.example/ HTTP/1.1"),
          Errc::malformed_request),
      bad("trailing_space", request_line("GET http://a.example/ HTTP/1.1 "),
          Errc::malformed_request),
      bad("no_version", request_line("GET http://a.example/"), Errc::malformed_request),
      bad("http2_version", request_line("GET http://a.example/ HTTP/2.0"), Errc::malformed_request),
      bad("http09_version", request_line("GET http://a.example/ HTTP/0.9"),
          Errc::malformed_request),
      bad("http12_version", request_line("GET http://a.example/ HTTP/1.2"),
          Errc::malformed_request),
      bad("lowercase_version", request_line("GET http://a.example/ http/1.1"),
          Errc::malformed_request),
      bad("fragment", request_line("GET http://a.example/p#frag HTTP/1.1"),
          Errc::malformed_request),
      bad("origin_fragment", request_line("GET /#x HTTP/1.1"), Errc::malformed_request),
      bad("quote_in_target", request_line("GET http://a.example/\"x HTTP/1.1"),
          Errc::malformed_request),
      bad("backslash_in_target", request_line("GET http://a.example/a\\b HTTP/1.1"),
          Errc::malformed_request),
      bad("angle_bracket_in_target", request_line("GET /<script> HTTP/1.1"),
          Errc::malformed_request),
      bad("non_ascii_target", request_line("GET /caf\xc3\xa9 HTTP/1.1"), Errc::malformed_request),
      bad("bad_percent_escape", request_line("GET /a%zz HTTP/1.1"), Errc::malformed_request),
      bad("truncated_percent_escape", request_line("GET /a%4 HTTP/1.1"), Errc::malformed_request),
      bad("request_line_too_long",
          request_line("GET http://a.example/" + std::string(60, 'a') + " HTTP/1.1"),
          Errc::request_line_too_long, {64, 65536}),
      bad("headers_too_large", get_with("X-Big: " + std::string(200, 'b') + "\r\n"),
          Errc::headers_too_large, {8192, 128}),

      // --- Host --------------------------------------------------------------------------
      bad("missing_host_http11", "GET http://a.example/ HTTP/1.1\r\n\r\n", Errc::invalid_header),
      bad("missing_host_origin_form", "GET / HTTP/1.1\r\n\r\n", Errc::invalid_header),
      bad("missing_host_connect", "CONNECT a.example:443 HTTP/1.1\r\n\r\n", Errc::invalid_header),
      bad("two_hosts", get_with("Host: a.example\r\n"), Errc::invalid_header),
      bad("two_hosts_different", get_with("host: b.example\r\n"), Errc::invalid_header),
      bad("empty_host", request_line("GET / HTTP/1.1", ""), Errc::invalid_header),
      bad("host_with_userinfo", request_line("GET / HTTP/1.1", "u@a.example"),
          Errc::invalid_header),
      bad("host_with_path", request_line("GET / HTTP/1.1", "a.example/x"), Errc::invalid_header),
      bad("host_list", request_line("GET / HTTP/1.1", "a.example, b.example"),
          Errc::invalid_header),
      bad("host_port_too_big", request_line("GET / HTTP/1.1", "a.example:65536"),
          Errc::invalid_header),
      bad("host_ipv6_without_brackets", request_line("GET / HTTP/1.1", "::1"),
          Errc::invalid_header),
      bad("host_mismatch", request_line("GET http://a.example/ HTTP/1.1", "b.example"),
          Errc::host_mismatch),
      bad("host_mismatch_suffix", request_line("GET http://a.example/ HTTP/1.1", "a.example.evil"),
          Errc::host_mismatch),
      bad("host_mismatch_port", request_line("GET http://a.example:8080/ HTTP/1.1", "a.example"),
          Errc::host_mismatch),
      bad("host_mismatch_default_port",
          request_line("GET http://a.example/ HTTP/1.1", "a.example:8080"), Errc::host_mismatch),
      bad("host_mismatch_trailing_dot",
          request_line("GET http://a.example/ HTTP/1.1", "a.example."), Errc::host_mismatch),
      bad("connect_host_mismatch", "CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n",
          Errc::host_mismatch),
      bad("connect_host_port_mismatch",
          "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:8443\r\n\r\n", Errc::host_mismatch),

      // --- request-target forms ------------------------------------------------------------
      bad("https_absolute", request_line("GET https://a.example/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("ftp_absolute", request_line("GET ftp://a.example/ HTTP/1.1"), Errc::unsupported_target),
      bad("http_without_slashes", request_line("GET http:a.example/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("http_one_slash", request_line("GET http:/a.example/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("userinfo", request_line("GET http://user@a.example/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("userinfo_with_password", request_line("GET http://u:p@a.example/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("empty_authority", request_line("GET http:///x HTTP/1.1"), Errc::unsupported_target),
      bad("empty_port", request_line("GET http://a.example:/ HTTP/1.1"), Errc::unsupported_target),
      bad("port_zero", request_line("GET http://a.example:0/ HTTP/1.1"), Errc::unsupported_target),
      bad("port_too_big", request_line("GET http://a.example:65536/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("percent_in_host", request_line("GET http://a%2eexample/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("ipv6_zone_id", request_line("GET http://[fe80::1%25eth0]/ HTTP/1.1"),
          Errc::unsupported_target),
      bad("unclosed_ipv6", request_line("GET http://[::1/ HTTP/1.1"), Errc::unsupported_target),
      bad("connect_without_port", "CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::unsupported_target),
      bad("connect_absolute_form",
          "CONNECT http://a.example:443/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::unsupported_target),
      bad("connect_origin_form", "CONNECT / HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::unsupported_target),
      bad("connect_with_path", "CONNECT a.example:443/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::unsupported_target),
      bad("connect_userinfo", "CONNECT u@a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n",
          Errc::unsupported_target),
      bad("get_authority_form", request_line("GET a.example:443 HTTP/1.1"),
          Errc::unsupported_target),
      bad("lowercase_connect_is_not_connect", request_line("connect a.example:443 HTTP/1.1"),
          Errc::unsupported_target),
      bad("asterisk_on_get", request_line("GET * HTTP/1.1"), Errc::unsupported_target),

      // --- what is handed in -----------------------------------------------------------------
      bad("bytes_after_head", get_with("") + "x", Errc::malformed_request),
      bad("no_terminator", "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n",
          Errc::malformed_request),
      bad("empty_input", "", Errc::malformed_request),
  };
}

class ParseRequestHead : public testing::TestWithParam<Row> {};

TEST_P(ParseRequestHead, MatchesTable) {
  const Row& row = GetParam();
  const auto result = parse_request_head(row.head, row.limits);
  if (row.error != Errc::ok) {
    ASSERT_FALSE(result) << "parsed unexpectedly";
    EXPECT_EQ(result.error(), make_error_code(row.error))
        << "got " << result.error().message() << ", want " << code_name(row.error);
    return;
  }
  ASSERT_TRUE(result) << result.error().message();
  const Parsed& want = *row.parsed;
  EXPECT_EQ(result->form, want.form);
  EXPECT_EQ(result->scheme, want.scheme);
  EXPECT_EQ(result->host, want.host);
  EXPECT_EQ(result->port, want.port);
  EXPECT_EQ(result->path_and_query, want.path_and_query);
  EXPECT_EQ(result->keep_alive, want.keep_alive);
  EXPECT_EQ(result->chunked, want.chunked);
  EXPECT_EQ(result->content_length, want.content_length);
  EXPECT_EQ(result->has_body, want.chunked || want.content_length.value_or(0) > 0);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseRequestHead, testing::ValuesIn(rows()),
                         [](const testing::TestParamInfo<Row>& row) { return row.param.name; });

TEST(ParseRequestHead, TableIsLargeAndNamesAreUnique) {
  const auto all = rows();
  EXPECT_GE(all.size(), 60u);
  std::set<std::string> names;
  for (const auto& r : all) EXPECT_TRUE(names.insert(r.name).second) << r.name;
}

TEST(ParseRequestHead, KeepsTheParsedMessage) {
  const auto r = parse_request_head(
      "PATCH http://a.example/x HTTP/1.1\r\nHost: a.example\r\nX-Name: caf\xc3\xa9\r\n"
      "Proxy-Authorization: Basic Zm9vOmJhcg==\r\nContent-Length: 2\r\n\r\n",
      {});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->msg().method(), bh::verb::patch);
  EXPECT_EQ(r->msg().target(), "http://a.example/x");
  EXPECT_EQ(r->msg().version(), 11u);
  EXPECT_EQ(r->msg()["X-Name"], "caf\xc3\xa9");
  EXPECT_EQ(r->msg()[bh::field::proxy_authorization], "Basic Zm9vOmJhcg==");  // not stripped yet
  EXPECT_TRUE(r->has_body);
}

TEST(ParseRequestHead, LimitsAreInclusive) {
  const std::string head = get_with("");
  const std::size_t line = head.find("\r\n");
  EXPECT_TRUE(parse_request_head(head, {line, head.size()}));
  EXPECT_EQ(parse_request_head(head, {line - 1, head.size()}).error(),
            make_error_code(Errc::request_line_too_long));
  EXPECT_EQ(parse_request_head(head, {line, head.size() - 1}).error(),
            make_error_code(Errc::headers_too_large));
}

TEST(ParseRequestHead, LargeHeadAtTheDefaultLimit) {
  std::string head = get_with("X-Big: " + std::string(60000, 'b') + "\r\n");
  head.insert(head.size() - 2, "X-Pad: " + std::string(65536 - head.size() - 9, 'p') + "\r\n");
  ASSERT_EQ(head.size(), 65536u);
  EXPECT_TRUE(parse_request_head(head, {}));
  head.insert(head.size() - 4, "p");
  EXPECT_EQ(parse_request_head(head, {}).error(), make_error_code(Errc::headers_too_large));
}

TEST(ParseRequestHead, EveryTruncationIsRefusedWithoutCrashing) {
  const std::string head = post_with("Content-Length: 5\r\nX-A: b\r\n");
  for (std::size_t n = 0; n < head.size(); ++n) {
    EXPECT_FALSE(parse_request_head(head.substr(0, n), {})) << n;
  }
}

// --- find_head_end ----------------------------------------------------------------------

TEST(FindHeadEnd, NeedsMoreAtEveryTruncationPoint) {
  for (const std::string& head :
       {get_with("X-A: 1\r\n"), std::string("CONNECT a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n"),
        std::string("GET / HTTP/1.0\r\n\r\n")}) {
    for (std::size_t n = 0; n < head.size(); ++n) {
      const auto r = find_head_end(std::string_view(head).substr(0, n), {});
      ASSERT_TRUE(r) << n << ": " << r.error().message();
      EXPECT_EQ(*r, 0u) << n;
    }
    EXPECT_EQ(find_head_end(head, {}).value(), head.size());
    EXPECT_EQ(find_head_end(head + "body bytes\r\n\r\n", {}).value(), head.size());
  }
}

// The byte-by-byte scan find_head_end replaced (until 2026-12-03), kept as the reference:
// the line-by-line one must give the same answer for every input and limits.
Result<std::size_t> find_head_end_bytewise(std::string_view buffered, const HeadLimits& limits) {
  bool in_request_line = true;
  std::size_t line_start = 0;
  const auto bare = [&]() -> Result<std::size_t> {
    return make_error_code(in_request_line ? Errc::malformed_request : Errc::invalid_header);
  };
  for (std::size_t i = 0; i < buffered.size(); ++i) {
    if (i >= limits.max_header_bytes) return make_error_code(Errc::headers_too_large);
    const char c = buffered[i];
    if (c == '\n') return bare();
    if (c != '\r') {
      if (in_request_line && i - line_start >= limits.max_request_line) {
        return make_error_code(Errc::request_line_too_long);
      }
      continue;
    }
    if (i + 1 == buffered.size()) break;
    if (buffered[i + 1] != '\n') return bare();
    const bool empty_line = i == line_start;
    if (empty_line && !in_request_line) {
      if (i + 2 > limits.max_header_bytes) return make_error_code(Errc::headers_too_large);
      return i + 2;
    }
    in_request_line = false;
    line_start = i + 2;
    ++i;
  }
  if (buffered.size() >= limits.max_header_bytes) return make_error_code(Errc::headers_too_large);
  return 0;
}

// Random heads made of a few kinds of pieces (plain bytes, CRLF, bare CR, bare LF, CRLFCRLF),
// every prefix of each, under limits small enough to be hit anywhere.
TEST(FindHeadEnd, SameAsTheBytewiseScan) {
  std::mt19937 random(13);
  const std::vector<std::string> pieces = {"a",  "GET / HTTP/1.1", "X: y", "\r\n",  "\r\n", "\r",
                                           "\n", "\r\n\r\n",       " ",    "\r\r\n"};
  for (int round = 0; round < 3000; ++round) {
    std::string head;
    const std::size_t count = random() % 12;
    for (std::size_t k = 0; k < count; ++k) head += pieces[random() % pieces.size()];
    const HeadLimits limits{1 + random() % 24, 1 + random() % 48};
    for (std::size_t n = 0; n <= head.size(); ++n) {
      const std::string_view prefix = std::string_view(head).substr(0, n);
      const auto want = find_head_end_bytewise(prefix, limits);
      const auto got = find_head_end(prefix, limits);
      ASSERT_EQ(got.has_value(), want.has_value()) << testing::PrintToString(std::string(prefix));
      if (want) {
        ASSERT_EQ(*got, *want) << testing::PrintToString(std::string(prefix));
      } else {
        ASSERT_EQ(got.error(), want.error()) << testing::PrintToString(std::string(prefix));
      }
    }
    const auto big = find_head_end(head, {});  // default limits too
    const auto big_want = find_head_end_bytewise(head, {});
    ASSERT_EQ(big.has_value(), big_want.has_value());
    if (big_want) {
      ASSERT_EQ(*big, *big_want);
    }
  }
}

struct EndRow {
  const char* name;
  std::string buffered;
  HeadLimits limits;
  std::size_t end;  // when error == ok
  Errc error = Errc::ok;
};

void PrintTo(const EndRow& row, std::ostream* os) {
  *os << row.name;
}

class FindHeadEndTable : public testing::TestWithParam<EndRow> {};

TEST_P(FindHeadEndTable, Matches) {
  const EndRow& row = GetParam();
  const auto r = find_head_end(row.buffered, row.limits);
  if (row.error == Errc::ok) {
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, row.end);
  } else {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(row.error));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, FindHeadEndTable,
    testing::Values(
        EndRow{"empty", "", {}, 0}, EndRow{"one_crlf", "GET / HTTP/1.1\r\n", {}, 0},
        EndRow{"pending_cr", "GET / HTTP/1.1\r\nHost: a\r\n\r", {}, 0},
        EndRow{"complete", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", {}, 27},
        EndRow{"bare_lf_before_end", "GET / HTTP/1.1\r\nHost: a\n", {}, 0, Errc::invalid_header},
        EndRow{"bare_lf_in_request_line", "GET /\n", {}, 0, Errc::malformed_request},
        EndRow{"bare_cr_in_request_line", "GET /\rx", {}, 0, Errc::malformed_request},
        EndRow{"bare_cr_in_field", "GET / HTTP/1.1\r\nA: \rb", {}, 0, Errc::invalid_header},
        EndRow{"lf_lf", "GET / HTTP/1.1\n\n", {}, 0, Errc::malformed_request},
        EndRow{"request_line_at_limit", "GET /ab HTTP/1.1\r\n", {16, 1000}, 0},
        EndRow{"request_line_over_limit_early",
               "GET /abcd HTTP/1.",
               {16, 1000},
               0,
               Errc::request_line_too_long},
        EndRow{"request_line_over_limit",
               "GET /abc HTTP/1.1\r\n",
               {16, 1000},
               0,
               Errc::request_line_too_long},
        EndRow{"head_at_limit", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", {8192, 27}, 27},
        EndRow{"head_over_limit",
               "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
               {8192, 26},
               0,
               Errc::headers_too_large},
        EndRow{"full_buffer_without_end",
               "GET / HTTP/1.1\r\nHost: a\r\n\r",
               {8192, 26},
               0,
               Errc::headers_too_large},
        EndRow{"one_short_of_full_buffer", "GET / HTTP/1.1\r\nHost: a\r\n", {8192, 26}, 0},
        EndRow{"long_field_line_is_not_request_line",
               "GET / HTTP/1.1\r\nX: " + std::string(100, 'x'),
               {16, 1000},
               0}),
    [](const testing::TestParamInfo<EndRow>& row) { return std::string(row.param.name); });

// --- strip_hop_by_hop -------------------------------------------------------------------

TEST(StripHopByHop, RemovesHopByHopAndNominatedFields) {
  auto r = parse_request_head(
      post_with("Connection: keep-alive, X-Secret, Upgrade\r\nConnection: x-other\r\n"
                "Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
                "Upgrade: h2c\r\nProxy-Authorization: Basic eA==\r\nX-Secret: 1\r\nx-secret: 2\r\n"
                "X-Other: 3\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\nX-Keep: 4\r\n"),
      {});
  ASSERT_TRUE(r) << r.error().message();
  strip_hop_by_hop(r->msg());
  std::vector<std::string> left;
  for (const auto& f : r->msg()) left.emplace_back(f.name_string());
  EXPECT_EQ(left, (std::vector<std::string>{"Host", "Trailer", "Transfer-Encoding", "X-Keep"}));
}

TEST(StripHopByHop, ConnectionCannotRemoveFramingOrHost) {
  auto r = parse_request_head(
      post_with("Connection: close, Host, Content-Length, content-length\r\nContent-Length: 3\r\n"),
      {});
  ASSERT_TRUE(r) << r.error().message();
  strip_hop_by_hop(r->msg());
  EXPECT_EQ(r->msg()[bh::field::host], "a.example");
  EXPECT_EQ(r->msg()[bh::field::content_length], "3");
  EXPECT_EQ(r->msg().count(bh::field::connection), 0u);
}

// The fields that never leave sandgate whatever the wire (an HTTP/2 request's too), in any
// case of their names; Connection, Upgrade and TE are left to the wire.
TEST(StripProxyOnly, RemovesWhatIsSaidToTheProxyAndLeavesTheRest) {
  bh::fields f;
  f.insert("proxy-authorization", "Basic c2I6dG9r");
  f.insert("Proxy-Authorization", "Basic eA==");
  f.insert("PROXY-CONNECTION", "keep-alive");
  f.insert("keep-alive", "timeout=5");
  f.insert("proxy-authenticate", "Basic");
  f.insert("http2-settings", "AAMAAABkAAQAAP__");
  f.insert("te", "trailers");
  f.insert("upgrade", "websocket");
  f.insert("connection", "Upgrade");
  f.insert("authorization", "Bearer kept");
  strip_proxy_only(f);
  std::vector<std::string> left;
  for (const auto& field : f) left.emplace_back(field.name_string());
  EXPECT_EQ(left, (std::vector<std::string>{"te", "upgrade", "connection", "authorization"}));
}

TEST(StripHopByHop, WorksOnResponses) {
  bh::response<bh::empty_body> res{bh::status::proxy_authentication_required, 11};
  res.set(bh::field::proxy_authenticate, "Basic realm=x");
  res.set(bh::field::connection, "close, X-Hop");
  res.set("X-Hop", "1");
  res.set(bh::field::content_type, "text/plain");
  strip_hop_by_hop(res);
  EXPECT_EQ(res.count(bh::field::proxy_authenticate), 0u);
  EXPECT_EQ(res.count("X-Hop"), 0u);
  EXPECT_EQ(res.count(bh::field::connection), 0u);
  EXPECT_EQ(res[bh::field::content_type], "text/plain");
}

// The same edits on a response whose fields live in a ResponseArena (as http_forward.cpp
// relays them) leave the same fields, in the same order, as on Beast's default fields.
TEST(StripHopByHop, SameOnArenaFields) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> rows = {
      {{"Connection", "keep-alive"}, {"Content-Length", "100"}, {"Server", "nginx"}},
      {{"Connection", "close, X-Next"}, {"X-Next", "1"}, {"X-Keep", "2"}},
      {{"X-Before", "1"}, {"Connection", "x-before, x-after"}, {"X-After", "2"}, {"TE", "t"}},
      {{"Connection", "connection, Host"}, {"Host", "h"}, {"Connection", "x-a"}, {"X-A", "1"}},
      {{"Keep-Alive", "timeout=5"}, {"Proxy-Authenticate", "Basic"}, {"Upgrade", "h2c"}},
      {},
  };
  for (const auto& row : rows) {
    ResponseArena arena;
    bh::response_header<ArenaFields> in_arena{ArenaFields::allocator_type(arena)};
    bh::response_header<> plain;
    for (const auto& [name, value] : row) {
      in_arena.insert(name, value);
      plain.insert(name, value);
    }
    strip_hop_by_hop(in_arena);
    strip_hop_by_hop(plain);
    std::vector<std::pair<std::string, std::string>> want;
    std::vector<std::pair<std::string, std::string>> got;
    for (const auto& f : plain) want.emplace_back(f.name_string(), f.value());
    for (const auto& f : in_arena) got.emplace_back(f.name_string(), f.value());
    EXPECT_EQ(got, want) << (row.empty() ? "" : row.front().second);
    EXPECT_EQ(plain.count(bh::field::connection), 0u);
  }
}

TEST(StripHopByHop, ConnectionNamingFieldsAroundIt) {
  bh::response<bh::empty_body> res{bh::status::ok, 11};
  res.insert("X-Before", "1");
  res.insert(bh::field::connection, "X-Before, x-after, connection");
  res.insert("X-After", "2");
  res.insert(bh::field::connection, "X-Last");
  res.insert("X-Kept", "3");
  res.insert("X-Last", "4");
  strip_hop_by_hop(res);
  std::vector<std::string> left;
  for (const auto& f : res) left.emplace_back(f.name_string());
  EXPECT_EQ(left, (std::vector<std::string>{"X-Kept"}));
}

// What Beast's own serializer writes for a message's header (the body is empty).
template <bool isRequest, class Fields>
std::string serialized_by_beast(bh::message<isRequest, bh::empty_body, Fields>& m) {
  bh::serializer<isRequest, bh::empty_body, Fields> sr{m};
  std::string out;
  boost::system::error_code ec;
  while (!sr.is_done() && !ec) {
    sr.next(ec, [&](boost::system::error_code&, const auto& buffers) {
      out += boost::beast::buffers_to_string(buffers);
      sr.consume(boost::asio::buffer_size(buffers));
    });
  }
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

// An HTTP/2 request (what nghttp2 let through) held to what parse_request_head takes from an
// HTTP/1.1 client. The h2_h1_head fuzzer found nghttp2 passing '#', '\', '"', '<', '>' and
// non-ASCII bytes in :path, which the bridge then wrote into an HTTP/1.1 request line.
struct H2RequestRow {
  std::string name;
  std::string method;
  std::string target;
  std::vector<std::string> values;
  Errc want;
};

class CheckH2Request : public testing::TestWithParam<H2RequestRow> {};

TEST_P(CheckH2Request, MatchesTable) {
  const H2RequestRow& row = GetParam();
  const std::vector<std::string_view> values(row.values.begin(), row.values.end());
  EXPECT_EQ(check_h2_request(row.method, row.target, values), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CheckH2Request,
    testing::Values(
        H2RequestRow{"origin_form", "GET", "/a/b?c=d&e=%41", {"x", "a\tb", "\x80"}, Errc::ok},
        H2RequestRow{"whatwg_characters", "GET", "/a{b}|c^d`[e]", {}, Errc::ok},
        H2RequestRow{"asterisk_for_options", "OPTIONS", "*", {}, Errc::ok},
        H2RequestRow{"extension_method", "M-SEARCH", "/", {}, Errc::ok},
        H2RequestRow{"asterisk_for_get", "GET", "*", {}, Errc::unsupported_target},
        H2RequestRow{"fragment", "GET", "/a#b", {}, Errc::malformed_request},
        H2RequestRow{"backslash", "GET", "/a\\b", {}, Errc::malformed_request},
        H2RequestRow{"quote_and_angles", "GET", "/\"<>", {}, Errc::malformed_request},
        H2RequestRow{"non_ascii", "GET", "/\xc3\xa9", {}, Errc::malformed_request},
        H2RequestRow{"bad_escape", "GET", "/?q=%zz", {}, Errc::malformed_request},
        H2RequestRow{"space", "GET", "/a b", {}, Errc::malformed_request},
        H2RequestRow{"empty_target", "GET", "", {}, Errc::malformed_request},
        H2RequestRow{"absolute_form", "GET", "http://a.test/", {}, Errc::unsupported_target},
        H2RequestRow{"connect", "CONNECT", "a.test:443", {}, Errc::unsupported_target},
        H2RequestRow{"method_not_a_token", "G T", "/", {}, Errc::malformed_request},
        H2RequestRow{"empty_method", "", "/", {}, Errc::malformed_request},
        H2RequestRow{"control_byte_in_value", "GET", "/", {"a", "\x01"}, Errc::invalid_header},
        H2RequestRow{"del_in_value", "GET", "/", {"a\x7f"}, Errc::invalid_header}),
    [](const auto& row) { return row.param.name; });

TEST(HeadText, IsWhatBeastsSerializerWritesForARequest) {
  for (const unsigned version : {10U, 11U}) {
    bh::request<bh::empty_body> req;
    req.version(version);
    req.method_string("PURGE");  // a method Beast knows no verb for
    req.target("/a/b?c=d");
    req.set(bh::field::host, "example.com:8080");
    req.insert("X-Custom", "one");
    req.insert("x-custom", "two, three");
    req.set(bh::field::content_length, "0");
    EXPECT_EQ(head_text(req.base()), serialized_by_beast(req)) << version;
    req.method(bh::verb::get);
    EXPECT_EQ(head_text(req.base()), serialized_by_beast(req)) << version;
  }
}

TEST(HeadText, IsWhatBeastsSerializerWritesForAResponse) {
  for (const unsigned status : {200U, 204U, 404U, 599U, 101U}) {
    bh::response<bh::empty_body> res;
    res.version(status == 599 ? 10 : 11);
    res.result(status);
    res.set(bh::field::server, "origin");
    res.insert("Set-Cookie", "a=1");
    res.insert("Set-Cookie", "b=2");
    EXPECT_EQ(head_text(res.base()), serialized_by_beast(res)) << status;  // reason from code
    res.reason("Custom Reason");
    EXPECT_EQ(head_text(res.base()), serialized_by_beast(res)) << status;
  }
  // The same for a response whose fields live in an arena, past the arena's size too (the
  // fields that no longer fit are on the heap).
  for (const std::size_t fields : {0U, 3U, 60U}) {
    ResponseArena arena;
    bh::response<bh::empty_body, ArenaFields> res{
        std::piecewise_construct, std::make_tuple(),
        std::make_tuple(ArenaFields::allocator_type(arena))};
    res.result(bh::status::not_found);
    for (std::size_t i = 0; i < fields; ++i) {
      res.insert("X-Field-" + std::to_string(i), std::string(i % 7 * 5, 'v'));
    }
    res.set(bh::field::content_length, "0");
    EXPECT_EQ(head_text(res.base()), serialized_by_beast(res)) << fields;
    EXPECT_GT(arena.used(), 0u);
  }
  bh::response<bh::empty_body> bare;  // no fields at all
  bare.result(bh::status::ok);
  EXPECT_EQ(head_text(bare.base()), "HTTP/1.1 200 OK\r\n\r\n");
  EXPECT_EQ(head_text(bare.base()), serialized_by_beast(bare));
}

// first_value answers what Beast's operator[] does (the first field of that name, in the order
// they came), for a name that is absent, once, repeated, spelled in other cases or empty, on
// request fields and on a response's arena fields.
TEST(FirstValue, IsWhatBeastsLookupReturns) {
  const bh::field names[] = {bh::field::host, bh::field::proxy_authorization, bh::field::expect,
                             bh::field::upgrade, bh::field::content_length};
  const std::vector<std::vector<std::pair<std::string, std::string>>> heads = {
      {},
      {{"Host", "a.example"}},
      {{"X-One", "1"}, {"proxy-authorization", "Basic first"}, {"Accept", "*/*"}},
      {{"Proxy-Authorization", "Basic first"}, {"PROXY-AUTHORIZATION", "Basic second"}},
      {{"Upgrade", ""}, {"Upgrade", "websocket"}, {"Expect", "100-continue"}},
      {{"Content-Length", "5"}, {"Host", "b"}, {"hOsT", "c"}, {"Content-Length", "6"}},
  };
  for (const auto& fields : heads) {
    bh::fields f;
    ResponseArena arena;
    ArenaFields af{ArenaFields::allocator_type(arena)};
    for (const auto& [name, value] : fields) {
      f.insert(name, value);
      af.insert(name, value);
    }
    for (const bh::field name : names) {
      SCOPED_TRACE(std::string(bh::to_string(name)) + " among " + std::to_string(fields.size()));
      const auto want = f[name];
      EXPECT_EQ(first_value(f, name), std::string_view(want.data(), want.size()));
      EXPECT_EQ(first_value(af, name), std::string_view(want.data(), want.size()));
      EXPECT_EQ(first_field(f, name) != f.end(), f.count(name) > 0);
    }
  }
}

TEST(IdempotentMethod, IsRfc9110sListAndCaseSensitive) {
  for (const char* m : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    EXPECT_TRUE(idempotent_method(m)) << m;
  }
  for (const char* m : {"POST", "PATCH", "CONNECT", "get", "Put", "", "GETX", "PROPFIND"}) {
    EXPECT_FALSE(idempotent_method(m)) << m;
  }
}

}  // namespace
}  // namespace sandgate::http
