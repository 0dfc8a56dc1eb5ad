#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandgate::test {

// One HTTP response as a client received it.
struct HttpResponse {
  int status = 0;
  unsigned version = 11;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, in order
  std::string body;                                          // de-chunked

  // The first value of a header (case-insensitive name), "" when absent.
  std::string header(std::string_view name) const;
  std::size_t header_count(std::string_view name) const;
  bool has_header(std::string_view name) const { return header_count(name) > 0; }
};

// What a response answers: it decides whether a body follows the head (RFC 9112 §6.3).
enum class ResponseTo {
  other,
  head,     // never a body
  connect,  // a 2xx has no body: the tunnel starts right after the head
};

// A blocking TCP client for hand-written bytes. Every read has a deadline. Connect failures
// throw (a test then fails with the message); everything else reports through return values.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port, const std::string& host = "127.0.0.1");
  ~RawClient();
  RawClient(RawClient&& other) noexcept;
  RawClient& operator=(RawClient&&) = delete;
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Writes all bytes; false when the connection is gone.
  bool send(std::string_view bytes);
  // Parses one response (a 1xx interim response counts as one); bytes after it stay buffered
  // for the next read. nullopt on timeout, close before a whole response, or bytes that are
  // not HTTP.
  std::optional<HttpResponse> read_response(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
      ResponseTo to = ResponseTo::other);
  // Waits for at least one byte, then returns what arrived in `settle` after it ("" on
  // timeout or close).
  std::string read_some(std::chrono::milliseconds timeout = std::chrono::milliseconds(3000),
                        std::chrono::milliseconds settle = std::chrono::milliseconds(20));
  // Reads exactly n bytes, or fewer on timeout or close.
  std::string read_exactly(std::size_t n,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Reads until the peer closes (FIN or RST); true if it did within the timeout. Bytes read on
  // the way (after any already buffered) are appended to *rest when given.
  bool wait_closed(std::chrono::milliseconds timeout = std::chrono::milliseconds(3000),
                   std::string* rest = nullptr);
  void shutdown_write();
  void close();
  // Abortive close: the peer sees a TCP RST, as when a client process is killed mid-transfer.
  void reset();
  int fd() const { return fd_; }

 private:
  // Reads more bytes into pending_; 0 on close, -1 on timeout or error.
  long fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string pending_;  // received, not yet handed out
};

// "Basic base64(id:secret)".
std::string basic_credentials(const std::string& id, const std::string& secret);
// "Proxy-Authorization: Basic ...\r\n".
std::string proxy_auth_line(const std::string& id, const std::string& secret);
std::string base64(std::string_view data);

}  // namespace sandgate::test
