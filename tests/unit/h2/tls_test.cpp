// The production transport: ServerConnection and ClientConnection over
// ssl::stream<tcp::socket> after ALPN chose "h2", against nghttp and against each other.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/ssl.hpp>

#include "h2_fixture.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::h2::test {
namespace {

namespace ssl = asio::ssl;
using TlsStream = ssl::stream<tcp::socket>;

// Picks "h2" from the client's ALPN list, or refuses the handshake.
int select_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
              unsigned int inlen, void*) {
  static constexpr unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kH2, sizeof kH2, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// A self-signed P-256 certificate for 127.0.0.1, made by the openssl command.
struct TestCert {
  sandgate::test::TempDir dir;
  std::string key = dir.file("key.pem");
  std::string cert = dir.file("cert.pem");
  bool made = false;
  TestCert() {
    const auto r = sandgate::test::run_command(
        {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1"});
    made = r.exit_code == 0;
  }
};

// One TLS server on its own thread: every accepted connection is handshaken and served.
class TlsServer {
 public:
  explicit TlsServer(const TestCert& c)
      : ctx_(ssl::context::tls_server),
        acceptor_(ioc_, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    ctx_.use_certificate_chain_file(c.cert);
    ctx_.use_private_key_file(c.key, ssl::context::pem);
    SSL_CTX_set_alpn_select_cb(ctx_.native_handle(), &select_h2, nullptr);
    asio::co_spawn(ioc_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~TlsServer() {
    asio::post(ioc_, [this] { acceptor_.close(); });
    work_.reset();
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::atomic<int> served{0};

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
      if (ec) co_return;
      asio::co_spawn(ioc_, serve(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> serve(tcp::socket socket) {
    TlsStream tls(std::move(socket), ctx_);
    auto [ec] = co_await tls.async_handshake(ssl::stream_base::server, use_tuple);
    if (ec) co_return;
    ServerConnection<TlsStream> conn(tls);
    const Handler handler = standard_handler;
    co_await conn.run(handler);
    ++served;
  }

  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{ioc_.get_executor()};
  ssl::context ctx_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

TEST(H2Tls, NghttpOverTlsWithAlpnH2) {
  TestCert cert;
  ASSERT_TRUE(cert.made);
  TlsServer server(cert);
  const std::string base = "https://127.0.0.1:" + std::to_string(server.port());
  const auto r = sandgate::test::run_command(
      {"nghttp", "-nv", base + "/bytes/300000", base + "/head", base + "/bytes/10"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("The negotiated protocol: h2"), std::string::npos) << r.out.substr(0, 2000);
  int statuses = 0;
  for (auto at = r.out.find(":status: 200"); at != std::string::npos;
       at = r.out.find(":status: 200", at + 1)) {
    ++statuses;
  }
  EXPECT_EQ(statuses, 3);
}

TEST(H2Tls, ClientConnectionOverTls) {
  TestCert cert;
  ASSERT_TRUE(cert.made);
  TlsServer server(cert);
  const std::uint16_t port = server.port();
  ssl::context client_ctx(ssl::context::tls_client);
  client_ctx.load_verify_file(cert.cert);
  client_ctx.set_verify_mode(ssl::verify_peer);
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(client_ctx.native_handle(), kAlpn, sizeof kAlpn);
  std::string body;
  int status = 0;
  std::string alpn;
  ASSERT_TRUE(run_client([&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    TlsStream tls(ex, client_ctx);
    const tcp::endpoint ep(asio::ip::address_v4::loopback(), port);
    co_await tls.lowest_layer().async_connect(ep, asio::use_awaitable);
    co_await tls.async_handshake(ssl::stream_base::client, asio::use_awaitable);
    const unsigned char* proto = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(tls.native_handle(), &proto, &len);
    alpn.assign(reinterpret_cast<const char*>(proto), len);
    ClientConnection<TlsStream> conn(tls);
    bool ended = false;
    detail::Signal done(ex);
    asio::co_spawn(ex, conn.run(), [&](std::exception_ptr, boost::system::error_code) {
      ended = true;
      done.notify();
    });
    const RequestHead head{"GET", "https", "127.0.0.1", "/bytes/500000", {}};
    auto opened = co_await conn.request(head, true);
    if (opened) {
      ClientExchange x = std::move(*opened);
      const auto e = co_await x.read_response_head();
      if (!e) status = x.response().status;
      co_await read_all(x, body);
    }
    conn.shutdown();
    while (!ended) co_await done.wait();
  }));
  EXPECT_EQ(alpn, "h2");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body.size(), 500000u);
  EXPECT_TRUE(body == pattern(500000));
}

}  // namespace
}  // namespace sandgate::h2::test
