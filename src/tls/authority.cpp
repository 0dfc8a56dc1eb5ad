#include "tls/authority.hpp"

#include <fcntl.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandgate::tls {

namespace {

using Clock = std::chrono::system_clock;

// RFC 5280's ub-common-name: a longer CN is left out rather than cut.
constexpr std::size_t kMaxCommonName = 64;
constexpr std::size_t kMaxDnsName = 253;

std::string shown(const std::filesystem::path& p) {
  return p.string();
}

std::string mode_text(mode_t mode) {
  std::string out = "0000";
  for (int i = 0; i < 3; ++i)
    out[static_cast<std::size_t>(3 - i)] = char('0' + ((mode >> (3 * i)) & 7));
  return out;
}

// A host name a certificate can carry: letters, digits, '-', '_' and '.' between non-empty
// labels, no wildcard. The policy
// has normalised it already; this only keeps anything else out of a certificate.
bool is_certifiable_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxDnsName || name.front() == '.' || name.back() == '.' ||
      name.find("..") != std::string_view::npos) {
    return false;
  }
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

PkeyPtr read_private_key(const std::filesystem::path& file, uid_t owner) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw CaError(shown(file) + ": cannot read CA key: " + std::strerror(errno));
  BioPtr bio(BIO_new_fd(fd, BIO_CLOSE));
  if (!bio) {
    ::close(fd);
    throw CaError(shown(file) + ": " + take_openssl_errors());
  }
  // The checks are on the opened file itself, so a rename in between cannot fool them.
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw CaError(shown(file) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw CaError(shown(file) + ": CA key is not a regular file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw CaError(shown(file) + ": CA key is accessible by group or others (mode " +
                  mode_text(st.st_mode & 07777) + "); run chmod 600 " + shown(file));
  }
  if (st.st_uid != owner) {
    throw CaError(shown(file) + ": CA key is owned by uid " + std::to_string(st.st_uid) +
                  ", not by the user sandgate runs as (uid " + std::to_string(owner) + ")");
  }
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    throw CaError(shown(file) + ": no unencrypted PEM private key in file (" +
                  take_openssl_errors() + ")");
  }
  return key;
}

// Why `cert` and `key` cannot be a CA, or nothing. `key_mismatch` says the key is to blame.
struct Problem {
  std::string what;
  bool key_mismatch = false;
};

Problem check_authority(X509* cert, EVP_PKEY* key, Clock::time_point now) {
  const std::uint32_t flags = X509_get_extension_flags(cert);
  if ((flags & EXFLAG_INVALID) != 0) return {"the certificate has invalid extensions"};
  if ((flags & EXFLAG_CA) == 0) {
    return {"the certificate is not a CA (basicConstraints CA:TRUE missing)"};
  }
  if ((flags & EXFLAG_KUSAGE) != 0 && (X509_get_key_usage(cert) & KU_KEY_CERT_SIGN) == 0) {
    return {"the CA certificate's keyUsage lacks keyCertSign"};
  }
  if (now < not_before(cert)) {
    return {"the CA certificate is not valid before " + utc_text(not_before(cert))};
  }
  if (now >= not_after(cert)) {
    return {"the CA certificate expired on " + utc_text(not_after(cert))};
  }
  if (key == nullptr || X509_check_private_key(cert, key) != 1) {
    take_openssl_errors();
    return {"the key does not belong to the CA certificate", true};
  }
  return {};
}

}  // namespace

std::vector<X509Ptr> read_certificates(const std::filesystem::path& file) {
  BioPtr bio(BIO_new_file(file.c_str(), "r"));
  if (!bio) {
    throw CaError(shown(file) + ": cannot read CA certificate: " + std::strerror(errno));
  }
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  const std::string errors = take_openssl_errors();  // the last read always ends in "no start line"
  if (certs.empty()) {
    throw CaError(shown(file) + ": no PEM certificate in file (" + errors + ")");
  }
  return certs;
}

