#include "tls/ca_init.hpp"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <sys/stat.h>

#include <filesystem>

#include "support/temp_dir.hpp"
#include "tls/x509.hpp"
#include "x509_checks.hpp"

namespace sandgate::tls {
namespace {

namespace fs = std::filesystem;
using sandgate::test::TempDir;
using namespace std::chrono_literals;

// Restores the process umask on scope exit.
class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t mask) : old_(::umask(mask)) {}
  ~UmaskGuard() { ::umask(old_); }
  UmaskGuard(const UmaskGuard&) = delete;
  UmaskGuard& operator=(const UmaskGuard&) = delete;

 private:
  mode_t old_;
};

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CreateCa, MakesTheDirectoryAndBothFilesWithTheirModes) {
  const TempDir tmp;
  const fs::path dir = tmp.path() / "ca";
  // A permissive umask must not widen the key's mode; a strict one must not narrow the cert's.
  const UmaskGuard guard(0);
  const CreatedCa ca = create_ca(dir, false);
  EXPECT_EQ(ca.files.cert, dir / "ca.pem");
  EXPECT_EQ(ca.files.key, dir / "ca.key");
  EXPECT_EQ(test::mode_of(dir), 0700u);
  EXPECT_EQ(test::mode_of(ca.files.key), 0600u);
  EXPECT_EQ(test::mode_of(ca.files.cert), 0644u);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"ca.key", "ca.pem"}));  // no temporaries
}

TEST(CreateCa, CertificateIsAValidSelfSignedCa) {
  const TempDir tmp;
  const CreatedCa ca = create_ca(tmp.path() / "ca", false);
  const X509Ptr cert = test::read_cert(ca.files.cert);
  const PkeyPtr key = test::read_key(ca.files.key);
  ASSERT_TRUE(cert);
  ASSERT_TRUE(key);

  EXPECT_EQ(test::verify(cert.get(), cert.get(), false), "");
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
  EXPECT_TRUE(EVP_PKEY_is_a(key.get(), "EC"));
  std::array<char, 32> group{};
  std::size_t group_len = 0;
  EVP_PKEY_get_group_name(key.get(), group.data(), group.size(), &group_len);
  EXPECT_STREQ(group.data(), "prime256v1");

  // basicConstraints critical CA:TRUE pathlen:0
  EXPECT_EQ(test::critical_flag(cert.get(), NID_basic_constraints), 1);
  EXPECT_EQ(X509_get_pathlen(cert.get()), 0);
  // keyUsage critical keyCertSign + cRLSign, nothing else
  EXPECT_EQ(test::critical_flag(cert.get(), NID_key_usage), 1);
  EXPECT_EQ(X509_get_key_usage(cert.get()), std::uint32_t{KU_KEY_CERT_SIGN | KU_CRL_SIGN});
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);

  EXPECT_EQ(ca.subject, subject_line(cert.get()));
  EXPECT_TRUE(ca.subject.starts_with("CN=sandgate interception CA ")) << ca.subject;
  EXPECT_EQ(ca.subject.size(), std::string("CN=sandgate interception CA ").size() + 8);
  EXPECT_EQ(ca.fingerprint, sha256_fingerprint(cert.get()));
  EXPECT_EQ(ca.fingerprint.size(), 32u * 3 - 1);

  const auto now = std::chrono::system_clock::now();
  EXPECT_LE(not_before(cert.get()), now);
  EXPECT_GT(not_after(cert.get()), now + 9 * 365 * 24h);
  EXPECT_LT(not_after(cert.get()), now + 11 * 365 * 24h);
  EXPECT_EQ(not_after(cert.get()), ca.not_after);

  std::unique_ptr<BIGNUM, OpenSslFree<BN_free>> serial(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  EXPECT_EQ(BN_num_bits(serial.get()), 128);
  EXPECT_FALSE(BN_is_negative(serial.get()));
}

TEST(CreateCa, EachCaIsNew) {
  const TempDir tmp;
  const CreatedCa a = create_ca(tmp.path() / "a", false);
  const CreatedCa b = create_ca(tmp.path() / "b", false);
  EXPECT_NE(a.fingerprint, b.fingerprint);
  EXPECT_NE(a.subject, b.subject);
}

TEST(CreateCa, ExistingDirectoryIsUsedAsItIs) {
  const TempDir tmp;
  fs::create_directory(tmp.path() / "ca");
  fs::permissions(tmp.path() / "ca", fs::perms(0750));
  const CreatedCa ca = create_ca(tmp.path() / "ca", false);
  EXPECT_EQ(test::mode_of(tmp.path() / "ca"), 0750u);
  EXPECT_EQ(test::mode_of(ca.files.key), 0600u);
}

