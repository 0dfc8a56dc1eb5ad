// error_response(): every code's status, the X-Sandgate-Error header, the JSON body, framing.
#include "proxy/responses.hpp"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json.hpp>
#include <optional>
#include <string>

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

// reason_phrase(): one row per case, hostile inputs included; the phrase is exact.
struct PhraseRow {
  const char* name;
  ErrorInfo info;
  std::string phrase;
};

ErrorInfo info_of(Errc code, std::string_view sandbox, std::string_view host, std::uint16_t port,
                  std::string_view reason = {}, std::optional<bool> retry = {}) {
  ErrorInfo info;
  info.code = code;
  info.sandbox = sandbox;
  info.host = host;
  info.port = port;
  info.reason = reason;
  info.retryable = retry;
  return info;
}

bool printable_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  }
  return true;
}

TEST(ReasonPhrase, SaysCodeDestinationSandboxAndWhetherToRetry) {
  const std::string long_host = std::string(240, 'a') + ".x.evil.example";
  const std::string huge_host(10000, 'h');
  const std::string long_id(300, 's');
  const PhraseRow rows[] = {
      {"denial", info_of(Errc::network_denied, "agent-1", "example.com", 443, "no_matching_rule"),
       "SANDBOX_NETWORK_DENIED example.com:443 for sandbox agent-1 (no_matching_rule; not "
       "retryable)"},
      {"denial without a reason", info_of(Errc::network_denied, "agent-1", "example.com", 80),
       "SANDBOX_NETWORK_DENIED example.com:80 for sandbox agent-1 (not retryable)"},
      {"407 names no sandbox", info_of(Errc::proxy_auth_required, "", "example.com", 443),
       "PROXY_AUTH_REQUIRED example.com:443 (not retryable)"},
      {"407 says what was wrong",
       info_of(Errc::proxy_auth_required, "", "example.com", 443, "invalid_credentials"),
       "PROXY_AUTH_REQUIRED example.com:443 (invalid_credentials; not retryable)"},
      {"429", info_of(Errc::too_many_connections, "agent-1", "", 0),
       "TOO_MANY_CONNECTIONS for sandbox agent-1 (retryable)"},
      {"no destination, no sandbox", info_of(Errc::malformed_request, "", "", 0),
       "MALFORMED_REQUEST (not retryable)"},
      {"502", info_of(Errc::upstream_connect_failed, "sb", "10.0.0.1", 8080),
       "UPSTREAM_CONNECT_FAILED 10.0.0.1:8080 for sandbox sb (retryable)"},
      {"504", info_of(Errc::upstream_timeout, "sb", "slow.example", 443),
       "UPSTREAM_TIMEOUT slow.example:443 for sandbox sb (retryable)"},
      {"421", info_of(Errc::misdirected_request, "sb", "other.example", 443),
       "MISDIRECTED_REQUEST other.example:443 for sandbox sb (not retryable)"},
      {"503 whose retryable is overridden",
       info_of(Errc::credential_unavailable, "sb", "api.github.com", 443, {}, false),
       "CREDENTIAL_UNAVAILABLE api.github.com:443 for sandbox sb (not retryable)"},
      {"503 retryable",
       info_of(Errc::credential_unavailable, "sb", "api.github.com", 443, {}, true),
       "CREDENTIAL_UNAVAILABLE api.github.com:443 for sandbox sb (retryable)"},
      {"IPv6 literal", info_of(Errc::network_denied, "sb", "[::1]", 443, "special_address"),
       "SANDBOX_NETWORK_DENIED [::1]:443 for sandbox sb (special_address; not retryable)"},
      // Hostile bytes: nothing can end the status line or leave ASCII.
      {"CRLF in the host",
       info_of(Errc::network_denied, "sb", "a\r\nX-Injected: 1", 80, "invalid_host"),
       "SANDBOX_NETWORK_DENIED a??X-Injected: 1:80 for sandbox sb (invalid_host; not retryable)"},
      {"NUL, DEL and UTF-8 in the host",
       info_of(Errc::network_denied, "sb", std::string_view("a\0b\x7f\xc3\xa9", 6), 80),
       "SANDBOX_NETWORK_DENIED a?b???:80 for sandbox sb (not retryable)"},
      {"controls in the sandbox id", info_of(Errc::upstream_timeout, "s\nb\t", "h.example", 1),
       "UPSTREAM_TIMEOUT h.example:1 for sandbox s?b? (retryable)"},
      {"a hostile reason name", info_of(Errc::network_denied, "sb", "h", 1, "x\r\ny"),
       "SANDBOX_NETWORK_DENIED h:1 for sandbox sb (x??y; not retryable)"},
      // Long values keep their right end (who owns a name) within the bound.
      {"a long host", info_of(Errc::network_denied, "agent-1", long_host, 443, "no_matching_rule"),
       "SANDBOX_NETWORK_DENIED ..." + long_host.substr(long_host.size() - 76) +
           ":443 for sandbox agent-1 (no_matching_rule; not retryable)"},
      {"a huge host", info_of(Errc::upstream_dns_failed, "sb", huge_host, 443),
       "UPSTREAM_DNS_FAILED ..." + huge_host.substr(0, 106) + ":443 for sandbox sb (retryable)"},
      {"a long sandbox id", info_of(Errc::too_many_connections, long_id, "", 0),
       "TOO_MANY_CONNECTIONS for sandbox ..." + std::string(37, 's') + " (retryable)"},
  };
  for (const PhraseRow& row : rows) {
    const std::string phrase = reason_phrase(row.info);
    EXPECT_EQ(phrase, row.phrase) << row.name;
    EXPECT_LE(phrase.size(), kMaxReasonPhraseBytes) << row.name;
    EXPECT_TRUE(printable_ascii(phrase)) << row.name;
  }
}

