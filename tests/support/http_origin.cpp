#include "support/http_origin.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

namespace sandgate::test {

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kRawKeptPerConnection = 64 * 1024;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string status_line(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " " +
         std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status))) + "\r\n";
}

std::string header_lines(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  return out;
}

std::string hex(std::size_t n) {
  std::ostringstream ss;
  ss << std::hex << n;
  return ss.str();
}

}  // namespace

std::string RecordedRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

std::size_t RecordedRequest::header_count(std::string_view name) const {
  return static_cast<std::size_t>(std::count_if(
      headers.begin(), headers.end(), [&](const auto& kv) { return iequals(kv.first, name); }));
}

OriginReply OriginReply::with_length(int status, std::string body,
                                     std::vector<std::pair<std::string, std::string>> headers) {
  OriginReply r;
  r.parts.push_back({status_line(status) + header_lines(headers) +
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
                     {}});
  return r;
}

OriginReply OriginReply::chunked(int status, std::string body, std::size_t chunk_size,
                                 std::chrono::milliseconds delay,
                                 std::vector<std::pair<std::string, std::string>> headers) {
  OriginReply r;
  r.parts.push_back(
      {status_line(status) + header_lines(headers) + "Transfer-Encoding: chunked\r\n\r\n", {}});
  for (std::size_t pos = 0; pos < body.size(); pos += chunk_size) {
    const std::string piece = body.substr(pos, chunk_size);
    r.parts.push_back({hex(piece.size()) + "\r\n" + piece + "\r\n", delay});
  }
  r.parts.push_back({"0\r\n\r\n", delay});
  return r;
}

OriginReply OriginReply::until_close(int status, std::string body,
                                     std::vector<std::pair<std::string, std::string>> headers) {
  OriginReply r;
  r.parts.push_back({status_line(status) + header_lines(headers) + "\r\n" + body, {}});
  r.close_after = true;
  return r;
}

OriginReply OriginReply::head_only(int status,
                                   std::vector<std::pair<std::string, std::string>> headers) {
  OriginReply r;
  r.parts.push_back({status_line(status) + header_lines(headers) + "\r\n", {}});
  return r;
}

OriginReply OriginReply::raw(std::string bytes, bool close_after) {
  OriginReply r;
  r.parts.push_back({std::move(bytes), {}});
  r.close_after = close_after;
  return r;
}

OriginReply OriginReply::close_now() {
  OriginReply r;
  r.close_after = true;
  return r;
}

OriginReply OriginReply::silence() {
  OriginReply r;
  r.never_answer = true;
  return r;
}

struct HttpOrigin::Impl {
  asio::io_context io{1};  // first: destroyed last, after everything its handlers touch
  tcp::acceptor acceptor{io};
  std::uint16_t port = 0;
  std::unique_ptr<asio::ssl::context> tls;  // HTTPS when set
  std::vector<std::string> sni;
  std::size_t failed_handshakes = 0;
  std::size_t resumed_handshakes = 0;

  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::function<OriginReply(const RecordedRequest&)> handler;
  std::vector<RecordedRequest> requests;
  std::size_t connections = 0;
  std::uint64_t bytes = 0;
  std::string raw;

  std::thread thread;