std::shared_ptr<const Authority> Authority::load(const std::filesystem::path& cert_file,
                                                 const std::filesystem::path& key_file,
                                                 Clock::time_point now, uid_t owner) {
  std::vector<X509Ptr> certs = read_certificates(cert_file);
  PkeyPtr key = read_private_key(key_file, owner);
  X509Ptr cert = std::move(certs.front());
  certs.erase(certs.begin());
  if (const Problem p = check_authority(cert.get(), key.get(), now); !p.what.empty()) {
    // A mismatch may be either file's fault: name both.
    throw CaError(p.key_mismatch ? shown(key_file) + ": " + p.what + " in " + shown(cert_file)
                                 : shown(cert_file) + ": " + p.what);
  }
  return std::make_shared<const Authority>(std::move(cert), std::move(key), std::move(certs), now);
}

Authority::Authority(X509Ptr cert, PkeyPtr key, std::vector<X509Ptr> chain, Clock::time_point now)
    : cert_(std::move(cert)), key_(std::move(key)) {
  if (!cert_) throw CaError("CA: no certificate");
  if (const Problem p = check_authority(cert_.get(), key_.get(), now); !p.what.empty()) {
    throw CaError("CA: " + p.what);
  }
  // A root is the client's trust anchor and is not sent; an intermediate CA is.
  const bool self_signed = X509_check_issued(cert_.get(), cert_.get()) == X509_V_OK;
  if (!self_signed) chain_.push_back(share(cert_.get()));
  for (X509Ptr& extra : chain) chain_.push_back(std::move(extra));
  fingerprint_ = sha256_fingerprint(cert_.get());
}

Result<std::shared_ptr<const Leaf>> Authority::mint(std::string_view name,
                                                    const LeafOptions& options) const {
  const std::string ip = ip_literal(name);
  const bool is_ip = !ip.empty();
  if (!is_ip && (!is_certifiable_name(name) || name.find('*') != std::string_view::npos)) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  const std::string subject_name = is_ip ? ip : std::string(name);
  const Clock::time_point now = options.now == Clock::time_point{} ? Clock::now() : options.now;
  const Clock::time_point until = std::min(now + options.validity, not_after(cert_.get()));
  if (options.validity <= std::chrono::seconds::zero()) {
    return std::make_error_code(std::errc::invalid_argument);
  }
  if (until <= now) return make_error_code(Errc::internal_error);  // the CA itself has expired

  PkeyPtr key = generate_p256_key();
  X509Ptr cert(X509_new());
  bool ok = key && cert && X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
            set_random_serial(cert.get()) &&
            X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get())) == 1 &&
            set_validity(cert.get(), now - std::chrono::hours(1), until) &&
            X509_set_pubkey(cert.get(), key.get()) == 1;
  const bool with_cn = subject_name.size() <= kMaxCommonName;
  if (ok && with_cn) {
    ok = X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                                    reinterpret_cast<const unsigned char*>(subject_name.c_str()),
                                    -1, -1, 0) == 1;
  }
  // RFC 5280 4.2.1.6: with an empty subject the SAN must be critical.
  ok = ok && add_subject_alt_name(cert.get(), subject_name, is_ip, !with_cn) &&
       add_extension(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE") &&
       add_extension(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature") &&
       add_extension(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth") &&
       add_extension(cert.get(), cert_.get(), NID_subject_key_identifier, "hash") &&
       add_extension(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid,issuer") &&
       sign(cert.get(), key_.get());
  std::shared_ptr<SSL_CTX> ctx;
  if (ok) ctx = make_server_context(cert.get(), key.get(), chain_, options.configure_context);
  if (!ctx) {
    take_openssl_errors();
    return make_error_code(Errc::internal_error);
  }
  return std::make_shared<const Leaf>(subject_name, std::move(cert), std::move(key),
                                      std::move(ctx));
}

}  // namespace sandgate::tls
