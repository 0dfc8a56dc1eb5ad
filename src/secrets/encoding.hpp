#pragma once

// Encodings the secrets module needs, behind a header without OpenSSL (the .cpp uses it), so
// the pure core can call them.

#include <array>
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
// The SHA-256 of `bytes` (32 bytes), and its lowercase hex.
std::string sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);
// HMAC-SHA256 of `text` under `key`.
std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view text);
// The first 12 hex digits of sha256_hex: a token's fingerprint for audit lines.
std::string fingerprint(std::string_view token);

}  // namespace sandgate::secrets
