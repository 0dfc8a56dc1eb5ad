#include "secrets/encoding.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace sandgate::secrets {
namespace {

struct DecodeCase {
  std::string name;
  std::string text;
  std::optional<std::string> decoded;
};

class Base64Decode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(Base64Decode, InvertsBase64OrRefuses) {
  const DecodeCase& c = GetParam();
  EXPECT_EQ(base64_decode(c.text), c.decoded);
  if (c.decoded) {
    EXPECT_EQ(base64(*c.decoded), c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, Base64Decode,
                         ::testing::Values(DecodeCase{"empty", "", std::string()},
                                           DecodeCase{"two_pads", "YQ==", std::string("a")},
                                           DecodeCase{"one_pad", "YWI=", std::string("ab")},
                                           DecodeCase{"no_pad", "YWJj", std::string("abc")},
                                           DecodeCase{"basic_credentials",
                                                      "eC1hY2Nlc3MtdG9rZW46c2dwaF8wMTI=",
                                                      std::string("x-access-token:sgph_012")},
                                           DecodeCase{"binary", "AP8=", std::string("\0\xff", 2)},
                                           DecodeCase{"unpadded", "YQ", std::nullopt},
                                           DecodeCase{"outside_the_alphabet", "YW*j", std::nullopt},
                                           DecodeCase{"url_alphabet", "-_-_", std::nullopt}),
                         [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace sandgate::secrets
