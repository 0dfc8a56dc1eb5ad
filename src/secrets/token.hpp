#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "secrets/secret_bytes.hpp"

namespace sandgate::secrets {

using WallClock = std::chrono::system_clock;
using TimePoint = WallClock::time_point;

// A token as the store hands it out: immutable, shared by every request that uses it.
struct Token {
  SecretBytes value;
  TimePoint expires_at;  // never used at or after this instant (TimePoint::max(): never expires)
  TimePoint refresh_at;  // from here on a request also starts a refresh (refresh ahead)
  // First 12 hex digits of the SHA-256 of the value: names the token in audit lines without
  // revealing it (fingerprint()).
  std::string fingerprint;
};

// Why no token could be had. `message` never holds a secret (tests check it).
struct TokenError {
  // true when waiting may help (the endpoint is down, a timeout, a 5xx), false when it cannot
  // until the configuration changes (a key file unreadable or invalid, an unknown
  // installation, a 401/403/404 from the endpoint).
  bool retryable = true;
  std::string message;
  // A token endpoint that answered with an error: its HTTP status (0: none, the failure was
  // elsewhere) and the error code its body named (OAuth2's `error`, GitHub's `message`), at
  // most kMaxEndpointErrorBytes of printable ASCII with secret-looking words removed
  // (endpoint_error_code). For the audit line, which never carries the free-text message.
  unsigned endpoint_status = 0;
  std::string endpoint_error{};
};
inline constexpr std::size_t kMaxEndpointErrorBytes = 80;

// What CredentialStore::get gives a request: a token, or why there is none.
struct TokenResult {
  std::shared_ptr<const Token> token;
  std::optional<TokenError> error;  // set exactly when token is null

  bool ok() const { return token != nullptr; }
};

}  // namespace sandgate::secrets
