#include "tls/x509.hpp"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <array>
#include <ctime>

namespace sandgate::tls {

namespace {

using Clock = std::chrono::system_clock;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

Clock::time_point from_asn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return Clock::from_time_t(timegm(&tm));
}

}  // namespace

X509Ptr share(X509* cert) {
  if (cert != nullptr) X509_up_ref(cert);
  return X509Ptr(cert);
}

PkeyPtr share(EVP_PKEY* key) {
  if (key != nullptr) EVP_PKEY_up_ref(key);
  return PkeyPtr(key);
}

std::string take_openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    if (!out.empty()) out += "; ";
    out += buf.data();
  }
  return out.empty() ? "unknown error" : out;
}

PkeyPtr generate_p256_key() {
  return PkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
}

bool set_random_serial(X509* cert) {
  // The top bit is set so that every serial has exactly 128 bits (and is never zero); DER keeps
  // it positive with a leading zero octet.
  std::unique_ptr<BIGNUM, OpenSslFree<BN_free>> bn(BN_new());
  if (!bn || BN_rand(bn.get(), 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) != 1) return false;
  ASN1_INTEGER* serial = BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert));
  return serial != nullptr;
}

bool set_validity(X509* cert, Clock::time_point from, Clock::time_point until) {
  return ASN1_TIME_set(X509_getm_notBefore(cert), Clock::to_time_t(from)) != nullptr &&
         ASN1_TIME_set(X509_getm_notAfter(cert), Clock::to_time_t(until)) != nullptr;
}

Clock::time_point not_before(const X509* cert) {
  return from_asn1(X509_get0_notBefore(cert));
}

Clock::time_point not_after(const X509* cert) {
  return from_asn1(X509_get0_notAfter(cert));
}

std::string utc_text(Clock::time_point t) {
  const std::time_t secs = Clock::to_time_t(t);
  std::tm tm{};
  std::array<char, 32> buf{};
  if (gmtime_r(&secs, &tm) == nullptr ||
      std::strftime(buf.data(), buf.size(), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
    return "?";
  }
  return buf.data();
}

bool add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool added = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

bool add_subject_alt_name(X509* cert, std::string_view name, bool is_ip, bool critical) {
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  GENERAL_NAME* entry = GENERAL_NAME_new();
  bool ok = names != nullptr && entry != nullptr;
  if (ok && is_ip) {
    const std::string text(name);
    ASN1_OCTET_STRING* address = a2i_IPADDRESS(text.c_str());
    ok = address != nullptr;
    if (ok) GENERAL_NAME_set0_value(entry, GEN_IPADD, address);
  } else if (ok) {
    ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
    ok = dns != nullptr && ASN1_STRING_set(dns, name.data(), static_cast<int>(name.size())) == 1;
    if (ok) {
      GENERAL_NAME_set0_value(entry, GEN_DNS, dns);
    } else {
      ASN1_IA5STRING_free(dns);
    }
  }
  ok = ok && sk_GENERAL_NAME_push(names, entry) > 0;
  if (ok) entry = nullptr;  // the stack owns it now
  ok = ok && X509_add1_ext_i2d(cert, NID_subject_alt_name, names, critical ? 1 : 0,
                               X509V3_ADD_DEFAULT) == 1;
  GENERAL_NAME_free(entry);
  GENERAL_NAMES_free(names);
  return ok;
}

bool sign(X509* cert, EVP_PKEY* issuer_key) {
  const bool eddsa = EVP_PKEY_is_a(issuer_key, "ED25519") || EVP_PKEY_is_a(issuer_key, "ED448");
  return X509_sign(cert, issuer_key, eddsa ? nullptr : EVP_sha256()) > 0;
}

std::string sha256_fingerprint(const X509* cert) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (X509_digest(cert, EVP_sha256(), md.data(), &len) != 1) return {};
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    if (i != 0) out += ':';
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

std::string subject_line(const X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) return {};
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  return bio_text(bio.get());
}

std::string to_pem(const X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return {};
  return bio_text(bio.get());
}

std::string to_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return {};
  }
  return bio_text(bio.get());
}

std::string ip_literal(std::string_view name) {
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty() || name.size() >= INET6_ADDRSTRLEN) return {};
  const std::string text(name);
  std::array<unsigned char, 16> bytes{};
  std::array<char, INET6_ADDRSTRLEN> out{};
  for (const int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), bytes.data()) == 1 &&
        inet_ntop(family, bytes.data(), out.data(), out.size()) != nullptr) {
      return out.data();
    }
  }
  return {};
}

}  // namespace sandgate::tls
