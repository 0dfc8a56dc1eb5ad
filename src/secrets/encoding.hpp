#pragma once

// Encodings the secrets module needs, behind a header without OpenSSL (the .cpp uses it), so
// the pure core can call them.

#include <optional>
#include <string>
#include <string_view>

namespace sandgate::secrets {

// RFC 4648 base64 with padding (Basic credentials).
std::string base64(std::string_view bytes);
// Its inverse: nullopt for what is not padded base64 (a length not a multiple of 4, a
// character outside the alphabet).
std::optional<std::string> base64_decode(std::string_view text);
// RFC 4648 section 5 base64url without padding (JWT).
std::string base64url(std::string_view bytes);
// Lowercase hex of the SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);
// The first 12 hex digits of sha256_hex: a token's fingerprint for audit lines.
std::string fingerprint(std::string_view token);

}  // namespace sandgate::secrets