  void record_bytes(const char* data, std::size_t n, std::size_t& kept) {
    const std::lock_guard lock(mutex);
    bytes += n;
    const std::size_t keep =
        std::min(n, kRawKeptPerConnection - std::min(kept, kRawKeptPerConnection));
    raw.append(data, keep);
    kept += keep;
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) continue;
      std::size_t id = 0;
      {
        const std::lock_guard lock(mutex);
        id = ++connections;
      }
      changed.notify_all();
      asio::co_spawn(io, start(std::move(socket), id), asio::detached);
    }
  }

  asio::awaitable<void> start(tcp::socket socket, std::size_t id) {
    boost::system::error_code ec;
    const auto local = socket.local_endpoint(ec);
    const std::string local_address = ec ? std::string() : local.address().to_string();
    socket.set_option(tcp::no_delay(true), ec);
    if (!tls) {
      co_await serve(socket, id, local_address);
      co_return;
    }
    asio::ssl::stream<tcp::socket> stream(std::move(socket), *tls);
    auto [hs_ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
    {
      const std::lock_guard lock(mutex);
      if (hs_ec) {
        ++failed_handshakes;
      } else {
        const char* name = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name);
        sni.emplace_back(name != nullptr ? name : "");
        if (SSL_session_reused(stream.native_handle())) ++resumed_handshakes;
      }
    }
    changed.notify_all();
    if (!hs_ec) co_await serve(stream, id, local_address);
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& socket, std::size_t id, const std::string local_address) {
    boost::system::error_code ec;
    std::string buffer;
    std::size_t kept = 0;
    std::vector<char> chunk(64 * 1024);
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.eager(true);
      parser.header_limit(1 << 20);
      parser.body_limit(std::uint64_t{1} << 32);
      while (!parser.is_done()) {
        if (!buffer.empty()) {
          const std::size_t used = parser.put(asio::buffer(buffer.data(), buffer.size()), ec);
          buffer.erase(0, used);
          if (ec && ec != bhttp::error::need_more) co_return;  // not HTTP: drop the connection
          if (parser.is_done()) break;
          if (used > 0 && !ec) continue;
        }
        auto [read_ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
        if (read_ec) co_return;
        record_bytes(chunk.data(), n, kept);
        buffer.append(chunk.data(), n);
      }

      const auto& msg = parser.get();
      RecordedRequest request;
      request.connection = id;
      request.local_address = local_address;
      request.method = std::string(msg.method_string());
      request.target = std::string(msg.target());
      request.version = msg.version();
      for (const auto& f : msg) request.headers.emplace_back(f.name_string(), f.value());
      request.body = msg.body();
      request.chunked = parser.chunked();

      std::function<OriginReply(const RecordedRequest&)> h;
      {
        const std::lock_guard lock(mutex);
        requests.push_back(request);
        h = handler;
      }
      changed.notify_all();
      const OriginReply reply = h(request);

      if (reply.never_answer) {  // swallow whatever comes until the peer gives up
        for (;;) {
          auto [read_ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
          if (read_ec) co_return;
          record_bytes(chunk.data(), n, kept);
        }
      }
      for (const auto& part : reply.parts) {
        if (part.delay.count() > 0) {
          asio::steady_timer timer(io, part.delay);
          co_await timer.async_wait(use_tuple);
        }
        auto [write_ec, n] =
            co_await asio::async_write(socket, asio::buffer(part.bytes), use_tuple);
        if (write_ec) co_return;
      }
      if (reply.close_after) {
        socket.lowest_layer().shutdown(tcp::socket::shutdown_send, ec);
        // Let the peer read everything before the socket goes away (no RST on unread data).
        asio::steady_timer timer(io, std::chrono::milliseconds(50));
        co_await timer.async_wait(use_tuple);
        co_return;
      }
    }
  }
};

HttpOrigin::HttpOrigin(const std::string& bind_address, std::uint16_t port,
                       const TestCertificate& tls)
    : HttpOrigin(bind_address, port, &tls) {}

HttpOrigin::HttpOrigin(const std::string& bind_address, std::uint16_t port)
    : HttpOrigin(bind_address, port, nullptr) {}

HttpOrigin::HttpOrigin(const std::string& bind_address, std::uint16_t port,
                       const TestCertificate* tls)
    : impl_(std::make_shared<Impl>()) {
  if (tls != nullptr) {
    impl_->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    impl_->tls->use_certificate_chain(asio::buffer(tls->cert_pem));
    impl_->tls->use_private_key(asio::buffer(tls->key_pem), asio::ssl::context::pem);
  }
  const tcp::endpoint ep(asio::ip::make_address(bind_address), port);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  if (ep.address().is_v6()) impl_->acceptor.set_option(asio::ip::v6_only(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->handler = [](const RecordedRequest& r) {
    return OriginReply::with_length(
        200, "origin says: " + r.method + " " + r.target + "\n",
        {{"Content-Type", "text/plain"}, {"X-Origin-Connection", std::to_string(r.connection)}});
  };
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

HttpOrigin::~HttpOrigin() {
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
  });
  impl_->io.stop();
  impl_->thread.join();
}

std::uint16_t HttpOrigin::port() const {
  return impl_->port;
}

void HttpOrigin::set_handler(std::function<OriginReply(const RecordedRequest&)> handler) {
  const std::lock_guard lock(impl_->mutex);
  impl_->handler = std::move(handler);
}

std::vector<RecordedRequest> HttpOrigin::requests() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::size_t HttpOrigin::request_count() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests.size();
}

std::size_t HttpOrigin::connection_count() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->connections;
}

std::uint64_t HttpOrigin::bytes_received() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->bytes;
}

std::vector<std::string> HttpOrigin::sni_seen() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->sni;
}

std::size_t HttpOrigin::failed_handshakes() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->failed_handshakes;
}

std::size_t HttpOrigin::resumed_handshakes() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->resumed_handshakes;
}

std::string HttpOrigin::raw_received() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->raw;
}

bool HttpOrigin::wait_for_requests(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return impl_->requests.size() >= n; });
}

bool HttpOrigin::wait_for_connections(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return impl_->connections >= n; });
}

std::string pattern_bytes(std::size_t size, unsigned seed) {
  std::string out(size, '\0');
  std::uint32_t x = 2463534242u ^ seed;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<char>(x & 0xff);
  }
  return out;
}

}  // namespace sandgate::test
