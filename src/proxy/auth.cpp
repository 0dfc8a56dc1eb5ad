#include "proxy/auth.hpp"

#include <openssl/crypto.h>

#include <algorithm>

#include "common/ascii.hpp"
#include "secrets/encoding.hpp"

namespace sandgate::proxy {

namespace {

constexpr std::size_t kMaxCredentialBytes = 1024;

}  // namespace

AuthRefusal auth_refusal(telemetry::AuthOutcome outcome) {
  using telemetry::AuthOutcome;
  switch (outcome) {
    case AuthOutcome::ok:
    case AuthOutcome::no_credentials:
      break;
    case AuthOutcome::malformed_credentials:
      return {"malformed_credentials",
              "Proxy-Authorization is not Basic base64(sandbox-id:token) (at most 1 KiB)"};
    case AuthOutcome::unknown_sandbox_id:
    case AuthOutcome::wrong_token:
      return {"invalid_credentials",
              "the sandbox id and token in Proxy-Authorization are not a sandbox's"};
    case AuthOutcome::identity_changed:
      return {"identity_changed",
              "this connection already serves another sandbox; open a new connection for "
              "these credentials"};
  }
  return {"no_credentials", "Proxy-Authorization with Basic sandbox-id:token is required"};
}

AuthMemo::~AuthMemo() {
  if (held_) OPENSSL_cleanse(held_->value.data(), held_->value.size());
}

void AuthMemo::remember(std::string_view value, const std::string& digest) {
  if (!held_) held_ = std::make_unique<Held>();
  OPENSSL_cleanse(held_->value.data(), held_->value.size());
  held_->value.assign(value);
  held_->digest = digest;
}

bool AuthMemo::holds(std::string_view value, const std::string& digest) const {
  return held_ && value.size() == held_->value.size() &&
         CRYPTO_memcmp(value.data(), held_->value.data(), value.size()) == 0 &&
         digest == held_->digest;
}

AuthResult authenticate(const Snapshot& snap, std::string_view value, std::string_view bound,
                        AuthMemo* memo) {
  using telemetry::AuthOutcome;
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return {AuthOutcome::no_credentials, {}};
  if (memo != nullptr && !bound.empty()) {
    const std::string* known = snap.token_digests.find(bound);
    if (known != nullptr && memo->holds(value, *known)) {
      return {AuthOutcome::ok, std::string(bound)};
    }
  }
  const AuthResult malformed{AuthOutcome::malformed_credentials, {}};
  const auto space = value.find(' ');
  if (space == std::string_view::npos || !iequals_ascii(value.substr(0, space), "basic")) {
    return malformed;
  }
  std::string_view encoded = value.substr(space + 1);
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  auto decoded = encoded.empty() || encoded.size() > kMaxCredentialBytes
                     ? std::nullopt
                     : secrets::base64_decode(encoded);
  if (!decoded) return malformed;
  const auto colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0) {
    OPENSSL_cleanse(decoded->data(), decoded->size());
    return malformed;
  }
  std::string id = decoded->substr(0, colon);
  const std::string* known = snap.token_digests.find(id);
  const std::string digest = secrets::sha256(std::string_view(*decoded).substr(colon + 1));
  OPENSSL_cleanse(decoded->data(), decoded->size());
  if (known == nullptr) {
    OPENSSL_cleanse(id.data(), id.size());
    return {AuthOutcome::unknown_sandbox_id, {}};
  }
  if (CRYPTO_memcmp(digest.data(), known->data(), digest.size()) != 0) {
    return {AuthOutcome::wrong_token, std::move(id)};
  }
  if (!bound.empty() && id != bound) return {AuthOutcome::identity_changed, std::string(bound)};
  if (memo != nullptr) memo->remember(value, *known);
  return {AuthOutcome::ok, std::move(id)};
}

}  // namespace sandgate::proxy
