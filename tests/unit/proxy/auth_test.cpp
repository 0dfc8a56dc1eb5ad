// authenticate(): Proxy-Authorization values against a snapshot's token digests, with no
// sockets (the integration tests send the same values through the daemon).
#include "proxy/auth.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

namespace sandgate::proxy {
namespace {

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Snapshot snapshot() {
  Snapshot s;
  s.token_digests["sb1"] = sha256("tok-1");
  s.token_digests["sb:2"] = sha256("tok-2");  // an id cannot hold ':'; never matches
  return s;
}

struct Row {
  std::string value;
  std::optional<std::string> sandbox;
};

TEST(Authenticate, AcceptsOnlyBasicWithTheSandboxesToken) {
  const Snapshot snap = snapshot();
  const std::string good = base64("sb1:tok-1");
  const Row rows[] = {
      {"Basic " + good, "sb1"},
      {"basic " + good, "sb1"},                          // the scheme is case-insensitive
      {"BASIC  " + good, "sb1"},                         // more than one space
      {"  Basic " + good + " \t", "sb1"},                // surrounding whitespace
      {"Basic " + base64("sb1:tok-1:x"), std::nullopt},  // the token is all after the colon
      {"Basic " + base64("sb1:tok-2"), std::nullopt},    // another sandbox's token
      {"Basic " + base64("sb1:"), std::nullopt},
      {"Basic " + base64("sb1"), std::nullopt},         // no colon
      {"Basic " + base64(":tok-1"), std::nullopt},      // no id
      {"Basic " + base64("sb9:tok-1"), std::nullopt},   // unknown id
      {"Basic " + base64("sb:2:tok-2"), std::nullopt},  // the id ends at the first colon
      {"Basic " + base64("SB1:tok-1"), std::nullopt},   // ids are case-sensitive
      {"Bearer " + good, std::nullopt},
      {"Basic", std::nullopt},
      {"Basic ", std::nullopt},
      {"", std::nullopt},
      {"Basic " + good.substr(1), std::nullopt},                            // not a multiple of 4
      {"Basic " + good + "=", std::nullopt},                                // bad padding
      {"Basic " + good.substr(0, 4) + "*" + good.substr(5), std::nullopt},  // not base64
      {"Basic " + base64("sb1:" + std::string(2000, 'x')), std::nullopt},   // over the bound
  };
  for (const Row& row : rows) {
    EXPECT_EQ(authenticate(snap, row.value), row.sandbox) << row.value;
  }
}

TEST(Authenticate, NoSandboxesMeansNoOneGetsIn) {
  EXPECT_EQ(authenticate(Snapshot{}, "Basic " + base64("sb1:tok-1")), std::nullopt);
}

}  // namespace
}  // namespace sandgate::proxy
