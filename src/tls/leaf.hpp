#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tls/x509.hpp"

namespace sandgate::tls {

// Called once on each new server SSL_CTX before it is shared, e.g. to install the ALPN
// selection callback (SSL_CTX_set_alpn_select_cb). Runs on the thread that mints.
using ContextHook = std::function<void(SSL_CTX*)>;

// How Authority::mint makes a leaf.
struct LeafOptions {
  // notAfter = now + validity, but never past the CA's own notAfter. notBefore = now - 1 h,
  // so a client whose clock is a little behind still accepts it.
  std::chrono::seconds validity = std::chrono::hours(24);
  // The minting instant; the default (epoch) means system_clock::now().
  std::chrono::system_clock::time_point now{};
  ContextHook configure_context;
};

// A minted leaf certificate for one name, its key, and a ready server-side SSL_CTX that
// presents them. Immutable once made and shared between worker threads (OpenSSL's SSL_CTX is
// safe to use from several threads once configured): each intercepted connection makes its
// own SSL with SSL_new(server_context().get()). Reusing one SSL_CTX per name is what makes
// session resumption work: its session cache and ticket keys live in the SSL_CTX.
class Leaf {
 public:
  Leaf(std::string name, X509Ptr cert, PkeyPtr key, std::shared_ptr<SSL_CTX> ctx);

  const std::string& name() const { return name_; }
  X509* certificate() const { return cert_.get(); }
  EVP_PKEY* key() const { return key_.get(); }
  const std::shared_ptr<SSL_CTX>& server_context() const { return ctx_; }
  std::chrono::system_clock::time_point not_before() const { return not_before_; }
  std::chrono::system_clock::time_point not_after() const { return not_after_; }

 private:
  std::string name_;
  X509Ptr cert_;
  PkeyPtr key_;
  std::shared_ptr<SSL_CTX> ctx_;
  std::chrono::system_clock::time_point not_before_;
  std::chrono::system_clock::time_point not_after_;
};

// A server SSL_CTX presenting `cert` with `key` and the extra `chain` certificates (those
// between the leaf's issuer and the trust anchor, sent after the leaf): TLS 1.2 and 1.3 only,
// TLS 1.2 with only ECDHE-ECDSA AEAD suites (AES-GCM, ChaCha20-Poly1305) in the server's
// order, TLS 1.3 with OpenSSL's default suites, no renegotiation, the server_name extension
// acknowledged, resumption by session ID (a bounded server cache) and by ticket. `hook` runs
// last. Null on an OpenSSL failure (the error queue says why).
std::shared_ptr<SSL_CTX> make_server_context(X509* cert, EVP_PKEY* key,
                                             const std::vector<X509Ptr>& chain,
                                             const ContextHook& hook = {});

}  // namespace sandgate::tls