TEST(ReasonPhrase, EveryCodeWithTheLongestPartsStaysBoundedAndPrintable) {
  const std::string host(5000, '\xff');
  const std::string id(5000, '\n');
  for (int e = static_cast<int>(Errc::ok) + 1; e <= static_cast<int>(Errc::internal_error); ++e) {
    const auto code = static_cast<Errc>(e);
    const std::string phrase =
        reason_phrase(info_of(code, id, host, 65535, "ip_literal_not_allowed"));
    EXPECT_LE(phrase.size(), kMaxReasonPhraseBytes) << code_name(code);
    EXPECT_TRUE(printable_ascii(phrase)) << code_name(code);
    EXPECT_TRUE(phrase.starts_with(code_name(code))) << phrase;
    EXPECT_TRUE(phrase.ends_with("retryable)")) << phrase;
  }
}

TEST(ReasonPhrase, IsTheStatusLineOfTheHttp1ErrorResponseAndNeverASecret) {
  ErrorInfo info = info_of(Errc::network_denied, "agent-1", "example.com", 443, "denied_by_rule");
  info.message = "token sgph_secret in ?query=secret";  // a message never reaches the phrase
  info.rule = "sandboxes.agent-1.deny[0]";
  info.suggestion = "[sandboxes.agent-1] allow = [\"example.com:443\"]";
  const std::string text = error_response(info);
  EXPECT_TRUE(
      text.starts_with("HTTP/1.1 403 SANDBOX_NETWORK_DENIED example.com:443 for sandbox "
                       "agent-1 (denied_by_rule; not retryable)\r\n"))
      << text;
  const auto res = parse(text);
  EXPECT_EQ(res.reason(), reason_phrase(info));
  EXPECT_EQ(reason_phrase(info).find("secret"), std::string::npos);
  // A hostile host still gives one well-formed response.
  info.host = "x\r\n\r\nHTTP/1.1 200 OK\r\n";
  const auto hostile = parse(error_response(info));
  EXPECT_EQ(hostile.result_int(), 403);
  EXPECT_EQ(hostile.count("X-Injected"), 0u);
}

TEST(ReasonPhrase, RepliesWithoutOneKeepTheUsualReason) {
  Reply plain;
  plain.status = 200;
  EXPECT_TRUE(http1_text(plain).starts_with("HTTP/1.1 200 OK\r\n"));
  const Reply git =
      git_refusal_reply("git-upload-pack", info_of(Errc::network_denied, "sb", "h", 1));
  EXPECT_TRUE(http1_text(git).starts_with("HTTP/1.1 200 OK\r\n"));
}

// A suggested [[...git]] block holds newlines; the one pkt-line git prints shows them as spaces.
TEST(ErrorResponse, AGitRefusalShowsABlockSuggestionOnOneLine) {
  ErrorInfo info = info_of(Errc::network_denied, "sb", "github.com", 443);
  info.reason = "git_not_allowed";
  info.suggestion = "[[sandboxes.sb.git]]\nrepos = [\"github.com/o/r\"]\nallow = [\"push\"]";
  const Reply git = git_refusal_reply("git-receive-pack", info);
  EXPECT_NE(git.body.find("; to allow it: [[sandboxes.sb.git]] repos = [\"github.com/o/r\"] "
                          "allow = [\"push\"]\n"),
            std::string::npos)
      << git.body;
  EXPECT_EQ(git.body.find('\n'), git.body.size() - 1);  // one line: the pkt-line's own end
}

TEST(ErrorResponse, TheTlsAlertIsAFatalAccessDenied) {
  EXPECT_EQ(tls_access_denied_alert(), std::string_view("\x15\x03\x03\x00\x02\x02\x31", 7));
}

}  // namespace
}  // namespace sandgate::proxy
