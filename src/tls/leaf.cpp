#include "tls/leaf.hpp"

#include <string_view>

namespace sandgate::tls {

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
  // Tickets are on by default; say so, so that a changed default cannot turn resumption off.
  SSL_CTX_clear_options(c, SSL_OP_NO_TICKET);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_SERVER);
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
