// Real TLS handshakes with minted leaves: `openssl s_client` (a subprocess) and an in-process
// OpenSSL client connect over loopback to a server that uses Leaf::server_context().
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "tls/authority.hpp"
#include "tls/ca_init.hpp"
#include "x509_checks.hpp"

namespace sandgate::tls {
namespace {

using sandgate::test::run_command;
using sandgate::test::TempDir;
using test::with_hook;

// Serves TLS on 127.0.0.1 (kernel-chosen port) with one SSL_CTX, one connection at a time, on
// its own thread: handshake, write "hello\n", read until the client closes. Records whether
// each handshake was a resumption.
class LoopbackTlsServer {
 public:
  explicit LoopbackTlsServer(std::shared_ptr<SSL_CTX> ctx) : ctx_(std::move(ctx)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~LoopbackTlsServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  LoopbackTlsServer(const LoopbackTlsServer&) = delete;
  LoopbackTlsServer& operator=(const LoopbackTlsServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::vector<bool> resumed() const {
    const std::lock_guard lock(mutex_);
    return resumed_;
  }

 private:
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      SSL* ssl = SSL_new(ctx_.get());
      SSL_set_fd(ssl, conn);
      if (SSL_accept(ssl) == 1) {
        {
          const std::lock_guard lock(mutex_);
          resumed_.push_back(SSL_session_reused(ssl) == 1);
        }
        SSL_write(ssl, "hello\n", 6);
        char buf[256];
        while (SSL_read(ssl, buf, sizeof buf) > 0) {
        }
        SSL_shutdown(ssl);
      }
      ERR_clear_error();
      SSL_free(ssl);
      ::close(conn);
    }
  }

  std::shared_ptr<SSL_CTX> ctx_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<bool> resumed_;
};

struct Fixture {
  TempDir tmp;
  CaFiles files = create_ca(tmp.path() / "ca", false).files;
  std::shared_ptr<const Authority> ca = Authority::load(files.cert, files.key);
};

std::string describe(const sandgate::test::CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

sandgate::test::CommandResult s_client(const Fixture& f, std::uint16_t port,
                                       std::vector<std::string> extra) {
  std::vector<std::string> argv{"openssl",
                                "s_client",
                                "-connect",
                                "127.0.0.1:" + std::to_string(port),
                                "-CAfile",
                                f.files.cert.string(),
                                "-verify_return_error",
                                "-brief"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv);
}

TEST(LeafHandshake, OpensslClientVerifiesTheLeafForItsName) {
  const Fixture f;
  const auto leaf = f.ca->mint("api.example.test");
  ASSERT_TRUE(leaf);
  const LoopbackTlsServer server((*leaf)->server_context());

  for (const char* version : {"-tls1_2", "-tls1_3"}) {
    const auto ok = s_client(
        f, server.port(),
        {"-servername", "api.example.test", "-verify_hostname", "api.example.test", version});
    EXPECT_EQ(ok.exit_code, 0) << version << "\n" << describe(ok);
    EXPECT_NE(ok.err.find("Verification: OK"), std::string::npos) << describe(ok);
  }

  const auto wrong =
      s_client(f, server.port(),
               {"-servername", "api.example.test", "-verify_hostname", "other.example.test"});
  EXPECT_NE(wrong.exit_code, 0) << describe(wrong);
  EXPECT_NE(wrong.err.find("hostname mismatch"), std::string::npos) << describe(wrong);
}

TEST(LeafHandshake, OpensslClientVerifiesAnIpLeaf) {
  const Fixture f;
  const auto leaf = f.ca->mint("127.0.0.1");
  ASSERT_TRUE(leaf);
  const LoopbackTlsServer server((*leaf)->server_context());
  const auto ok = s_client(f, server.port(), {"-verify_ip", "127.0.0.1"});
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
  const auto wrong = s_client(f, server.port(), {"-verify_ip", "127.0.0.2"});
  EXPECT_NE(wrong.exit_code, 0) << describe(wrong);
  EXPECT_NE(wrong.err.find("IP address mismatch"), std::string::npos) << describe(wrong);
}

TEST(LeafHandshake, OldProtocolsAreRefused) {
  const Fixture f;
  const auto leaf = f.ca->mint("api.example.test");
  ASSERT_TRUE(leaf);
  const LoopbackTlsServer server((*leaf)->server_context());
  const auto old = s_client(f, server.port(), {"-servername", "api.example.test", "-tls1_1"});
  EXPECT_NE(old.exit_code, 0) << describe(old);
}

// One in-process client connection: verifies the leaf for `name`, reads the greeting.
struct ClientResult {
  bool verified = false;
  bool reused = false;
  std::string alpn;
  SSL_SESSION* session = nullptr;  // owned by the caller
};

ClientResult connect_client(SSL_CTX* ctx, std::uint16_t port, const std::string& name,
                            SSL_SESSION* resume) {
  ClientResult out;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, name.c_str());
  SSL_set1_host(ssl, name.c_str());
  if (resume != nullptr) SSL_set_session(ssl, resume);
  if (SSL_connect(ssl) == 1) {
    out.verified = SSL_get_verify_result(ssl) == X509_V_OK;
    char buf[16] = {};
    // TLS 1.3 tickets arrive after the handshake: reading the greeting takes them in.
    SSL_read(ssl, buf, sizeof buf - 1);
    out.reused = SSL_session_reused(ssl) == 1;
    const unsigned char* proto = nullptr;
    unsigned proto_len = 0;
    SSL_get0_alpn_selected(ssl, &proto, &proto_len);
    out.alpn.assign(reinterpret_cast<const char*>(proto), proto_len);
    out.session = SSL_get1_session(ssl);
    SSL_shutdown(ssl);
  }
  ERR_clear_error();
  SSL_free(ssl);
  ::close(fd);
  return out;
}

std::unique_ptr<SSL_CTX, OpenSslFree<SSL_CTX_free>> client_context(const Fixture& f,
                                                                   int max_version) {
  std::unique_ptr<SSL_CTX, OpenSslFree<SSL_CTX_free>> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx.get(), f.files.cert.c_str(), nullptr);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_CLIENT);
  return ctx;
}

