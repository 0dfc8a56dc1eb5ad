// Hostile and malformed request heads (THREATS 5, 18) and slow clients, sent byte for byte with
// the raw client: each gets its exact error code, the connection is closed, nothing reaches
// the origin, and the daemon keeps serving.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-malformed-K3u8";

class ProxyMalformed : public ::testing::Test {
 protected:
  void SetUp() override {
    SandgateOptions options;
    options.tables = R"(
[limits]
max_request_line_bytes = 1024
max_header_bytes = 4096
header_timeout_ms = 500
idle_timeout_ms = 3000

[dns.hosts]
"origin.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken +
                     R"("
allow = ["origin.test:)" +
                     std::to_string(origin_.port()) + R"("]
allow_cidrs = ["127.0.0.0/8"]
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::string authority() const { return "origin.test:" + std::to_string(origin_.port()); }
  std::string auth() const { return proxy_auth_line(kId, kToken); }
  std::string get_line() const { return "GET http://" + authority() + "/ HTTP/1.1\r\n"; }
  std::string host_line() const { return "Host: " + authority() + "\r\n"; }

  // Sends bytes on a fresh connection and checks the whole error contract.
  void expect_rejected(const std::string& what, const std::string& bytes, int status,
                       const std::string& code, const std::string& sandbox = {}) {
    SCOPED_TRACE(what);
    const std::size_t lines_before = daemon_->audit_lines().size();
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(bytes));
    const auto r = c.read_response();
    ASSERT_TRUE(r) << "no response";
    EXPECT_TRUE(IsSandgateError(*r, status, code, status == 408));
    std::string rest;
    EXPECT_TRUE(c.wait_closed(3000ms, &rest)) << "connection left open";
    EXPECT_EQ(rest, "") << "bytes after the error response";
    const auto line = daemon_->wait_audit(
        [&](const boost::json::object& o) { return json_string(o, "event.code") == code; }, 3000ms,
        lines_before);
    EXPECT_TRUE(AuditLineIs(line, code, "-", sandbox));
    if (line) {
      EXPECT_EQ(json_int(*line, "http.response.status_code"), status);
    }
    EXPECT_EQ(origin_.connection_count(), 0u) << "the origin saw a connection";
    EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", kId, kToken));
  }

  HttpOrigin origin_;
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyMalformed, ContentLengthWithTransferEncodingIsRefused) {
  const std::string smuggled =
      "GET http://" + authority() + "/smuggled HTTP/1.1\r\n" + host_line() + auth() + "\r\n";
  expect_rejected("CL then TE",
                  "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() +
                      "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
                  400, "CONTENT_LENGTH_WITH_TRANSFER_ENCODING");
}

TEST_F(ProxyMalformed, TransferEncodingBeforeContentLengthIsRefusedToo) {
  expect_rejected("TE then CL",
                  "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() +
                      "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
                  400, "CONTENT_LENGTH_WITH_TRANSFER_ENCODING");
}

TEST_F(ProxyMalformed, ConflictingContentLengthsAreRefused) {
  const std::string post = "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth();
  expect_rejected("two values", post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400,
                  "CONFLICTING_CONTENT_LENGTH");
}

TEST_F(ProxyMalformed, ContentLengthListIsRefused) {
  const std::string post = "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth();
  expect_rejected("list", post + "Content-Length: 5, 5\r\n\r\nhello", 400,
                  "CONFLICTING_CONTENT_LENGTH");
}

