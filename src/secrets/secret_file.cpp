#include "secrets/secret_file.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandgate::secrets {

namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

SecretFile read_secret_file(const std::string& path, std::string_view what, uid_t owner) {
  SecretFile out;
  const std::string role(what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    out.error = path + ": cannot read " + role + ": " + std::strerror(errno);
    return out;
  }
  struct stat st {};
  std::string content;
  // The checks are on the opened file itself, so a rename in between cannot fool them.
  if (::fstat(fd, &st) != 0) {
    out.error = path + ": " + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    out.error = path + ": " + role + " is not a regular file";
  } else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    out.error = path + ": " + role + " is accessible by group or others (mode " +
                mode_text(st.st_mode) + "); run chmod 600 " + path;
  } else if (st.st_uid != owner) {
    out.error = path + ": " + role + " is owned by uid " + std::to_string(st.st_uid) +
                ", not by the user sandgate runs as (uid " + std::to_string(owner) + ")";
  } else if (static_cast<std::size_t>(st.st_size) > kMaxSecretFileBytes) {
    out.error =
        path + ": " + role + " is larger than " + std::to_string(kMaxSecretFileBytes) + " bytes";
  } else {
    content.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t got = 0;
    while (got < content.size()) {
      const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        out.error = path + ": cannot read " + role + ": " + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    content.resize(got);
  }
  ::close(fd);
  if (out.ok()) {
    out.identity = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
                   std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                   std::to_string(st.st_mtim.tv_nsec);
    std::string_view value(content);
    if (value.ends_with('\n')) value.remove_suffix(1);
    if (value.ends_with('\r')) value.remove_suffix(1);
    if (value.empty()) {
      out.error = path + ": " + role + " is empty";
    } else {
      out.content = SecretBytes(value);
    }
  }
  cleanse(content);
  return out;
}

std::vector<std::string> check_credential(const CredentialSpec& spec, uid_t owner) {
  std::vector<std::string> problems;
  const std::string prefix = "credentials." + spec.name + ": ";
  const auto check = [&](const std::string& path, std::string_view role) {
    SecretFile file = read_secret_file(path, role, owner);
    if (!file.ok()) problems.push_back(prefix + file.error);
    return file;
  };
  switch (spec.kind) {
    case ProviderKind::static_file:
      check(spec.file, "token file");
      break;
    case ProviderKind::oauth2_client_credentials:
      check(spec.client_secret_file, "client secret file");
      break;
    case ProviderKind::oauth2_jwt_bearer:
      check(spec.key_file, "key file");
      break;
    case ProviderKind::vault:
      for (const std::string& file : spec.secret_files()) check(file, "Vault login file");
      break;
    case ProviderKind::github_app: {
      SecretFile key = check(spec.private_key_file, "private key file");
      if (!key.ok()) break;
      BIO* bio = BIO_new_mem_buf(key.content.view().data(), static_cast<int>(key.content.size()));
      EVP_PKEY* pkey =
          bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
      ERR_clear_error();
      if (pkey == nullptr) {
        problems.push_back(prefix + spec.private_key_file +
                           ": not an unencrypted PEM private key (GitHub's \"Generate a private "
                           "key\" gives one)");
      } else if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        problems.push_back(prefix + spec.private_key_file +
                           ": not an RSA key (GitHub App keys are RSA; RS256 needs one)");
      }
      EVP_PKEY_free(pkey);
      BIO_free(bio);
      break;
    }
    case ProviderKind::aws_web_identity:
      check(spec.web_identity_token_file, "web identity token file");
      break;
    case ProviderKind::aws_container:
      if (!spec.authorization_token_file.empty()) {
        check(spec.authorization_token_file, "authorization token file");
      }
      break;
    case ProviderKind::aws_instance:
    case ProviderKind::aws_assume_role:  // their aws_credential is checked as itself
    case ProviderKind::aws_secrets_manager:
      break;
    case ProviderKind::aws_static:
      check(spec.access_key_id_file, "access key id file");
      check(spec.secret_access_key_file, "secret access key file");
      if (!spec.session_token_file.empty()) check(spec.session_token_file, "session token file");
      break;
    case ProviderKind::exec:
      if (spec.command.empty() || ::access(spec.command.front().c_str(), X_OK) != 0) {
        problems.push_back(
            prefix + (spec.command.empty() ? std::string("(no command)") : spec.command.front()) +
            ": not an executable file" +
            (spec.command.empty() ? "" : std::string(": ") + std::strerror(errno)));
      }
      break;
  }
  if (!spec.ca_file.empty()) {
    BIO* bio = BIO_new_file(spec.ca_file.c_str(), "r");
    X509* cert = bio != nullptr ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
    if (cert == nullptr) {
      problems.push_back(prefix + spec.ca_file + ": cannot load as PEM certificates (ca_file)");
    }
    X509_free(cert);
    BIO_free(bio);
    ERR_clear_error();
  }
  return problems;
}

std::string_view AdminToken::value() const {
  std::string_view token = file.content.view();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.remove_suffix(1);
  return token;
}

AdminToken read_admin_token(const std::string& path, uid_t owner) {
  return {read_secret_file(path, "admin token file", owner)};
}

}  // namespace sandgate::secrets
