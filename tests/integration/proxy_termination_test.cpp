// Every exchange leaves a true line however it ends (issue 15 items 1-3): clients that break
// off downloads and uploads, bodies that turn malformed after the head went upstream, resets
// passed on as resets, requests in flight at shutdown; each line says who ended it and when.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kId = "sb1";
const std::string kToken = "tok-sb1-termination-Qx81";

// A TCP origin that reads a little, sends `bytes` bytes, then resets the connection
// (SO_LINGER 0), as an origin that crashes mid-response does.
class ResettingOrigin {
 public:
  explicit ResettingOrigin(std::size_t bytes) : bytes_(bytes) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("ResettingOrigin: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ResettingOrigin() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof buf, 0);  // the request
      const std::string data(bytes_, 'r');
      (void)::send(c, data.data(), data.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(50ms);  // let the bytes leave before the reset
      const linger l{1, 0};
      ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      ::close(c);
    }
  }
  std::size_t bytes_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ProxyTermination : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string p = std::to_string(origin_.port());
    const std::string r = std::to_string(resetting_.port());
    SandgateOptions options;
    options.tables = R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 8000  # longer than the shutdown grace (5 s)
connect_timeout_ms = 1000

[dns.hosts]
"origin.test" = ["127.0.0.1"]
"reset.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken +
                     R"("
ports = [)" + p + ", " +
                     r + R"(]
allow = ["origin.test", "reset.test"]
allow_cidrs = ["127.0.0.0/8"]
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::string at(const std::string& host, std::uint16_t port) const {
    return host + ":" + std::to_string(port);
  }
  std::string origin() const { return at("origin.test", origin_.port()); }

  // The exchange's line, found by its event code and termination.
  std::optional<boost::json::object> line_ended(const std::string& code,
                                                const std::vector<std::string>& ended,
                                                std::chrono::milliseconds timeout = 3000ms) {
    return daemon_->wait_audit(
        [&](const boost::json::object& o) {
          if (json_string(o, "event.code") != code) return false;
          const auto t = json_string(o, "labels.termination");
          return t && std::find(ended.begin(), ended.end(), *t) != ended.end();
        },
        timeout);
  }

  HttpOrigin origin_;
  ResettingOrigin resetting_{10 * 1024};
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyTermination, AFinishedExchangeIsCompletedAndATunnelSaysWhoClosed) {
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_get(origin(), "/ok", kId, kToken)));
    ASSERT_TRUE(c.read_response());
  }
  const auto done = line_ended("http_request", {"completed"});
  ASSERT_TRUE(done);
  EXPECT_EQ(json_string(*done, "event.outcome"), "success");
  EXPECT_FALSE(json_string(*done, "labels.termination_phase"));
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_connect(origin(), kId, kToken)));
    ASSERT_TRUE(c.read_response(3000ms, ResponseTo::connect));
    ASSERT_TRUE(c.send("GET /t HTTP/1.1\r\nHost: " + origin() + "\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
    c.shutdown_write();
    EXPECT_TRUE(c.wait_closed());
  }
  const auto tunnel = line_ended("connection_closed", {"client_close"});
  ASSERT_TRUE(tunnel);
  EXPECT_EQ(json_string(*tunnel, "labels.termination_phase"), "body");
}

// A download the client cuts after 100 KB: the line has the bytes that reached it.
TEST_F(ProxyTermination, AClientThatBreaksOffADownloadLeavesALine) {
  origin_.set_handler([](const RecordedRequest&) {
    return OriginReply::with_length(200, pattern_bytes(8u << 20));
  });
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send(proxy_get(origin(), "/big", kId, kToken)));
    EXPECT_EQ(c.read_exactly(100 * 1024).size(), 100u * 1024);
  }  // closed with unread bytes: the kernel resets
  const auto line = line_ended("http_request", {"client_close", "client_reset"});
  ASSERT_TRUE(line) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line, "event.outcome"), "failure");
  EXPECT_EQ(json_string(*line, "event.reason"), "response_truncated");
  EXPECT_EQ(json_string(*line, "labels.termination_phase"), "body");
  EXPECT_EQ(json_string(*line, "url.path"), "/big");
  EXPECT_GE(json_int(*line, "destination.bytes").value_or(0), 100 * 1024);
  EXPECT_TRUE(daemon_->wait_no_connections());
}

