#include "secrets/https_client.hpp"

#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <stdexcept>
#include <variant>

#include "dns/resolver.hpp"
#include "policy/host.hpp"
#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string describe(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout || ec == asio::error::operation_aborted) return "timed out";
  return ec.message();
}

asio::ip::address to_asio(const policy::IpAddress& a) {
  if (a.is_v4()) return asio::ip::address_v4(a.v4_value());
  return asio::ip::address_v6(a.bytes);
}

// RFC 6761 6.3: "localhost" and every name below it are loopback, without asking DNS.
bool is_localhost(std::string_view name) {
  return name == "localhost" || name.ends_with(".localhost");
}

// Where to connect for `host` (normalised, valid), or why nowhere: a literal as it is, a
// localhost name on loopback, any other name as `resolver` answers it by `deadline`.
struct Endpoints {
  std::vector<tcp::endpoint> endpoints;
  std::string error;
};

asio::awaitable<Endpoints> endpoints_for(const policy::Host& host, std::uint16_t port,
                                         dns::Resolver* resolver,
                                         std::chrono::steady_clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  Endpoints out;
  if (host.is_address()) {
    out.endpoints.emplace_back(to_asio(host.address), port);
    co_return out;
  }
  if (is_localhost(host.name)) {
    out.endpoints.emplace_back(asio::ip::address_v4::loopback(), port);
    out.endpoints.emplace_back(asio::ip::address_v6::loopback(), port);
    co_return out;
  }
  if (resolver == nullptr) {
    out.error = "cannot resolve " + host.name + ": no resolver";
    co_return out;
  }
  // The resolver's own timeout (dns.timeout_ms) may be longer than what is left of the fetch:
  // race it. The losing lookup is cancelled for this caller only.
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto answered = co_await (resolver->resolve(host.name) || timer.async_wait(use_tuple));
  if (answered.index() == 1) {
    out.error = "cannot resolve " + host.name + ": timed out";
    co_return out;
  }
  const Result<dns::Answer>& answer = std::get<0>(answered);
  if (!answer) {
    out.error =
        "cannot resolve " + host.name + ": " +
        (answer.error() == make_error_code(Errc::upstream_timeout) ? std::string("timed out")
                                                                   : answer.error().message());
    co_return out;
  }
  for (const policy::IpAddress& a : answer->addresses) out.endpoints.emplace_back(to_asio(a), port);
  if (out.endpoints.empty()) out.error = "cannot resolve " + host.name + ": no addresses";
  co_return out;
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_client_context(const std::string& ca_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(asio::ssl::verify_peer);
  boost::system::error_code ec;
  ctx->set_default_verify_paths(ec);
  if (ec) throw std::runtime_error("cannot load the system's trusted roots: " + ec.message());
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) throw std::runtime_error(ca_file + ": cannot load as PEM certificates (ca_file)");
  }
  return ctx;
}

namespace {

// Writes `req` and reads the answer over `stream` (TLS or plain TCP), whose lowest layer
// already carries the exchange's deadline.
template <class Stream>
asio::awaitable<HttpsResult> send_and_read(Stream& stream, http::request<http::string_body>& req,
                                           const std::string& host, std::size_t max_body) {
  HttpsResult out;
  auto [write_ec, written] = co_await http::async_write(stream, req, use_tuple);
  cleanse(req.body());  // it may hold a secret (a client secret in a form)
  if (write_ec) {
    out.error = "cannot send the request to " + host + ": " + describe(write_ec);
    co_return out;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  parser.header_limit(16 * 1024);
  auto [read_ec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
  if (read_ec) {
    out.error =
        read_ec == http::error::body_limit
            ? "the response from " + host + " is larger than " + std::to_string(max_body) + " bytes"
            : "no valid response from " + host + ": " + describe(read_ec);
    co_return out;
  }
  HttpsResponse response;
  response.status = parser.get().result_int();
  response.body = std::move(parser.get().body());
  out.response = std::move(response);
  co_return out;
}

}  // namespace

asio::awaitable<HttpsResult> https_exchange(std::shared_ptr<asio::ssl::context> ctx,
                                            HttpsRequest request, dns::Resolver* resolver,
                                            std::chrono::steady_clock::time_point deadline,
                                            std::size_t max_body) {
  HttpsResult out;
  const auto target = policy::parse_target(request.url);
  if (!target || !target->port) {
    out.error = "invalid URL";
    co_return out;
  }
  // The scheme and the caller must agree: a provider that holds a TLS context never sends in
  // the clear, whatever its URL says.
  const bool plain = request.url.starts_with("http://");
  if (plain != (ctx == nullptr)) {
    out.error = plain ? "refusing plain http:// for an endpoint that takes HTTPS only"
                      : "an https:// URL needs a TLS context";
    co_return out;
  }
  const std::string host(target->host);
  const std::string port = std::to_string(*target->port);
  const policy::Host normalised = policy::normalize_host(host);
  if (!normalised.is_valid()) {
    out.error = "invalid host in the URL";
    co_return out;
  }
  const auto executor = co_await asio::this_coro::executor;

  http::request<http::string_body> req;
  req.method_string(request.method);
  req.target(target->rest.empty() ? std::string_view("/") : target->rest);
  req.version(11);
  req.set(http::field::host, (target->ip_literal ? "[" + host + "]" : host) +
                                 (target->written_port ? ":" + port : ""));
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.set(http::field::connection, "close");
  req.body() = std::move(request.body);
  req.prepare_payload();

  const Endpoints endpoints = co_await endpoints_for(normalised, *target->port, resolver, deadline);
  if (endpoints.endpoints.empty()) {
    out.error = endpoints.error;
    co_return out;
  }
  beast::tcp_stream connection(executor);
  connection.expires_at(deadline);
  auto [connect_ec, unused] = co_await connection.async_connect(endpoints.endpoints, use_tuple);
  if (connect_ec) {
    out.error = "cannot connect to " + host + ":" + port + ": " + describe(connect_ec);
    co_return out;
  }
  if (plain) {
    out = co_await send_and_read(connection, req, host, max_body);
    co_return out;
  }

  asio::ssl::stream<beast::tcp_stream> stream(std::move(connection), *ctx);
  beast::get_lowest_layer(stream).expires_at(deadline);
  if (!target->ip_literal && !normalised.is_address()) {
    SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());
  }
  stream.set_verify_callback(asio::ssl::host_name_verification(host));
  auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (handshake_ec) {
    out.error = "TLS with " + host + " failed: " + describe(handshake_ec);
    co_return out;
  }
  out = co_await send_and_read(stream, req, host, max_body);
  if (!out.response) co_return out;
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(1));
  auto [shutdown_ec] = co_await stream.async_shutdown(use_tuple);
  (void)shutdown_ec;  // the server may close without close_notify; the answer is in
  co_return out;
}

std::string excerpt(std::string_view body, const std::vector<std::string_view>& secrets,
                    std::size_t max) {
  std::string text(body);
  for (const std::string_view secret : secrets) {
    if (secret.empty()) continue;
    for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), secret.size(), '*');
    }
  }
  if (text.size() > max) {
    text.resize(max);
    text += "...";
  }
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text;
}

}  // namespace sandgate::secrets
