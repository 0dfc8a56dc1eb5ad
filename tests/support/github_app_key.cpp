#include "support/github_app_key.hpp"

#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/json/parse.hpp>

namespace sandgate::test {

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return {};
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return {};
  std::size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

std::string base64url_decode(std::string_view text) {
  std::string b64(text);
  for (char& c : b64) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  b64.append((4 - b64.size() % 4) % 4, '=');
  return base64_decode(b64);
}

AppKey::AppKey(const TempDir& dir) {
  key = EVP_RSA_gen(2048);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  path = dir.write("app.pem", std::string(data, static_cast<std::size_t>(n)));
  BIO_free(bio);
  ::chmod(path.c_str(), 0600);
}

AppKey::~AppKey() {
  EVP_PKEY_free(key);
}

boost::json::value AppKey::verify(std::string_view jwt) const {
  const auto dot1 = jwt.find('.');
  const auto dot2 = jwt.rfind('.');
  if (dot1 == std::string_view::npos || dot2 == dot1) return nullptr;
  boost::system::error_code ec;
  const boost::json::value header = boost::json::parse(base64url_decode(jwt.substr(0, dot1)), ec);
  // RS256, typ JWT; a key id (kid) may name the key.
  const boost::json::object* fields = ec ? nullptr : header.if_object();
  if (fields == nullptr || fields->size() != 2 + (fields->contains("kid") ? 1 : 0) ||
      !fields->contains("alg") || fields->at("alg") != "RS256" || !fields->contains("typ") ||
      fields->at("typ") != "JWT") {
    return nullptr;
  }
  const std::string_view input = jwt.substr(0, dot2);
  const std::string signature = base64url_decode(jwt.substr(dot2 + 1));
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  const bool ok =
      EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(md, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                       input.size()) == 1;
  EVP_MD_CTX_free(md);
  if (!ok) return nullptr;
  boost::json::value claims =
      boost::json::parse(base64url_decode(jwt.substr(dot1 + 1, dot2 - dot1 - 1)), ec);
  if (ec) return nullptr;
  return claims;
}

}  // namespace sandgate::test