// One row per file that is already there: nothing is changed and the message names it.
struct ExistingRow {
  const char* name;
  const char* existing;
};

class CreateCaRefuses : public ::testing::TestWithParam<ExistingRow> {};

TEST_P(CreateCaRefuses, WhenAFileExists) {
  const TempDir tmp;
  const fs::path dir = tmp.path() / "ca";
  fs::create_directory(dir);
  const fs::path existing = dir / GetParam().existing;
  test::write_text(existing, "old\n", 0600);
  try {
    create_ca(dir, false);
    FAIL() << "no CaError";
  } catch (const CaError& e) {
    EXPECT_EQ(std::string(e.what()),
              existing.string() + " already exists (use --force to replace it)");
  }
  EXPECT_EQ(names_in(dir), std::vector<std::string>{GetParam().existing});
  EXPECT_EQ(sandgate::test::read_file(existing.string()), "old\n");
}

TEST_P(CreateCaRefuses, ButForceReplacesIt) {
  const TempDir tmp;
  const fs::path dir = tmp.path() / "ca";
  fs::create_directory(dir);
  test::write_text(dir / GetParam().existing, "old\n", 0644);
  const CreatedCa ca = create_ca(dir, true);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"ca.key", "ca.pem"}));
  EXPECT_EQ(test::mode_of(ca.files.key), 0600u);
  const X509Ptr cert = test::read_cert(ca.files.cert);
  const PkeyPtr key = test::read_key(ca.files.key);
  ASSERT_TRUE(cert && key);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);
  EXPECT_EQ(sha256_fingerprint(cert.get()), ca.fingerprint);
}

INSTANTIATE_TEST_SUITE_P(Files, CreateCaRefuses,
                         ::testing::Values(ExistingRow{"Key", "ca.key"},
                                           ExistingRow{"Cert", "ca.pem"}),
                         [](const auto& row) { return std::string(row.param.name); });

TEST(CreateCa, DanglingSymlinkCountsAsExisting) {
  const TempDir tmp;
  const fs::path dir = tmp.path() / "ca";
  fs::create_directory(dir);
  fs::create_symlink(tmp.path() / "elsewhere", dir / "ca.key");
  EXPECT_THROW(create_ca(dir, false), CaError);
  EXPECT_FALSE(fs::exists(tmp.path() / "elsewhere"));
}

TEST(CreateCa, ForceReplacesBothFiles) {
  const TempDir tmp;
  const CreatedCa first = create_ca(tmp.path() / "ca", false);
  const CreatedCa second = create_ca(tmp.path() / "ca", true);
  EXPECT_NE(first.fingerprint, second.fingerprint);
  const X509Ptr cert = test::read_cert(second.files.cert);
  ASSERT_TRUE(cert);
  EXPECT_EQ(sha256_fingerprint(cert.get()), second.fingerprint);
}

// As `mkdir -p`: `sandgate ca init /etc/sandgate/ca` on a host without /etc/sandgate.
TEST(CreateCa, MissingParentsAreCreated) {
  const TempDir tmp;
  const fs::path dir = tmp.path() / "etc" / "sandgate" / "ca";
  const UmaskGuard guard(022);
  const CreatedCa ca = create_ca(dir, false);
  EXPECT_EQ(ca.files.key, dir / "ca.key");
  EXPECT_EQ(test::mode_of(dir), 0700u);
  EXPECT_EQ(test::mode_of(tmp.path() / "etc" / "sandgate"), 0755u);
  EXPECT_EQ(test::mode_of(tmp.path() / "etc"), 0755u);
}

TEST(CreateCa, APathThroughAFileIsAnError) {
  const TempDir tmp;
  const std::string file = tmp.write("etc", "x");
  const fs::path dir = fs::path(file) / "sandgate" / "ca";
  try {
    create_ca(dir, false);
    FAIL() << "no CaError";
  } catch (const CaError& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": cannot create directory: Not a directory");
  }
}

TEST(CreateCa, AFileWhereTheDirectoryShouldBe) {
  const TempDir tmp;
  const std::string file = tmp.write("ca", "x");
  try {
    create_ca(file, false);
    FAIL() << "no CaError";
  } catch (const CaError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": cannot create directory: Not a directory");
  }
}

}  // namespace
}  // namespace sandgate::tls
