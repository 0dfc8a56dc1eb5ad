#include "proxy/interception.hpp"

#include <openssl/ssl.h>

#include <algorithm>
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

// Where the session cache finds its owner (SSL_CTX ex data; Asio keeps the app data slots
// for its verify callbacks).
int context_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Upstream sessions are stored once the server sends them (TLS 1.3: a ticket after the
// handshake), under the key upstream_tls gave the connection (upstream_session_index).
int on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* key = static_cast<const std::string*>(SSL_get_ex_data(ssl, upstream_session_index()));
  auto* interception =
      static_cast<Interception*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), context_index()));
  if (key == nullptr || interception == nullptr) return 0;
  interception->remember_session(*key, session);
  return 1;  // ours now
}

constexpr std::size_t kMaxUpstreamSessions = 10'000;

}  // namespace

int upstream_session_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

void Interception::SessionFree::operator()(SSL_SESSION* s) const {
  SSL_SESSION_free(s);
}

void Interception::remember_session(const std::string& key, SSL_SESSION* session) {
  const std::lock_guard lock(sessions_mutex_);
  if (sessions_.size() >= kMaxUpstreamSessions && !sessions_.contains(key)) sessions_.clear();
  sessions_[key].reset(session);
}

SSL_SESSION* Interception::session_for(const std::string& key) {
  const std::lock_guard lock(sessions_mutex_);
  const auto it = sessions_.find(key);
  if (it == sessions_.end() || !SSL_SESSION_is_resumable(it->second.get())) return nullptr;
  SSL_SESSION_up_ref(it->second.get());
  return it->second.get();
}

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
  out->leaves = std::make_unique<tls::LeafCache>(out->authority, leaf, cache);
  cache.capacity = std::min<std::size_t>(cache.capacity, kSinkLeaves);
  out->sink_leaves = std::make_unique<tls::LeafCache>(out->authority, std::move(leaf), cache);
  out->mint_budget = std::make_unique<tls::MintBudget>(c.max_leaf_mints_per_minute);

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
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_set_ex_data(native, context_index(), out.get());
  SSL_CTX_sess_set_new_cb(native, &on_new_session);
  if (SSL_CTX_set_alpn_protos(native, kHttp11Alpn, sizeof kHttp11Alpn) != 0) {
    throw std::runtime_error("cannot set the upstream ALPN protocols");
  }
  return out;
}

}  // namespace sandgate::proxy
