#include "secrets/encoding.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <memory>

#include "common/sha256.hpp"

namespace sandgate::secrets {

namespace {

// OpenSSL 3's one-shot HMAC() looks its algorithm up on every call and makes and frees a
// context (as SHA256() does; common/sha256.hpp): the algorithm is fetched once and each thread
// keeps a context. A thread's HMAC context, its digest set once: each init then only sets the key.
EVP_MAC_CTX* hmac_context() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  const auto make = []() -> EVP_MAC_CTX* {
    if (mac == nullptr) return nullptr;
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_END};
    if (ctx != nullptr && EVP_MAC_CTX_set_params(ctx, params) != 1) {
      EVP_MAC_CTX_free(ctx);
      return nullptr;
    }
    return ctx;
  };
  thread_local const std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(
      make(), &EVP_MAC_CTX_free);
  return ctx.get();
}

}  // namespace

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

std::string base64url(std::string_view bytes) {
  std::string out = base64(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::string sha256(std::string_view bytes) {
  const std::array<unsigned char, 32> digest = sha256_digest(bytes);
  return std::string(digest.begin(), digest.end());
}

std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view text) {
  std::array<unsigned char, 32> out{};
  EVP_MAC_CTX* ctx = hmac_context();
  std::size_t size = 0;
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  const auto* t = reinterpret_cast<const unsigned char*>(text.data());
  if (ctx == nullptr || EVP_MAC_init(ctx, k, key.size(), nullptr) != 1 ||
      EVP_MAC_update(ctx, t, text.size()) != 1 ||
      EVP_MAC_final(ctx, out.data(), &size, out.size()) != 1) {
    unsigned int length = 0;
    HMAC(EVP_sha256(), k, static_cast<int>(key.size()), t, text.size(), out.data(), &length);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  const std::array<unsigned char, 32> digest = sha256_digest(bytes);
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (const unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::string fingerprint(std::string_view token) {
  return sha256_hex(token).substr(0, 12);
}

}  // namespace sandgate::secrets
