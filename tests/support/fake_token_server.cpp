#include "support/fake_token_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <future>
#include <thread>

#include "support/tls_origin.hpp"

namespace sandgate::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct FakeTokenServer::Impl {
  asio::io_context io;
  asio::ssl::context ctx{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{io};
  std::thread thread;
  mutable std::mutex mutex;
  Handler handler;
  std::vector<TokenRequest> requests;

  bool tls = true;

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::tcp_stream connection(std::move(socket));
    connection.expires_after(std::chrono::seconds(10));
    if (!tls) {
      co_await answer(connection);
      connection.socket().shutdown(tcp::socket::shutdown_send);
      co_return;
    }
    asio::ssl::stream<beast::tcp_stream> stream(std::move(connection), ctx);
    auto [hs] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
    if (hs) co_return;
    if (!co_await answer(stream)) co_return;
    auto [sec] = co_await stream.async_shutdown(use_tuple);
    (void)sec;
  }

  // Reads one request, records it, writes the handler's answer; whether it got that far.
  template <class Stream>
  asio::awaitable<bool> answer(Stream& stream) {
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    auto [rec, n] = co_await http::async_read(stream, buffer, req, use_tuple);
    if (rec) co_return false;
    TokenRequest recorded;
    recorded.method = std::string(req.method_string());
    recorded.target = std::string(req.target());
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      recorded.headers[name] = std::string(field.value());
    }
    recorded.body = req.body();
    Handler h;
    {
      const std::lock_guard lock(mutex);
      requests.push_back(recorded);
      h = handler;
    }
    const TokenResponse response = h(recorded);
    if (response.delay.count() > 0) {
      asio::steady_timer timer(io, response.delay);
      co_await timer.async_wait(use_tuple);
    }
    http::response<http::string_body> res;
    res.result(response.status);
    res.version(11);
    res.set(http::field::content_type, response.content_type);
    res.set(http::field::connection, "close");
    res.body() = response.body;
    res.prepare_payload();
    auto [wec, w] = co_await http::async_write(stream, res, use_tuple);
    co_return !wec;
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec) co_return;
      asio::co_spawn(io, serve(std::move(socket)), asio::detached);
    }
  }
};

FakeTokenServer::FakeTokenServer(Handler handler, std::vector<std::string> names)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  const TestCertificate cert = make_self_signed_certificate(names, {"127.0.0.1"});
  ca_file_ = dir_.write("ca.pem", cert.cert_pem);
  impl_->ctx.use_certificate_chain(asio::buffer(cert.cert_pem));
  impl_->ctx.use_private_key(asio::buffer(cert.key_pem), asio::ssl::context::pem);
  start();
}

FakeTokenServer::FakeTokenServer(Handler handler, PlainHttp)
    : impl_(std::make_unique<Impl>()), scheme_("http") {
  impl_->handler = std::move(handler);
  impl_->tls = false;
  start();
}

void FakeTokenServer::start() {
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeTokenServer::~FakeTokenServer() {
  stop();
  impl_->io.stop();
  impl_->thread.join();
}

void FakeTokenServer::stop() {
  std::promise<void> done;
  asio::post(impl_->io, [this, &done] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
    done.set_value();
  });
  if (impl_->io.stopped()) return;
  done.get_future().wait();
}

std::vector<TokenRequest> FakeTokenServer::requests() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::size_t FakeTokenServer::request_count() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests.size();
}

void FakeTokenServer::set_handler(Handler handler) {
  const std::lock_guard lock(impl_->mutex);
  impl_->handler = std::move(handler);
}

}  // namespace sandgate::test
