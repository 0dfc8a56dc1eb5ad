#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "tls/authority.hpp"

namespace sandgate::tls {

// The two files of a CA directory.
struct CaFiles {
  std::filesystem::path cert;  // DIR/ca.pem, the certificate (mode 0644)
  std::filesystem::path key;   // DIR/ca.key, the private key (mode 0600)
};
CaFiles ca_files_in(const std::filesystem::path& dir);

// What create_ca made.
struct CreatedCa {
  CaFiles files;
  std::string subject;      // "CN=sandgate interception CA 3f2a9c1e"
  std::string fingerprint;  // SHA-256, colon hex (sha256_fingerprint)
  std::chrono::system_clock::time_point not_after;
};

// How long a new CA is valid.
inline constexpr std::chrono::hours kCaValidity{24 * 3650};

// `sandgate ca init DIR`: creates DIR (mode 0700) when missing, and in it a new ECDSA P-256 key
// (ca.key) and a self-signed CA certificate for it (ca.pem): basicConstraints critical
// CA:TRUE pathlen:0, keyUsage critical keyCertSign+cRLSign, subject and authority key
// identifiers, CN "sandgate interception CA <8 random hex digits>", valid from an hour ago for
// kCaValidity, random 128-bit serial.
//
// Each file is written to a temporary file in DIR that is created O_EXCL with its final mode
// (the key is never readable by anyone else, not even briefly), synced, then renamed into
// place: without `force` with RENAME_NOREPLACE, so an existing file is never overwritten; with
// `force` over the old one. Throws CaError naming the file: ca.key or ca.pem exists (and not
// `force`), DIR cannot be created, a write fails.
CreatedCa create_ca(const std::filesystem::path& dir, bool force);

}  // namespace sandgate::tls
