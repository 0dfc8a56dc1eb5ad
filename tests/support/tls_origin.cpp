#include "support/tls_origin.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace sandgate::test {

namespace {

[[noreturn]] void ssl_fail(const std::string& what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error(what + ": " + buf);
}

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

void add_ext(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) ssl_fail("X509V3_EXT_conf_nid " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

}  // namespace

TestCertificate make_self_signed_certificate(const std::vector<std::string>& dns_names,
                                             const std::vector<std::string>& ip_addresses) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (!key) ssl_fail("EVP_EC_gen");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), static_cast<long>(::getpid()) * 7919 + 17);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("sandgate test origin"), -1, -1,
                             0);
  X509_set_issuer_name(cert, name);
  std::string san;
  for (const auto& n : dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + n;
  for (const auto& ip : ip_addresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  add_ext(cert, NID_basic_constraints, "critical,CA:TRUE");
  add_ext(cert, NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_ext(cert, NID_ext_key_usage, "serverAuth");
  add_ext(cert, NID_subject_key_identifier, "hash");
  if (!san.empty()) add_ext(cert, NID_subject_alt_name, san);
  if (X509_sign(cert, key, EVP_sha256()) == 0) ssl_fail("X509_sign");

  TestCertificate out;
  BIO* cert_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_bio, cert);
  out.cert_pem = bio_string(cert_bio);
  BIO_free(cert_bio);
  BIO* key_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = bio_string(key_bio);
  BIO_free(key_bio);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

struct TlsOrigin::Impl {
  SSL_CTX* ctx = nullptr;
  int listen_fd = -1;
  std::atomic<bool> stopping{false};
  std::thread acceptor;

  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<std::thread> workers;
  std::set<int> open_fds;
  std::size_t connections = 0;
  std::size_t with_bytes = 0;
  std::size_t handshakes = 0;
  std::vector<std::string> snis;
  std::vector<std::string> lines;

  void accept_loop() {
    while (!stopping) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const std::lock_guard lock(mutex);
      ++connections;
      open_fds.insert(fd);
      workers.emplace_back([this, fd] { serve(fd); });
      changed.notify_all();
    }
  }

  void serve(int fd) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char peek = 0;
    if (::recv(fd, &peek, 1, MSG_PEEK) == 1) {
      {
        const std::lock_guard lock(mutex);
        ++with_bytes;
      }
      changed.notify_all();
      handle_tls(fd);
    }
    const std::lock_guard lock(mutex);
    open_fds.erase(fd);
    ::close(fd);
  }

  void handle_tls(int fd) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
      {
        const std::lock_guard lock(mutex);
        ++handshakes;
        snis.emplace_back(sni ? sni : "");
      }
      changed.notify_all();
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      if (request.find("\r\n\r\n") != std::string::npos) {
        {
          const std::lock_guard lock(mutex);
          lines.push_back(request.substr(0, request.find("\r\n")));
        }
        // "GET /bulk/N": N bytes of TlsOrigin::bulk_body; anything else: a line naming the SNI.
        const std::string line = request.substr(0, request.find("\r\n"));
        const std::string bulk_prefix = "GET /bulk/";
        const std::string body =
            line.starts_with(bulk_prefix)
                ? TlsOrigin::bulk_body(std::stoul(line.substr(bulk_prefix.size())))
                : std::string("hello over tls, sni=") + (sni ? sni : "") + "\n";
        const std::string response =
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
            "Content-Length: " +
            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        for (std::size_t at = 0; at < response.size();) {  // one record is at most 16 KiB
          const int n =
              SSL_write(ssl, response.data() + at,
                        static_cast<int>(std::min<std::size_t>(response.size() - at, 1 << 20)));
          if (n <= 0) break;
          at += static_cast<std::size_t>(n);
        }
        SSL_shutdown(ssl);
      }
    }
    SSL_free(ssl);
  }
};

std::string TlsOrigin::bulk_body(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 31 + i / 4093) & 0xFF);
  return out;
}

TlsOrigin::TlsOrigin(const std::vector<std::string>& dns_names) : impl_(std::make_unique<Impl>()) {
  const TestCertificate cert = make_self_signed_certificate(dns_names, {"127.0.0.1"});
  ca_file_ = dir_.write("ca.pem", cert.cert_pem);

  impl_->ctx = SSL_CTX_new(TLS_server_method());
  BIO* cb = BIO_new_mem_buf(cert.cert_pem.data(), static_cast<int>(cert.cert_pem.size()));
  X509* x = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  BIO* kb = BIO_new_mem_buf(cert.key_pem.data(), static_cast<int>(cert.key_pem.size()));
  EVP_PKEY* k = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  if (!x || !k || SSL_CTX_use_certificate(impl_->ctx, x) != 1 ||
      SSL_CTX_use_PrivateKey(impl_->ctx, k) != 1) {
    ssl_fail("TlsOrigin certificate");
  }
  X509_free(x);
  EVP_PKEY_free(k);

  impl_->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(impl_->listen_fd, 64) != 0 ||
      ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("TlsOrigin: cannot listen");
  }
  port_ = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] { impl->accept_loop(); });
}

TlsOrigin::~TlsOrigin() {
  impl_->stopping = true;
  impl_->acceptor.join();
  std::vector<std::thread> workers;
  {
    const std::lock_guard lock(impl_->mutex);
    for (const int fd : impl_->open_fds) ::shutdown(fd, SHUT_RDWR);  // wakes blocked reads
    workers.swap(impl_->workers);
  }
  for (auto& t : workers) t.join();
  ::close(impl_->listen_fd);
  SSL_CTX_free(impl_->ctx);
}

std::size_t TlsOrigin::connection_count() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->connections;
}

std::size_t TlsOrigin::connections_with_bytes() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->with_bytes;
}

std::size_t TlsOrigin::handshakes() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->handshakes;
}

std::vector<std::string> TlsOrigin::sni_seen() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->snis;
}

std::vector<std::string> TlsOrigin::request_lines() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->lines;
}

bool TlsOrigin::wait_for_connections(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return impl_->connections >= n; });
}

std::string make_client_hello(const std::optional<std::string>& sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  if (sni) SSL_set_tlsext_host_name(ssl, sni->c_str());
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);  // ssl owns both now
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // wants to read the ServerHello: the ClientHello is in wbio
  std::string out = bio_string(wbio);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  if (out.empty()) throw std::runtime_error("make_client_hello: OpenSSL wrote nothing");
  return out;
}

}  // namespace sandgate::test
