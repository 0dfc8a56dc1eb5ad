#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace sandgate::test {

// A self-signed certificate and its key, made in memory with OpenSSL (EC P-256, valid for a
// day, subjectAltName = the given DNS names and IP addresses, CA:TRUE so that it can be its
// own trust anchor for curl --cacert).
struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
};
TestCertificate make_self_signed_certificate(const std::vector<std::string>& dns_names,
                                             const std::vector<std::string>& ip_addresses);

// A real TLS (OpenSSL) HTTPS origin on 127.0.0.1, port chosen by the kernel, a thread per
// connection. Records every connection, whether any byte arrived on it before it closed, each
// completed handshake's SNI, and each request line; answers every request with 200 and a body
// naming the SNI, then closes. Thread-safe.
class TlsOrigin {
 public:
  explicit TlsOrigin(const std::vector<std::string>& dns_names);
  ~TlsOrigin();
  TlsOrigin(const TlsOrigin&) = delete;
  TlsOrigin& operator=(const TlsOrigin&) = delete;

  std::uint16_t port() const { return port_; }
  // What "GET /bulk/N" is answered with: N bytes of a fixed pattern.
  static std::string bulk_body(std::size_t size);
  // A PEM file with the certificate, for curl --cacert.
  const std::string& ca_file() const { return ca_file_; }

  std::size_t connection_count() const;
  // Connections on which at least one byte arrived (a ClientHello or anything else).
  std::size_t connections_with_bytes() const;
  std::size_t handshakes() const;
  std::vector<std::string> sni_seen() const;  // one per completed handshake ("" = no SNI)
  std::vector<std::string> request_lines() const;
  bool wait_for_connections(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
  TempDir dir_;
  std::string ca_file_;
};

// The bytes of a TLS ClientHello (as a client would first send them) with the given SNI, or
// none; made with OpenSSL through memory BIOs.
std::string make_client_hello(const std::optional<std::string>& sni);

}  // namespace sandgate::test
