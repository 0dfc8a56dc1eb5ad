#include "dns/server_address.hpp"

#include <gtest/gtest.h>

namespace sandgate::dns {
namespace {

using policy::IpAddress;

IpAddress loopback6() {
  std::array<std::uint8_t, 16> b{};
  b[15] = 1;
  return IpAddress::v6(b);
}

TEST(ServerAddressTest, Parses) {
  struct Row {
    const char* text;
    std::optional<ServerAddress> want;
  };
  const IpAddress v4 = IpAddress::v4(0xc0000235);  // 192.0.2.53
  const std::vector<Row> rows = {
      {"192.0.2.53", ServerAddress{v4, 53}},
      {"192.0.2.53:5353", ServerAddress{v4, 5353}},
      {"::1", ServerAddress{loopback6(), 53}},
      {"[::1]", ServerAddress{loopback6(), 53}},
      {"[::1]:5353", ServerAddress{loopback6(), 5353}},
      {"[::1]:65535", ServerAddress{loopback6(), 65535}},
      {"", std::nullopt},
      {"dns.example", std::nullopt},
      {"127.1", std::nullopt},
      {"192.0.2.53:", std::nullopt},
      {"192.0.2.53:0", std::nullopt},
      {"192.0.2.53:65536", std::nullopt},
      {"192.0.2.53:53x", std::nullopt},
      {"192.0.2.53:-1", std::nullopt},
      {"[::1", std::nullopt},
      {"[::1]53", std::nullopt},
      {"[192.0.2.53]:53", std::nullopt},
      {"::1:53:", std::nullopt},
      {"fe80::1%eth0", std::nullopt},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.text);
    EXPECT_EQ(parse_server_address(row.text), row.want);
  }
}

}  // namespace
}  // namespace sandgate::dns
