#pragma once

// Reading the files that hold secrets, with the same checks as the CA key (src/tls): a
// regular file of this user, no access for group or others. Used by the providers and by
// `sandgate --check-config`.

#include <unistd.h>

#include <string>
#include <vector>

#include "secrets/secret_bytes.hpp"
#include "secrets/spec.hpp"

namespace sandgate::secrets {

struct SecretFileError {
  std::string message;  // "PATH: ...": never any of the file's content
};

// At most this much is read from a secret file.
inline constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

// The file's content with one trailing newline (LF or CRLF) removed; or why it cannot be
// used. `what` names the file's role in messages ("token file", "client secret").
struct SecretFile {
  SecretBytes content;
  std::string error;  // empty on success
  // Identity of what was read (device, inode, size, mtime): a changed file is read again.
  std::string identity;
  bool ok() const { return error.empty(); }
};
// The file must belong to `owner`: the user sandgate runs as, or the one `--check-config --user`
// names.
SecretFile read_secret_file(const std::string& path, std::string_view what,
                            uid_t owner = ::geteuid());

// The admin API's write token (listeners.admin_token_file), read at each use so that a rotated
// token counts at once: the daemon checks a write call against it; `sandgate holds` and
// `sandgate-launch run --approve-with` send it.
struct AdminToken {
  SecretFile file;  // holds the bytes; file.error says why there is none
  // The token: the file's content without its trailing line ends.
  std::string_view value() const;
};
AdminToken read_admin_token(const std::string& path, uid_t owner = ::geteuid());

// What --check-config reports for one credential: every secret file unreadable, too open, or
// empty, and a github_app private key that OpenSSL cannot parse as an unencrypted PEM RSA
// private key. Empty when all is well.
std::vector<std::string> check_credential(const CredentialSpec& spec, uid_t owner = ::geteuid());

}  // namespace sandgate::secrets
