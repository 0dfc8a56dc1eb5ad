#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/errc.hpp"
#include "tls/leaf.hpp"
#include "tls/x509.hpp"

namespace sandgate::tls {

// A CA that cannot be created or used: a file that is missing, unreadable, too readable, or
// holds the wrong thing. The message names the file. Startup and `sandgate ca init` only.
class CaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every PEM certificate in `file`, in order. Throws CaError naming the file when it cannot be
// read or holds none.
std::vector<X509Ptr> read_certificates(const std::filesystem::path& file);

// The interception CA: its certificate and key, loaded once at startup and shared read-only by
// every worker (shared_ptr<const Authority>). mint() is const and thread-safe.
class Authority {
 public:
  // Reads `cert_file` (PEM: the CA certificate first, then any certificates between it and a
  // root, which are sent after every leaf) and `key_file` (PEM private key). Throws CaError,
  // naming the file, when a file cannot be read or parsed; when the key file is not a regular
  // file owned by `owner` (this process's effective user; `--check-config --user` names
  // another) with no group or other permission bits; when
  // the first certificate is not a CA (basicConstraints CA:TRUE, keyCertSign if keyUsage is
  // present) or not valid at `now`; when the key does not belong to the certificate.
  static std::shared_ptr<const Authority> load(
      const std::filesystem::path& cert_file, const std::filesystem::path& key_file,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
      uid_t owner = ::geteuid());

  // The same checks on objects in memory, except the file ones. Throws CaError.
  Authority(X509Ptr cert, PkeyPtr key, std::vector<X509Ptr> chain = {},
            std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  // A new leaf for `name`: a host name (as policy normalised it) or an IP literal (IPv6 with or
  // without brackets). Fresh ECDSA P-256 key, random serial, SAN = the name (dNSName or
  // iPAddress), CN = the name when it fits in 64 bytes (else no subject, and the SAN is
  // critical), serverAuth, digitalSignature, CA:FALSE, authorityKeyIdentifier; see LeafOptions
  // for validity and the SSL_CTX hook. Errors: std::errc::invalid_argument for a name that is
  // neither (empty, over 253 bytes, a wildcard, an empty label, a character outside letters,
  // digits, '-', '_' and '.') or a validity that is not positive; Errc::internal_error when
  // OpenSSL fails or the CA has expired.
  Result<std::shared_ptr<const Leaf>> mint(std::string_view name,
                                           const LeafOptions& options = {}) const;

  X509* certificate() const { return cert_.get(); }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  X509Ptr cert_;
  PkeyPtr key_;
  std::vector<X509Ptr> chain_;  // sent after each leaf; the CA itself when it is not a root
  std::string fingerprint_;
};

}  // namespace sandgate::tls