class LeafResumption : public ::testing::TestWithParam<int> {};

TEST_P(LeafResumption, SecondConnectionResumes) {
  const Fixture f;
  const auto leaf = f.ca->mint("api.example.test");
  ASSERT_TRUE(leaf);
  const LoopbackTlsServer server((*leaf)->server_context());
  const auto ctx = client_context(f, GetParam());

  const ClientResult first = connect_client(ctx.get(), server.port(), "api.example.test", nullptr);
  ASSERT_TRUE(first.verified);
  ASSERT_NE(first.session, nullptr);
  EXPECT_FALSE(first.reused);
  const ClientResult second =
      connect_client(ctx.get(), server.port(), "api.example.test", first.session);
  EXPECT_TRUE(second.verified);
  EXPECT_TRUE(second.reused);
  SSL_SESSION_free(first.session);
  SSL_SESSION_free(second.session);
  EXPECT_EQ(server.resumed(), (std::vector<bool>{false, true}));
}

INSTANTIATE_TEST_SUITE_P(Versions, LeafResumption,
                         ::testing::Values(TLS1_2_VERSION, TLS1_3_VERSION), [](const auto& row) {
                           return std::string(row.param == TLS1_2_VERSION ? "Tls12" : "Tls13");
                         });

int select_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
              unsigned int inlen, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kH2, sizeof kH2, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

TEST(LeafHandshake, ContextHookInstallsAlpnSelection) {
  const Fixture f;
  const auto leaf = f.ca->mint("api.example.test", with_hook([](SSL_CTX* ctx) {
                                 SSL_CTX_set_alpn_select_cb(ctx, select_h2, nullptr);
                               }));
  ASSERT_TRUE(leaf);
  const LoopbackTlsServer server((*leaf)->server_context());
  const auto ctx = client_context(f, TLS1_3_VERSION);
  static const unsigned char kOffer[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1', 2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kOffer, sizeof kOffer);
  const ClientResult r = connect_client(ctx.get(), server.port(), "api.example.test", nullptr);
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.alpn, "h2");
  SSL_SESSION_free(r.session);
}

}  // namespace
}  // namespace sandgate::tls
