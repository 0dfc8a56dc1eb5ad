#pragma once

// The stream types of an intercepted connection: the client leg (sandgate is the TLS server,
// with a leaf for the intercepted name) and the upstream leg (sandgate is the TLS client).

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "proxy/interception.hpp"
#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// A client socket whose first bytes were already read (to classify the stream, or behind a
// CONNECT head): reads return those first, then read on from the socket. What a TLS server
// stream runs over, so that the ClientHello sandgate looked at is handed to OpenSSL as sent.
class PrefixedSocket {
 public:
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;

  PrefixedSocket(tcp::socket& socket, std::vector<std::uint8_t> prefix)
      : socket_(socket), prefix_(std::move(prefix)) {}

  executor_type get_executor() { return socket_.get_executor(); }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return socket_.lowest_layer(); }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    if (offset_ == prefix_.size())
      return socket_.async_read_some(buffers, std::forward<Token>(token));
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          const std::size_t n = asio::buffer_copy(
              b, asio::buffer(prefix_.data() + offset_, prefix_.size() - offset_));
          offset_ += n;
          if (offset_ == prefix_.size()) {
            prefix_.clear();
            prefix_.shrink_to_fit();
            offset_ = 0;
          }
          // Never completes inline: the handler runs as if the read had waited.
          asio::post(socket_.get_executor(),
                     [h = std::move(handler), n]() mutable { std::move(h)({}, n); });
        },
        token, buffers);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return socket_.async_write_some(buffers, std::forward<Token>(token));
  }

 private:
  tcp::socket& socket_;
  std::vector<std::uint8_t> prefix_;
  std::size_t offset_ = 0;
};

// Whether ALPN chose HTTP/2 on this connection (either leg).
inline bool alpn_is_h2(SSL* ssl) {
  const unsigned char* alpn = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &len);
  return len == 2 && alpn[0] == 'h' && alpn[1] == '2';
}

// Session::tls: the client's TLS, terminated with the intercepted name's leaf.
struct ClientTlsLeg {
  ClientTlsLeg(tcp::socket& socket, std::vector<std::uint8_t> prefix, SSL* ssl)
      : stream(PrefixedSocket(socket, std::move(prefix)), ssl) {}
  asio::ssl::stream<PrefixedSocket> stream;
};

// UpstreamConn::tls: sandgate's own TLS to the intercepted name.
struct UpstreamTlsLeg {
  UpstreamTlsLeg(tcp::socket& socket, asio::ssl::context& ctx, std::string key)
      : stream(socket, ctx), session_key(std::move(key)) {
    SSL_set_ex_data(stream.native_handle(), upstream_session_index(), &session_key);
  }
  // sandgate closes its upstream connections without close_notify; OpenSSL would then mark
  // their session not resumable (for every later connection): a finished handshake counts
  // as shut down.
  ~UpstreamTlsLeg() {
    SSL* ssl = stream.native_handle();
    if (SSL_is_init_finished(ssl)) SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  }
  UpstreamTlsLeg(const UpstreamTlsLeg&) = delete;
  UpstreamTlsLeg& operator=(const UpstreamTlsLeg&) = delete;
  asio::ssl::stream<tcp::socket&> stream;
  std::string session_key;  // "host:port": where a session the server sends is remembered
};

}  // namespace sandgate::proxy
