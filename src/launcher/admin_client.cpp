#include "launcher/admin_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

namespace sandgate::launcher {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Runs on the io_context in query_sandbox; takes everything by value.
asio::awaitable<SandboxStatus> exchange(tcp::endpoint endpoint, std::string target,
                                        std::chrono::milliseconds timeout) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(timeout);  // one deadline for connect, write and read together
  try {
    co_await stream.async_connect(endpoint, asio::use_awaitable);
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, endpoint.address().to_string());
    req.set(http::field::connection, "close");
    co_await http::async_write(stream, req, asio::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024);
    co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
    const auto& res = parser.get();
    if (res.result() == http::status::not_found)
      co_return SandboxStatus{SandboxStatus::Answer::inactive, {}};
    boost::system::error_code ec;
    const auto body = boost::json::parse(res.body(), ec);
    if (res.result() == http::status::ok && !ec && body.is_object()) {
      const auto* active = body.as_object().if_contains("active");
      if (active != nullptr && active->is_bool()) {
        co_return SandboxStatus{
            active->as_bool() ? SandboxStatus::Answer::active : SandboxStatus::Answer::inactive,
            {}};
      }
    }
    co_return SandboxStatus{
        SandboxStatus::Answer::unreachable,
        "unexpected answer " + std::to_string(res.result_int()) + " to GET " + target};
  } catch (const boost::system::system_error& e) {
    co_return SandboxStatus{SandboxStatus::Answer::unreachable, e.code().message()};
  }
}

}  // namespace

SandboxStatus query_sandbox(const std::string& host, std::uint16_t port, std::string_view id,
                            std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return {SandboxStatus::Answer::unreachable, "bad address " + host};
  asio::io_context ioc;
  auto result = asio::co_spawn(
      ioc, exchange(tcp::endpoint(address, port), "/sandboxes/" + std::string(id), timeout),
      asio::use_future);
  ioc.run();
  return result.get();
}

}  // namespace sandgate::launcher