// An upload that sends 2 MiB of a 100 MB body and closes: 2 MiB reached the destination, and
// the line says so.
TEST_F(ProxyTermination, AClientThatBreaksOffAnUploadLeavesALine) {
  {
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send("POST http://" + origin() + "/exfil HTTP/1.1\r\nHost: " + origin() + "\r\n" +
                       proxy_auth_line(kId, kToken) + "Content-Length: 100000000\r\n\r\n"));
    ASSERT_TRUE(c.send(pattern_bytes(2u << 20)));
    c.shutdown_write();
    c.wait_closed();
  }
  const auto line = line_ended("http_request", {"client_close"});
  ASSERT_TRUE(line) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line, "event.outcome"), "failure");
  EXPECT_EQ(json_string(*line, "event.reason"), "request_truncated");
  EXPECT_EQ(json_string(*line, "labels.termination_phase"), "request");
  EXPECT_EQ(json_string(*line, "http.request.method"), "POST");
  EXPECT_GE(json_int(*line, "source.bytes").value_or(0), 2 << 20);
  EXPECT_EQ(origin_.request_count(), 0u);  // the origin never got a whole request
}

// A chunked body that turns malformed after its head went upstream: the client gets the 400,
// the line has what reached the destination, and the destination never sees the request end.
TEST_F(ProxyTermination, ABodyThatTurnsMalformedAfterTheHeadGets400AndALine) {
  const std::vector<std::string> bad_tails = {
      "zz\r\nmore\r\n0\r\n\r\n",                // a bad chunk size
      "4;ext=\"a\r\nb\"\r\nmore\r\n0\r\n\r\n",  // a chunk extension with a quoted CRLF
      "0\r\nContent-Length: 5\r\n\r\n",         // a trailer with Content-Length
  };
  for (const std::string& tail : bad_tails) {
    SCOPED_TRACE(tail);
    const std::size_t before = daemon_->audit_lines().size();
    RawClient c(daemon_->explicit_port());
    ASSERT_TRUE(c.send("POST http://" + origin() + "/exfil HTTP/1.1\r\nHost: " + origin() + "\r\n" +
                       proxy_auth_line(kId, kToken) +
                       "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"));
    ASSERT_TRUE(eventually([&] { return origin_.bytes_received() > 0; }));
    ASSERT_TRUE(c.send(tail));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_TRUE(IsSandgateError(*r, 400, "MALFORMED_REQUEST", false));
    const auto line = daemon_->wait_audit(
        [](const boost::json::object& o) {
          return json_string(o, "event.code") == "MALFORMED_REQUEST";
        },
        3000ms, before);
    ASSERT_TRUE(line);
    EXPECT_EQ(json_string(*line, "event.reason"), "request_truncated");
    EXPECT_EQ(json_string(*line, "labels.termination"), "malformed");
    EXPECT_EQ(json_string(*line, "labels.termination_phase"), "request");
    EXPECT_GT(json_int(*line, "source.bytes").value_or(0), 0);
  }
  EXPECT_EQ(origin_.request_count(), 0u) << "a request with a malformed body reached its end";
}

// Inside CONNECT, an origin that sends 10 KB and resets: the client gets a reset too (not a
// FIN it would take for the end of the data), and the line says the upstream broke.
TEST_F(ProxyTermination, AnUpstreamResetInATunnelIsPassedOnAsAReset) {
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_connect(at("reset.test", resetting_.port()), kId, kToken)));
  ASSERT_TRUE(c.read_response(3000ms, ResponseTo::connect));
  ASSERT_TRUE(
      c.send("GET / HTTP/1.1\r\nHost: " + at("reset.test", resetting_.port()) + "\r\n\r\n"));
  std::size_t got = 0;
  int last_errno = 0;
  for (;;) {
    char buf[4096];
    const ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    last_errno = n < 0 ? errno : 0;
    break;
  }
  EXPECT_EQ(last_errno, ECONNRESET) << "the client saw a clean end after " << got << " bytes";
  const auto line = line_ended("connection_closed", {"upstream_reset"});
  ASSERT_TRUE(line) << daemon_->audit_text();
  EXPECT_EQ(json_string(*line, "labels.termination_phase"), "body");
}

// A request still waiting for its response at SIGTERM is ended by the shutdown, and says so.
TEST_F(ProxyTermination, ARequestInFlightAtShutdownIsLoggedAsShutdown) {
  origin_.set_handler([](const RecordedRequest&) { return OriginReply::silence(); });
  RawClient c(daemon_->explicit_port());
  ASSERT_TRUE(c.send(proxy_get(origin(), "/pending", kId, kToken)));
  ASSERT_TRUE(origin_.wait_for_requests(1));
  daemon_->stop(10000ms);
  const auto lines = daemon_->audit_lines();
  const auto it = std::find_if(lines.begin(), lines.end(), [](const boost::json::object& o) {
    return json_string(o, "url.path") == "/pending";
  });
  ASSERT_NE(it, lines.end()) << daemon_->audit_text();
  EXPECT_EQ(json_string(*it, "event.code"), "http_request");
  EXPECT_EQ(json_string(*it, "labels.termination"), "shutdown");
  EXPECT_EQ(json_string(*it, "labels.termination_phase"), "headers");
  EXPECT_EQ(daemon_->audit_text().find("UPSTREAM_PROTOCOL_ERROR"), std::string::npos);
}

}  // namespace
}  // namespace sandgate::test