TEST_F(ProxyMalformed, TransferEncodingOtherThanChunkedIsRefused) {
  expect_rejected("gzip, chunked",
                  "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() +
                      "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                  400, "UNSUPPORTED_TRANSFER_ENCODING");
}

TEST_F(ProxyMalformed, ObsoleteLineFoldingIsRefused) {
  expect_rejected("obs-fold",
                  get_line() + host_line() + auth() + "X-Long: first\r\n  second\r\n\r\n", 400,
                  "OBSOLETE_LINE_FOLDING");
}

TEST_F(ProxyMalformed, BareLineFeedsAreRefused) {
  expect_rejected("bare LF ending the request line",
                  "GET http://" + authority() + "/ HTTP/1.1\n" + host_line() + auth() + "\r\n", 400,
                  "MALFORMED_REQUEST");
}

TEST_F(ProxyMalformed, BareLineFeedInAHeaderIsRefused) {
  expect_rejected("bare LF ending a header",
                  get_line() + "Host: " + authority() + "\n" + auth() + "\r\n", 400,
                  "INVALID_HEADER");
}

TEST_F(ProxyMalformed, BareCarriageReturnIsRefused) {
  expect_rejected("bare CR", get_line() + host_line() + auth() + "X-A: b\rc\r\n\r\n", 400,
                  "INVALID_HEADER");
}

TEST_F(ProxyMalformed, OversizedRequestLineIsRefused) {
  expect_rejected("request line over 1024 bytes",
                  "GET http://" + authority() + "/" + std::string(2000, 'a') + " HTTP/1.1\r\n" +
                      host_line() + auth() + "\r\n",
                  400, "REQUEST_LINE_TOO_LONG");
}

TEST_F(ProxyMalformed, OversizedHeaderBlockIsRefused) {
  std::string big;
  for (int i = 0; i < 100; ++i)
    big += "X-Filler-" + std::to_string(i) + ": " + std::string(60, 'f') + "\r\n";
  expect_rejected("head over 4096 bytes", get_line() + host_line() + auth() + big + "\r\n", 400,
                  "REQUEST_HEADERS_TOO_LARGE");
}

TEST_F(ProxyMalformed, HostDifferentFromTheAbsoluteUriIsRefused) {  // THREATS 5
  expect_rejected("Host names another host", get_line() + "Host: evil.test\r\n" + auth() + "\r\n",
                  400, "HOST_MISMATCH");
}

TEST_F(ProxyMalformed, HostWithAnotherPortIsRefused) {  // THREATS 5
  expect_rejected("Host names another port",
                  get_line() + "Host: origin.test:1\r\n" + auth() + "\r\n", 400, "HOST_MISMATCH");
}

TEST_F(ProxyMalformed, ConnectWithADifferentHostIsRefused) {
  expect_rejected("CONNECT Host names another host",
                  "CONNECT " + authority() + " HTTP/1.1\r\nHost: evil.test\r\n" + auth() + "\r\n",
                  400, "HOST_MISMATCH");
}

TEST_F(ProxyMalformed, OriginFormToTheProxyIsUnsupported) {
  expect_rejected("origin-form GET", "GET /index.html HTTP/1.1\r\n" + host_line() + auth() + "\r\n",
                  400, "UNSUPPORTED_REQUEST_TARGET", kId);
}

TEST_F(ProxyMalformed, HttpsAbsoluteFormIsUnsupported) {
  expect_rejected("https:// absolute form",
                  "GET https://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() + "\r\n",
                  400, "UNSUPPORTED_REQUEST_TARGET");
}

TEST_F(ProxyMalformed, UserinfoInTheTargetIsUnsupported) {
  expect_rejected(
      "userinfo",
      "GET http://user@" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() + "\r\n", 400,
      "UNSUPPORTED_REQUEST_TARGET");
}

// Issue 9 item 5: a name padded past 300 bytes is refused as invalid_host, and its audit line
// keeps the labels on the right (who owns the name), marked as shortened.
TEST_F(ProxyMalformed, APaddedNameIsAuditedByItsRegisteredDomain) {
  std::string padded;
  for (int i = 0; i < 9; ++i) padded += std::string(60, 'p') + ".";
  padded += "x.evil.example";
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_connect(padded + ":443", kId, kToken)));
  const auto r = c.read_response(3000ms, ResponseTo::connect);
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false));
  const auto line = daemon_->wait_audit_code("SANDBOX_NETWORK_DENIED", "invalid_host");
  ASSERT_TRUE(AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "invalid_host", kId));
  const std::string domain = json_string(*line, "destination.domain").value_or("");
  EXPECT_TRUE(domain.starts_with("\xE2\x80\xA6") && domain.ends_with(".x.evil.example")) << domain;
  EXPECT_LE(domain.size(), 300u);
  EXPECT_EQ(json_string(*line, "destination.address"), domain);
  const auto shortened = line->at("labels").as_object().if_contains("host_shortened");
  EXPECT_TRUE(shortened && *shortened == true);
}

TEST_F(ProxyMalformed, ConnectWithoutAPortIsUnsupported) {
  expect_rejected("CONNECT host only",
                  "CONNECT origin.test HTTP/1.1\r\nHost: origin.test\r\n" + auth() + "\r\n", 400,
                  "UNSUPPORTED_REQUEST_TARGET");
}

