#pragma once

// What the tls unit tests check certificates with: OpenSSL's own verifier and file helpers.

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tls/leaf.hpp"
#include "tls/x509.hpp"

namespace sandgate::tls::test {

// X509_verify_cert of `cert` against `anchor` as the only trust anchor, for TLS server use
// (purpose sslserver) when `as_server`, with `untrusted` as intermediates. Returns "" on
// success, else the verifier's reason.
inline std::string verify(X509* anchor, X509* cert, bool as_server,
                          STACK_OF(X509) * untrusted = nullptr) {
  std::unique_ptr<X509_STORE, OpenSslFree<X509_STORE_free>> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, OpenSslFree<X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), anchor) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, untrusted) != 1) {
    return "setup failed";
  }
  if (as_server) X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER);
  if (X509_verify_cert(ctx.get()) == 1) return "";
  return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

inline X509Ptr read_cert(const std::filesystem::path& file) {
  BioPtr bio(BIO_new_file(file.c_str(), "r"));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

inline PkeyPtr read_key(const std::filesystem::path& file) {
  BioPtr bio(BIO_new_file(file.c_str(), "r"));
  return PkeyPtr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

inline void write_text(const std::filesystem::path& file, const std::string& text, mode_t mode) {
  BioPtr bio(BIO_new_file(file.c_str(), "w"));
  if (bio) BIO_write(bio.get(), text.data(), static_cast<int>(text.size()));
  bio.reset();
  ::chmod(file.c_str(), mode);
}

inline mode_t mode_of(const std::filesystem::path& file) {
  struct stat st {};
  return ::lstat(file.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777;
}

// LeafOptions with only the SSL_CTX hook set.
inline LeafOptions with_hook(ContextHook hook) {
  LeafOptions options;
  options.configure_context = std::move(hook);
  return options;
}

// -1 when `cert` has no extension `nid`, else whether it is critical (0 or 1).
inline int critical_flag(const X509* cert, int nid) {
  const int at = X509_get_ext_by_NID(cert, nid, -1);
  return at < 0 ? -1 : X509_EXTENSION_get_critical(X509_get_ext(cert, at));
}

}  // namespace sandgate::tls::test
