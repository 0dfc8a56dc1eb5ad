#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/tls_origin.hpp"

namespace sandgate::test {

// One request as the origin received it.
struct RecordedRequest {
  std::size_t connection = 0;  // 1-based index of the TCP connection it arrived on
  std::string local_address;   // the address the origin was reached at
  std::string method;
  std::string target;
  unsigned version = 11;
  std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
  std::string body;                                          // de-chunked
  bool chunked = false;

  std::string header(std::string_view name) const;  // first value, "" when absent
  std::size_t header_count(std::string_view name) const;
  bool has_header(std::string_view name) const { return header_count(name) > 0; }
};

// What the origin does after reading a request: write `parts` in order (each after its
// delay), then keep the connection for the next request unless close_after.
struct OriginReply {
  struct Part {
    std::string bytes;
    std::chrono::milliseconds delay{0};
  };
  std::vector<Part> parts;
  bool close_after = false;
  bool never_answer = false;  // hold the connection open and send nothing at all

  // "HTTP/1.1 STATUS REASON" + headers + Content-Length + body.
  static OriginReply with_length(int status, std::string body,
                                 std::vector<std::pair<std::string, std::string>> headers = {});
  // Chunked body in chunks of chunk_size bytes, with `delay` before each chunk after the head.
  static OriginReply chunked(int status, std::string body, std::size_t chunk_size,
                             std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                             std::vector<std::pair<std::string, std::string>> headers = {});
  // No Content-Length, no chunking: the body ends when the origin closes.
  static OriginReply until_close(int status, std::string body,
                                 std::vector<std::pair<std::string, std::string>> headers = {});
  // A head without a body (for HEAD, 204, 304); headers are written as given.
  static OriginReply head_only(int status,
                               std::vector<std::pair<std::string, std::string>> headers = {});
  // Exactly these bytes.
  static OriginReply raw(std::string bytes, bool close_after);
  static OriginReply close_now();  // close without a byte
  static OriginReply silence();    // never answer
};

// A real HTTP/1.1 origin on its own thread (Boost.Asio/Beast): records every request it reads,
// every connection and every byte, and answers with whatever the handler returns. The default
// handler answers 200 with a short text body naming the method and target. Thread-safe.
class HttpOrigin {
 public:
  // Binds bind_address:port (port 0: any free port). IPv6 addresses accept IPv6 only.
  explicit HttpOrigin(const std::string& bind_address = "127.0.0.1", std::uint16_t port = 0);
  // An HTTPS origin: every connection is TLS with this certificate (make_self_signed_certificate)
  // first, then served like the plain one; sni_seen() records each handshake's server name.
  HttpOrigin(const std::string& bind_address, std::uint16_t port, const TestCertificate& tls);
  ~HttpOrigin();
  HttpOrigin(const HttpOrigin&) = delete;
  HttpOrigin& operator=(const HttpOrigin&) = delete;

  std::uint16_t port() const;
  void set_handler(std::function<OriginReply(const RecordedRequest&)> handler);

  std::vector<RecordedRequest> requests() const;
  std::size_t request_count() const;
  std::size_t connection_count() const;
  std::uint64_t bytes_received() const;
  // The first 64 KiB each connection sent, concatenated (for "this secret never arrived").
  std::string raw_received() const;
  // HTTPS: the server name of each completed handshake ("" = none), in order.
  std::vector<std::string> sni_seen() const;
  // HTTPS: handshakes that failed (a client that did not trust the certificate, say).
  std::size_t failed_handshakes() const;
  // HTTPS: completed handshakes that resumed an earlier session.
  std::size_t resumed_handshakes() const;
  // Waits until at least n requests were recorded.
  bool wait_for_requests(std::size_t n,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;
  bool wait_for_connections(
      std::size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) const;

 private:
  HttpOrigin(const std::string& bind_address, std::uint16_t port, const TestCertificate* tls);
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// A deterministic byte pattern of the given size (for large-body tests).
std::string pattern_bytes(std::size_t size, unsigned seed = 1);

}  // namespace sandgate::test
