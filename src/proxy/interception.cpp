#include "proxy/interception.hpp"

#include <openssl/ssl.h>

#include <stdexcept>
#include <string_view>

namespace sandgate::proxy {

namespace {

// ALPN wire forms: what the upstream leg offers by default, and what the client leg accepts
// in order of preference.
constexpr unsigned char kHttp11Alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
constexpr unsigned char kServedAlpn[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// The client leg's ALPN choice: h2 when the client offers it, else HTTP/1.1, else no ALPN
// (the client then speaks HTTP/1.1 or gives up).
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kServedAlpn, sizeof kServedAlpn, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

std::shared_ptr<Interception> make_interception(const config::Interception& c) {
  auto out = std::make_shared<Interception>();
  out->authority = tls::Authority::load(c.ca_cert, c.ca_key);
  tls::LeafOptions leaf;
  leaf.validity = c.leaf_validity;
  leaf.configure_context = [](SSL_CTX* ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, &select_alpn, nullptr);
  };
  tls::LeafCacheOptions cache;
  cache.capacity = c.leaf_cache_size;
  cache.renew_before = c.leaf_renew_before;
  out->leaves = std::make_unique<tls::LeafCache>(out->authority, std::move(leaf), cache);

  auto& ctx = out->upstream;
  SSL_CTX* native = ctx.native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION);
  ctx.set_verify_mode(boost::asio::ssl::verify_peer);
  boost::system::error_code ec;
  ctx.set_default_verify_paths(ec);
  if (ec) throw std::runtime_error("cannot load the system's trusted roots: " + ec.message());
  if (!c.upstream_ca_file.empty()) {
    ctx.load_verify_file(c.upstream_ca_file, ec);
    if (ec) {
      throw std::runtime_error(
          c.upstream_ca_file +
          ": cannot load as PEM certificates (interception.upstream_ca_file): " + ec.message());
    }
  }
  if (SSL_CTX_set_alpn_protos(native, kHttp11Alpn, sizeof kHttp11Alpn) != 0) {
    throw std::runtime_error("cannot set the upstream ALPN protocols");
  }
  return out;
}

}  // namespace sandgate::proxy
