// error_response(): every code's status, the X-Sandgate-Error header, the JSON body, framing.
#include "proxy/responses.hpp"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json.hpp>

namespace sandgate::proxy {
namespace {

namespace bh = boost::beast::http;

// Parses the bytes as one whole response; fails the test if they are not exactly that.
bh::response<bh::string_body> parse(const std::string& bytes) {
  bh::response_parser<bh::string_body> p;
  boost::system::error_code ec;
  const std::size_t used = p.put(boost::asio::buffer(bytes), ec);
  std::size_t more = 0;
  if (!ec && !p.is_done())
    more = p.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
  EXPECT_FALSE(ec) << ec.message() << "\n" << bytes;
  EXPECT_TRUE(p.is_done()) << bytes;
  EXPECT_EQ(used + more, bytes.size()) << "bytes after the response";
  return p.release();
}

struct Row {
  Errc code;
  unsigned status;
  bool retryable;
};

TEST(ErrorResponse, EveryCodeHasItsStatusHeaderAndBody) {
  const Row rows[] = {
      {Errc::network_denied, 403, false},           {Errc::proxy_auth_required, 407, false},
      {Errc::too_many_connections, 429, true},      {Errc::header_timeout, 408, true},
      {Errc::malformed_request, 400, false},        {Errc::host_mismatch, 400, false},
      {Errc::upstream_dns_failed, 502, true},       {Errc::upstream_connect_failed, 502, true},
      {Errc::upstream_timeout, 504, true},          {Errc::upstream_protocol_error, 502, false},
      {Errc::local_resources_exhausted, 503, true},
  };
  for (const Row& row : rows) {
    ErrorInfo info;
    info.code = row.code;
    info.sandbox = "sb1";
    info.host = "example.com";
    info.port = 443;
    const auto res = parse(error_response(info));
    EXPECT_EQ(res.result_int(), row.status) << code_name(row.code);
    EXPECT_EQ(res["X-Sandgate-Error"], code_name(row.code));
    EXPECT_EQ(res[bh::field::connection], "close");
    EXPECT_EQ(res.count(bh::field::proxy_authenticate), row.code == Errc::proxy_auth_required);
    const auto body = boost::json::parse(res.body()).as_object();
    EXPECT_EQ(body.at("code").as_string(), code_name(row.code));
    EXPECT_EQ(body.at("retryable").as_bool(), row.retryable) << code_name(row.code);
    EXPECT_EQ(body.at("message").as_string(), default_message(row.code));
    EXPECT_EQ(body.at("sandbox").as_string(), "sb1");
    EXPECT_EQ(body.at("host").as_string(), "example.com");
    EXPECT_EQ(body.at("port").as_int64(), 443);
    EXPECT_EQ(body.contains("reason"), row.code == Errc::network_denied);
  }
}

TEST(ErrorResponse, ADenialCarriesReasonRuleAndSuggestion) {
  ErrorInfo info;
  info.code = Errc::network_denied;
  info.reason = "no_matching_rule";
  info.rule = "";
  info.suggestion = "[sandboxes.sb1] allow = [\"example.com:443\"]";
  const auto body = boost::json::parse(parse(error_response(info)).body()).as_object();
  EXPECT_EQ(body.at("reason").as_string(), "no_matching_rule");
  EXPECT_EQ(body.at("rule").as_string(), "");
  EXPECT_EQ(body.at("suggestion").as_string(), info.suggestion);
  EXPECT_FALSE(body.contains("sandbox"));  // empty fields are left out
  EXPECT_FALSE(body.contains("port"));
}

TEST(ErrorResponse, ValuesAreJsonEscapedAndNeverBreakTheHead) {
  ErrorInfo info;
  info.code = Errc::network_denied;
  info.host = "a\"b\r\nX-Injected: 1";
  info.message = "line\r\nbreak";
  const auto res = parse(error_response(info));
  EXPECT_EQ(res.count("X-Injected"), 0u);
  const auto body = boost::json::parse(res.body()).as_object();
  EXPECT_EQ(body.at("host").as_string(), info.host);
  EXPECT_EQ(body.at("message").as_string(), info.message);
}

TEST(ErrorResponse, TheTlsAlertIsAFatalAccessDenied) {
  EXPECT_EQ(tls_access_denied_alert(), std::string_view("\x15\x03\x03\x00\x02\x02\x31", 7));
}

}  // namespace
}  // namespace sandgate::proxy
