#include "tls/ca_init.hpp"

#include <fcntl.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace sandgate::tls {

namespace {

using Clock = std::chrono::system_clock;
namespace fs = std::filesystem;

std::string random_hex(std::size_t bytes) {
  std::array<unsigned char, 16> buf{};
  if (bytes > buf.size() || RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
    throw CaError("cannot get random bytes: " + take_openssl_errors());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    out += kHex[buf[i] >> 4];
    out += kHex[buf[i] & 0xf];
  }
  return out;
}

[[noreturn]] void fail(const fs::path& file, const std::string& what, int err) {
  throw CaError(file.string() + ": " + what + ": " + std::strerror(err));
}

// A file holding `content` in `dir` with exactly `mode`, under a temporary name; returns that
// name. Created O_EXCL with `mode` from the start (umask can only narrow it; fchmod sets it).
fs::path write_temporary(const fs::path& dir, const std::string& name, const std::string& content,
                         mode_t mode) {
  const fs::path tmp = dir / ("." + name + ".tmp-" + random_hex(8));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) fail(tmp, "cannot create", errno);
  std::size_t done = 0;
  int err = 0;
  if (::fchmod(fd, mode) != 0) err = errno;
  while (err == 0 && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail(tmp, "cannot write", err);
  }
  return tmp;
}

// Moves `tmp` to `final`; without `replace`, fails (and removes `tmp`) when `final` exists.
void install(const fs::path& tmp, const fs::path& final, bool replace) {
  const int rc =
      replace ? ::rename(tmp.c_str(), final.c_str())
              : ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final.c_str(), RENAME_NOREPLACE);
  if (rc == 0) return;
  int err = errno;
  if (!replace && (err == EINVAL || err == ENOSYS)) {
    // A file system without RENAME_NOREPLACE: link() refuses an existing name as well.
    err = ::link(tmp.c_str(), final.c_str()) == 0 ? 0 : errno;
  }
  ::unlink(tmp.c_str());
  if (err == 0) return;
  if (err == EEXIST) throw CaError(final.string() + " already exists (use --force to replace it)");
  fail(final, "cannot create", err);
}

// `dir` itself 0700; missing parents as `mkdir -p` makes them (0755 less the umask).
void ensure_directory(const fs::path& dir, mode_t mode = 0700) {
  if (::mkdir(dir.c_str(), mode) == 0) return;
  int err = errno;
  if (err == ENOENT && !dir.parent_path().empty() && dir.parent_path() != dir) {
    ensure_directory(dir.parent_path(), 0755);
    if (::mkdir(dir.c_str(), mode) == 0) return;
    err = errno;
  }
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
  fail(dir, "cannot create directory", err == EEXIST ? ENOTDIR : err);
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

X509Ptr make_ca_certificate(EVP_PKEY* key, Clock::time_point now) {
  const std::string cn = "sandgate interception CA " + random_hex(4);
  X509Ptr cert(X509_new());
  X509_NAME* subject = cert ? X509_get_subject_name(cert.get()) : nullptr;
  const bool ok =
      cert && X509_set_version(cert.get(), X509_VERSION_3) == 1 && set_random_serial(cert.get()) &&
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) == 1 &&
      X509_set_issuer_name(cert.get(), subject) == 1 &&
      set_validity(cert.get(), now - std::chrono::hours(1), now + kCaValidity) &&
      X509_set_pubkey(cert.get(), key) == 1 &&
      add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
      add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") &&
      add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash") &&
      add_extension(cert.get(), cert.get(), NID_authority_key_identifier, "keyid:always") &&
      sign(cert.get(), key);
  if (!ok) throw CaError("cannot make the CA certificate: " + take_openssl_errors());
  return cert;
}

}  // namespace

CaFiles ca_files_in(const fs::path& dir) {
  return {dir / "ca.pem", dir / "ca.key"};
}

CreatedCa create_ca(const fs::path& dir, bool force) {
  const CaFiles files = ca_files_in(dir);
  if (!force) {
    for (const fs::path& p : {files.key, files.cert}) {
      if (present(p)) throw CaError(p.string() + " already exists (use --force to replace it)");
    }
  }
  PkeyPtr key = generate_p256_key();
  if (!key) throw CaError("cannot generate an ECDSA P-256 key: " + take_openssl_errors());
  const X509Ptr cert = make_ca_certificate(key.get(), Clock::now());
  const std::string key_pem = to_pem(key.get());
  const std::string cert_pem = to_pem(cert.get());
  if (key_pem.empty() || cert_pem.empty()) {
    throw CaError("cannot encode the CA as PEM: " + take_openssl_errors());
  }

  ensure_directory(dir);
  const fs::path key_tmp = write_temporary(dir, "ca.key", key_pem, 0600);
  fs::path cert_tmp;
  try {
    cert_tmp = write_temporary(dir, "ca.pem", cert_pem, 0644);
  } catch (const CaError&) {
    ::unlink(key_tmp.c_str());
    throw;
  }
  try {
    install(key_tmp, files.key, force);
  } catch (const CaError&) {
    ::unlink(cert_tmp.c_str());
    throw;
  }
  try {
    install(cert_tmp, files.cert, force);
  } catch (const CaError&) {
    // Without --force the key was new: take it back so that DIR is as it was.
    if (!force) ::unlink(files.key.c_str());
    throw;
  }
  sync_directory(dir);
  return {files, subject_line(cert.get()), sha256_fingerprint(cert.get()), not_after(cert.get())};
}

}  // namespace sandgate::tls
