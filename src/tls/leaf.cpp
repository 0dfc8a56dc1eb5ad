#include "tls/leaf.hpp"

#include <string_view>

namespace sandgate::tls {

namespace {

// TLS 1.2's suites: ECDHE only (forward secrecy), AES-GCM and ChaCha20-Poly1305 only (AEAD;
// no CBC, whose MAC-then-encrypt is what Lucky13 and its kin attack), in Mozilla's
// intermediate order. ECDSA only: every leaf has a P-256 key (generate_p256_key).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305";

// Sessions kept for resumption by ID, per leaf (OpenSSL's default is 20480: with thousands of
// leaves cached, too many). Resumption by ticket keeps nothing here, nor does TLS 1.3.
constexpr long kSessionCacheSize = 256;

// Accepts whatever name the client sent, so that OpenSSL acknowledges the extension (an
// empty server_name in the TLS 1.2 ServerHello, RFC 6066 3): the leaf serves the connection
// whatever the name said (the policy decided the stream before the handshake).
int accept_server_name(SSL*, int*, void*) {
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

Leaf::Leaf(std::string name, X509Ptr cert, PkeyPtr key, std::shared_ptr<SSL_CTX> ctx)
    : name_(std::move(name)),
      cert_(std::move(cert)),
      key_(std::move(key)),
      ctx_(std::move(ctx)),
      not_before_(tls::not_before(cert_.get())),
      not_after_(tls::not_after(cert_.get())) {}

std::shared_ptr<SSL_CTX> make_server_context(X509* cert, EVP_PKEY* key,
                                             const std::vector<X509Ptr>& chain,
                                             const ContextHook& hook) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return nullptr;
  SSL_CTX* c = ctx.get();
  if (SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) != 1) return nullptr;
  // TLS 1.2: only AEAD suites with forward secrecy, in the server's order (TLS 1.3's suites
  // are all AEAD with forward secrecy: OpenSSL's default list, in its order).
  if (SSL_CTX_set_cipher_list(c, kTls12Ciphers) != 1) return nullptr;
  // Tickets are on by default; say so, so that a changed default cannot turn resumption off.
  SSL_CTX_clear_options(c, SSL_OP_NO_TICKET);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Session IDs resume too (a client that offers no ticket): the cache lives in this context,
  // the leaf's, shared by every connection to the name. A session survives only a connection
  // that ended with close_notify (sandgate sends one on every clean close).
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(c, kSessionCacheSize);
  // The server_name extension is acknowledged in the ServerHello (TLS 1.2): the leaf was
  // minted for the name the client asked for, or for the destination it dialled.
  SSL_CTX_set_tlsext_servername_callback(c, &accept_server_name);
  // The chain is given in full: OpenSSL must not go looking for more in a (default) store.
  SSL_CTX_set_mode(c, SSL_MODE_NO_AUTO_CHAIN);
  static constexpr std::string_view kSessionContext = "sandgate-leaf";
  if (SSL_CTX_set_session_id_context(c,
                                     reinterpret_cast<const unsigned char*>(kSessionContext.data()),
                                     static_cast<unsigned int>(kSessionContext.size())) != 1 ||
      SSL_CTX_use_certificate(c, cert) != 1 || SSL_CTX_use_PrivateKey(c, key) != 1 ||
      SSL_CTX_check_private_key(c) != 1) {
    return nullptr;
  }
  for (const X509Ptr& extra : chain) {
    if (SSL_CTX_add1_chain_cert(c, extra.get()) != 1) return nullptr;
  }
  if (hook) hook(c);
  return ctx;
}

}  // namespace sandgate::tls
