#pragma once

#include <openssl/evp.h>

#include <boost/json/value.hpp>
#include <string>
#include <string_view>

#include "support/temp_dir.hpp"

namespace sandgate::test {

// RFC 4648 base64 (with padding) and base64url (without) decoding; "" for what is not.
std::string base64_decode(std::string_view text);
std::string base64url_decode(std::string_view text);

// A GitHub App's RSA key, as a fake GitHub needs it: the private half in a 0600 file
// (`private_key_file` of a github_app credential), the public half to check the JWTs
// sandgate signs with it.
struct AppKey {
  explicit AppKey(const TempDir& dir);
  ~AppKey();
  AppKey(const AppKey&) = delete;
  AppKey& operator=(const AppKey&) = delete;

  // Checks an RS256 JWT (header {"alg":"RS256","typ":"JWT"}, and a kid if any); returns its
  // claims, or null
  // when it is malformed or its signature does not verify with this key.
  boost::json::value verify(std::string_view jwt) const;

  EVP_PKEY* key = nullptr;
  std::string path;
};

}  // namespace sandgate::test
