#include "launcher/ca_bundle.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

// Stand-ins for certificates: the bundle code only moves PEM blocks, it never parses them.
const std::string kRootA = "-----BEGIN CERTIFICATE-----\nQUFB\nQUFB\n-----END CERTIFICATE-----";
const std::string kRootB = "-----BEGIN CERTIFICATE-----\nQkJC\n-----END CERTIFICATE-----";
const std::string kSandgateCa = "-----BEGIN CERTIFICATE-----\nU0dDQQ==\n-----END CERTIFICATE-----";
const std::string kOther = "-----BEGIN CERTIFICATE-----\nT1RIRVI=\n-----END CERTIFICATE-----";
const std::string kSystem = kRootA + "\n" + kRootB + "\n";

TEST(LauncherCaBundle, AddsEachCertificateOnce) {
  struct Row {
    const char* name;
    std::string system;
    std::vector<std::string> extras;
    std::string bundle;
  };
  const Row rows[] = {
      {"no extras: the system roots as they are", kSystem, {}, kSystem},
      {"the interception CA is appended",
       kSystem,
       {kSandgateCa + "\n"},
       kSystem + kSandgateCa + "\n"},
      {"interception CA and ca_file naming the same certificate",
       kSystem,
       {kSandgateCa + "\n", kSandgateCa + "\n"},
       kSystem + kSandgateCa + "\n"},
      {"ca_file adds another CA after the interception CA",
       kSystem,
       {kSandgateCa + "\n", kOther + "\n"},
       kSystem + kSandgateCa + "\n" + kOther + "\n"},
      {"a CA the system already trusts is not added again", kSystem, {kRootB + "\n"}, kSystem},
      {"the same body with other line breaks is the same certificate",
       kSystem,
       {"-----BEGIN CERTIFICATE-----\r\nQUFBQUFB\r\n-----END CERTIFICATE-----\r\n"},
       kSystem},
      {"a file with two certificates, one known: only the new one",
       kSystem,
       {kRootA + "\n" + kSandgateCa + "\n"},
       kSystem + kSandgateCa + "\n"},
      {"text around the blocks stays out of the bundle",
       kSystem,
       {"subject=CN=sandgate\n" + kSandgateCa + "\ntrailing words\n"},
       kSystem + kSandgateCa + "\n"},
      {"a system bundle without a final newline gets one",
       kRootA,
       {kSandgateCa},
       kRootA + "\n" + kSandgateCa + "\n"},
      {"no system roots at all", "", {kSandgateCa}, kSandgateCa + "\n"},
      {"a private key is not a certificate",
       kSystem,
       {"-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"},
       kSystem},
      {"an unterminated block is left out",
       kSystem,
       {"-----BEGIN CERTIFICATE-----\nQUJD\n" + kSandgateCa + "\n"},
       kSystem + kSandgateCa + "\n"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(make_ca_bundle(row.system, row.extras), row.bundle) << row.name;
  }
}

TEST(LauncherCaBundle, CertificateBlocks) {
  EXPECT_EQ(certificate_blocks(kSystem), (std::vector<std::string_view>{kRootA, kRootB}));
  EXPECT_TRUE(certificate_blocks("no pem here").empty());
  EXPECT_TRUE(certificate_blocks("-----BEGIN CERTIFICATE-----\nQUFB\n").empty());
}

}  // namespace
}  // namespace sandgate::launcher