TEST_F(ProxyMalformed, MissingHostIsAnInvalidHeader) {
  expect_rejected("HTTP/1.1 without Host", get_line() + auth() + "\r\n", 400, "INVALID_HEADER");
}

TEST_F(ProxyMalformed, RepeatedHostIsAnInvalidHeader) {
  expect_rejected("two Host fields", get_line() + host_line() + host_line() + auth() + "\r\n", 400,
                  "INVALID_HEADER");
}

TEST_F(ProxyMalformed, SpaceBeforeTheColonIsAnInvalidHeader) {
  expect_rejected("space before colon", get_line() + host_line() + auth() + "X-A : b\r\n\r\n", 400,
                  "INVALID_HEADER");
}

TEST_F(ProxyMalformed, NulInAHeaderValueIsAnInvalidHeader) {
  expect_rejected("NUL in a value",
                  get_line() + host_line() + auth() + std::string("X-A: a\0b\r\n\r\n", 12), 400,
                  "INVALID_HEADER");
}

TEST_F(ProxyMalformed, UnknownHttpVersionIsMalformed) {
  expect_rejected("HTTP/2.0 in an HTTP/1 request line",
                  "GET http://" + authority() + "/ HTTP/2.0\r\n" + host_line() + auth() + "\r\n",
                  400, "MALFORMED_REQUEST");
}

TEST_F(ProxyMalformed, NonNumericContentLengthIsMalformed) {
  expect_rejected("Content-Length: +5",
                  "POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() +
                      "Content-Length: +5\r\n\r\nhello",
                  400, "MALFORMED_REQUEST");
}

TEST_F(ProxyMalformed, MalformedRequestOnABoundConnectionIsAuditedWithItsSandbox) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(get_line() + host_line() + auth() + "\r\n"));
  const auto ok = c.read_response();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  ASSERT_TRUE(c.send("POST http://" + authority() + "/ HTTP/1.1\r\n" + host_line() + auth() +
                     "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 400, "CONTENT_LENGTH_WITH_TRANSFER_ENCODING", false));
  EXPECT_TRUE(c.wait_closed());
  EXPECT_TRUE(AuditLineIs(daemon_->wait_audit_code("CONTENT_LENGTH_WITH_TRANSFER_ENCODING"),
                          "CONTENT_LENGTH_WITH_TRANSFER_ENCODING", "-", kId));
  EXPECT_EQ(origin_.request_count(), 1u);
}

TEST_F(ProxyMalformed, SlowlorisHeadersGet408AndAreClosedInBoundedTime) {
  RawClient c(daemon_->explicit_port());
  const std::string head = get_line() + host_line() + auth() + "X-Slow: ";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send(head));
  // One byte every 100 ms: always progressing, never finishing.
  std::thread dribble([fd = c.fd()] {
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(100ms);
      if (::send(fd, "z", 1, MSG_NOSIGNAL) != 1) return;
    }
  });
  const auto r = c.read_response(3000ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  dribble.join();
  ASSERT_TRUE(r) << "no 408 within 3 s";
  EXPECT_TRUE(IsSandgateError(*r, 408, "REQUEST_HEADER_TIMEOUT", true));
  EXPECT_GE(elapsed, 450ms);
  EXPECT_LE(elapsed, 2000ms);
  EXPECT_TRUE(c.wait_closed(1000ms));
  EXPECT_TRUE(AuditLineIs(daemon_->wait_audit_code("REQUEST_HEADER_TIMEOUT"),
                          "REQUEST_HEADER_TIMEOUT", "-", ""));
  EXPECT_EQ(origin_.connection_count(), 0u);
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", kId, kToken));
}

TEST_F(ProxyMalformed, ASilentConnectionIsClosedWithoutAResponse) {
  RawClient c(daemon_->explicit_port());
  const auto start = std::chrono::steady_clock::now();
  std::string rest;
  EXPECT_TRUE(c.wait_closed(3000ms, &rest));
  EXPECT_LE(std::chrono::steady_clock::now() - start, 2000ms);
  EXPECT_EQ(rest, "");
  EXPECT_TRUE(GoodRequestSucceeds(*daemon_, origin_, "origin.test", kId, kToken));
}

}  // namespace
}  // namespace sandgate::test
