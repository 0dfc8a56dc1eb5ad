#pragma once

// Owning handles for OpenSSL objects and the certificate building blocks that the CA and the
// leaf minting share. Everything here is a thin wrapper over OpenSSL 3; nothing is hand-rolled.

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::tls {

template <auto Free>
struct OpenSslFree {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using X509Ptr = std::unique_ptr<X509, OpenSslFree<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, OpenSslFree<BIO_free_all>>;

// Takes one more reference on an object another handle owns.
X509Ptr share(X509* cert);
PkeyPtr share(EVP_PKEY* key);

// The OpenSSL errors queued on this thread as one line ("unknown" when there are none); the
// queue is emptied, so a later failure is not blamed on an old one.
std::string take_openssl_errors();

// A fresh ECDSA P-256 key (EVP_PKEY_Q_keygen); null on failure.
PkeyPtr generate_p256_key();

// Sets a random, positive 128-bit serial number (RFC 5280 4.1.2.2 allows up to 20 octets).
bool set_random_serial(X509* cert);

// Sets notBefore/notAfter to the given instants (UTCTime or GeneralizedTime as RFC 5280 wants).
bool set_validity(X509* cert, std::chrono::system_clock::time_point not_before,
                  std::chrono::system_clock::time_point not_after);
std::chrono::system_clock::time_point not_before(const X509* cert);
std::chrono::system_clock::time_point not_after(const X509* cert);
// "2036-11-29 23:40:39 UTC", for messages.
std::string utc_text(std::chrono::system_clock::time_point t);

// Adds one extension given in OpenSSL's config syntax ("critical,CA:TRUE", "keyid:always").
// `issuer` is the certificate that signs `cert` (itself when self-signed); the key identifier
// extensions read it. Only ever called with constant values: names go through add_subject_alt_name.
bool add_extension(X509* cert, X509* issuer, int nid, const char* value);

// subjectAltName with one entry: iPAddress (`name` is then an IPv4 or IPv6 literal without
// brackets), else dNSName.
bool add_subject_alt_name(X509* cert, std::string_view name, bool is_ip, bool critical);

// Signs with SHA-256 (or the key's own digest for EdDSA keys).
bool sign(X509* cert, EVP_PKEY* issuer_key);

// The SHA-256 fingerprint of the DER certificate as upper-case colon-separated hex, the form
// `openssl x509 -noout -fingerprint -sha256` prints after "sha256 Fingerprint=".
std::string sha256_fingerprint(const X509* cert);

// The one-line subject, e.g. "CN=sandgate interception CA 3f2a9c1e".
std::string subject_line(const X509* cert);

std::string to_pem(const X509* cert);
std::string to_pem(EVP_PKEY* key);  // unencrypted PKCS#8

// When `name` is an IP literal (IPv4 dotted quad, or IPv6 with or without brackets), its
// canonical text without brackets; else empty.
std::string ip_literal(std::string_view name);

}  // namespace sandgate::tls
