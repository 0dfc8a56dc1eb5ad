#include "common/sha256.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <memory>

namespace sandgate {

std::array<unsigned char, 32> sha256_digest(std::string_view bytes) {
  static_assert(SHA256_DIGEST_LENGTH == 32);
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 &EVP_MD_CTX_free);
  std::array<unsigned char, 32> out{};
  if (md == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), out.data());
  }
  return out;
}

}  // namespace sandgate
