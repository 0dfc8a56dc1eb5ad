#include "support/raw_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace sandgate::test {

namespace {

namespace bhttp = boost::beast::http;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

int millis_left(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

std::size_t HttpResponse::header_count(std::string_view name) const {
  return static_cast<std::size_t>(std::count_if(
      headers.begin(), headers.end(), [&](const auto& kv) { return iequals(kv.first, name); }));
}

RawClient::RawClient(std::uint16_t port, const std::string& host) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || !res) {
    throw std::runtime_error("RawClient: bad address " + host);
  }
  fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int rc = fd_ < 0 ? -1 : ::connect(fd_, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0) {
    const int e = errno;
    close();
    throw std::runtime_error("RawClient: connect to " + host + ":" + service +
                             " failed: " + std::strerror(e));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawClient::~RawClient() {
  close();
}

RawClient::RawClient(RawClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), pending_(std::move(other.pending_)) {}

bool RawClient::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

long RawClient::fill(std::chrono::steady_clock::time_point deadline) {
  if (fd_ < 0) return -1;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, millis_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? 0 : -1;
    }
    pending_.append(buf, static_cast<std::size_t>(n));
    return n;
  }
}

std::optional<HttpResponse> RawClient::read_response(std::chrono::milliseconds timeout,
                                                     ResponseTo to) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(false);  // stop after the head: whether a body follows depends on it
  parser.header_limit(1 << 20);
  parser.body_limit(std::uint64_t{1} << 32);
  if (to == ResponseTo::head) parser.skip(true);
  bool head_seen = false;
  for (;;) {
    if (!pending_.empty()) {
      boost::system::error_code ec;
      const std::size_t used =
          parser.put(boost::asio::buffer(pending_.data(), pending_.size()), ec);
      pending_.erase(0, used);
      if (ec && ec != bhttp::error::need_more) return std::nullopt;
      if (parser.is_header_done() && !head_seen) {
        head_seen = true;
        const unsigned status = parser.get().result_int();
        if (to == ResponseTo::connect && status >= 200 && status < 300) break;
        parser.eager(true);
      }
      if (parser.is_done()) break;
      if (used > 0 && !ec) continue;
    }
    const long n = fill(deadline);
    if (n < 0) return std::nullopt;
    if (n == 0) {
      if (!parser.is_header_done()) return std::nullopt;  // closed before a whole head
      boost::system::error_code ec;
      parser.put_eof(ec);
      if (ec || !parser.is_done()) return std::nullopt;
      break;
    }
  }
  const auto& msg = parser.get();
  HttpResponse out;
  out.status = static_cast<int>(msg.result_int());
  out.version = msg.version();
  out.reason = std::string(msg.reason());
  for (const auto& f : msg) out.headers.emplace_back(f.name_string(), f.value());
  out.body = msg.body();
  return out;
}

std::string RawClient::read_some(std::chrono::milliseconds timeout,
                                 std::chrono::milliseconds settle) {
  if (pending_.empty()) {
    if (fill(std::chrono::steady_clock::now() + timeout) <= 0) return std::exchange(pending_, {});
  }
  const auto until = std::chrono::steady_clock::now() + settle;
  while (fill(until) > 0) {
  }
  return std::exchange(pending_, {});
}

std::string RawClient::read_exactly(std::size_t n, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pending_.size() < n) {
    if (fill(deadline) <= 0) break;
  }
  std::string out = pending_.substr(0, std::min(n, pending_.size()));
  pending_.erase(0, out.size());
  return out;
}

bool RawClient::wait_closed(std::chrono::milliseconds timeout, std::string* rest) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const long n = fill(deadline);
    if (rest) rest->append(pending_);
    pending_.clear();
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

void RawClient::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void RawClient::reset() {
  if (fd_ < 0) return;
  const linger hard{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  close();
}

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string basic_credentials(const std::string& id, const std::string& secret) {
  return "Basic " + base64(id + ":" + secret);
}

std::string proxy_auth_line(const std::string& id, const std::string& secret) {
  return "Proxy-Authorization: " + basic_credentials(id, secret) + "\r\n";
}

}  // namespace sandgate::test
