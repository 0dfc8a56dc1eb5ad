#include "tls/authority.hpp"

#include <gtest/gtest.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "support/temp_dir.hpp"
#include "tls/ca_init.hpp"
#include "x509_checks.hpp"

namespace sandgate::tls {
namespace {

namespace fs = std::filesystem;
using sandgate::test::TempDir;
using test::with_hook;
using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

// A fresh CA on disk, loaded.
struct CaFixture {
  TempDir tmp;
  CaFiles files = create_ca(tmp.path() / "ca", false).files;
  std::shared_ptr<const Authority> ca = Authority::load(files.cert, files.key);
};

LeafOptions leaf_options(std::chrono::seconds validity, Clock::time_point now) {
  LeafOptions options;
  options.validity = validity;
  options.now = now;
  return options;
}

std::string load_error(const fs::path& cert, const fs::path& key,
                       Clock::time_point now = Clock::now()) {
  try {
    Authority::load(cert, key, now);
  } catch (const CaError& e) {
    return e.what();
  }
  return "(loaded)";
}

// ---------------------------------------------------------------------------------------------
// Loading

TEST(AuthorityLoad, LoadsWhatCreateCaWrote) {
  const CaFixture f;
  const X509Ptr cert = test::read_cert(f.files.cert);
  EXPECT_EQ(X509_cmp(f.ca->certificate(), cert.get()), 0);
  EXPECT_EQ(f.ca->fingerprint(), sha256_fingerprint(cert.get()));
}

struct ModeRow {
  const char* name;
  mode_t mode;
  bool accepted;
};

class AuthorityKeyMode : public ::testing::TestWithParam<ModeRow> {};

TEST_P(AuthorityKeyMode, OnlyTheOwnerMayHaveAccess) {
  const CaFixture f;
  ASSERT_EQ(::chmod(f.files.key.c_str(), GetParam().mode), 0);
  const std::string error = load_error(f.files.cert, f.files.key);
  if (GetParam().accepted) {
    EXPECT_EQ(error, "(loaded)");
  } else {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(GetParam().mode));
    EXPECT_EQ(error, f.files.key.string() + ": CA key is accessible by group or others (mode " +
                         mode + "); run chmod 600 " + f.files.key.string());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, AuthorityKeyMode,
    ::testing::Values(ModeRow{"Owner0600", 0600, true}, ModeRow{"OwnerRead0400", 0400, true},
                      ModeRow{"GroupRead0640", 0640, false}, ModeRow{"WorldRead0604", 0604, false},
                      ModeRow{"World0644", 0644, false}, ModeRow{"GroupWrite0620", 0620, false},
                      ModeRow{"WorldExec0601", 0601, false}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(AuthorityLoad, RefusesAKeyOwnedBySomeoneElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  const CaFixture f;
  ASSERT_EQ(::chown(f.files.key.c_str(), 65534, 65534), 0);
  EXPECT_EQ(load_error(f.files.cert, f.files.key),
            f.files.key.string() +
                ": CA key is owned by uid 65534, not by the user sandgate runs as (uid 0)");
}

TEST(AuthorityLoad, RefusesAKeyThatIsNotARegularFile) {
  const CaFixture f;
  const fs::path dir_key = f.tmp.path() / "keydir";
  fs::create_directory(dir_key);
  fs::permissions(dir_key, fs::perms(0700));
  EXPECT_EQ(load_error(f.files.cert, dir_key), dir_key.string() + ": CA key is not a regular file");
}

TEST(AuthorityLoad, RefusesAKeyOfAnotherCa) {
  const CaFixture f;
  const CaFiles other = create_ca(f.tmp.path() / "other", false).files;
  EXPECT_EQ(load_error(f.files.cert, other.key),
            other.key.string() + ": the key does not belong to the CA certificate in " +
                f.files.cert.string());
}

TEST(AuthorityLoad, RefusesALeafCertificate) {
  const CaFixture f;
  const auto leaf = f.ca->mint("example.com");
  ASSERT_TRUE(leaf);
  const fs::path cert = f.tmp.path() / "leaf.pem";
  const fs::path key = f.tmp.path() / "leaf.key";
  test::write_text(cert, to_pem((*leaf)->certificate()), 0644);
  test::write_text(key, to_pem((*leaf)->key()), 0600);
  EXPECT_EQ(load_error(cert, key),
            cert.string() + ": the certificate is not a CA (basicConstraints CA:TRUE missing)");
}

TEST(AuthorityLoad, RefusesAnExpiredOrNotYetValidCa) {
  const CaFixture f;
  const std::string expiry = utc_text(not_after(f.ca->certificate()));
  EXPECT_EQ(load_error(f.files.cert, f.files.key, Clock::now() + 3651 * 24h),
            f.files.cert.string() + ": the CA certificate expired on " + expiry);
  EXPECT_EQ(load_error(f.files.cert, f.files.key, Clock::now() - 2h),
            f.files.cert.string() + ": the CA certificate is not valid before " +
                utc_text(not_before(f.ca->certificate())));
}

TEST(AuthorityLoad, MissingAndUnparsableFiles) {
  const CaFixture f;
  const fs::path missing = f.tmp.path() / "missing.pem";
  EXPECT_EQ(load_error(missing, f.files.key),
            missing.string() + ": cannot read CA certificate: No such file or directory");
  EXPECT_EQ(load_error(f.files.cert, missing),
            missing.string() + ": cannot read CA key: No such file or directory");
  const fs::path junk = f.tmp.path() / "junk";
  test::write_text(junk, "not pem\n", 0600);
  EXPECT_TRUE(load_error(junk, f.files.key).starts_with(junk.string() + ": no PEM certificate"));
  EXPECT_TRUE(load_error(f.files.cert, junk)
                  .starts_with(junk.string() + ": no unencrypted PEM private key"));
}

// ---------------------------------------------------------------------------------------------
// Minting

// One row per name: what the SAN holds and which checks must pass or fail.
struct MintRow {
  const char* test_name;
  std::string name;
  bool ip;
  std::string cn;     // "" = no CN
  std::string other;  // a name or address the leaf must not cover
};

class AuthorityMint : public ::testing::TestWithParam<MintRow> {};

TEST_P(AuthorityMint, LeafVerifiesForItsNameOnly) {
  const MintRow& row = GetParam();
  const CaFixture f;
  const auto minted = f.ca->mint(row.name);
  ASSERT_TRUE(minted) << minted.error().message();
  const Leaf& leaf = **minted;
  X509* cert = leaf.certificate();

  EXPECT_EQ(test::verify(f.ca->certificate(), cert, true), "");
  const std::string bare = row.ip ? ip_literal(row.name) : row.name;
  if (row.ip) {
    EXPECT_EQ(X509_check_ip_asc(cert, bare.c_str(), 0), 1);
    EXPECT_EQ(X509_check_ip_asc(cert, row.other.c_str(), 0), 0);
    // No dNSName: only the CN (OpenSSL's fallback for names) spells the address.
    EXPECT_EQ(X509_check_host(cert, bare.c_str(), bare.size(), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT,
                              nullptr),
              0);
  } else {
    EXPECT_EQ(X509_check_host(cert, row.name.c_str(), row.name.size(), 0, nullptr), 1);
    EXPECT_EQ(X509_check_host(cert, row.other.c_str(), row.other.size(), 0, nullptr), 0);
  }
  EXPECT_EQ(leaf.name(), bare);

  // Subject: CN = the name when it fits, else empty with a critical SAN.
  char cn[256] = {};
  const int cn_len =
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  if (row.cn.empty()) {
    EXPECT_EQ(cn_len, -1);
    EXPECT_EQ(X509_NAME_entry_count(X509_get_subject_name(cert)), 0);
    EXPECT_EQ(test::critical_flag(cert, NID_subject_alt_name), 1);
  } else {
    EXPECT_EQ(std::string(cn), row.cn);
    EXPECT_EQ(test::critical_flag(cert, NID_subject_alt_name), 0);
  }
  // Exactly one SAN entry, of the right type.
  GENERAL_NAMES* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(sans, nullptr);
  EXPECT_EQ(sk_GENERAL_NAME_num(sans), 1);
  EXPECT_EQ(sk_GENERAL_NAME_value(sans, 0)->type, row.ip ? GEN_IPADD : GEN_DNS);
  GENERAL_NAMES_free(sans);
}

INSTANTIATE_TEST_SUITE_P(
    Names, AuthorityMint,
    ::testing::Values(
        MintRow{"HostName", "api.example.com", false, "api.example.com", "www.example.com"},
        MintRow{"SingleLabel", "localhost", false, "localhost", "example.com"},
        MintRow{"SubdomainIsNotCovered", "example.com", false, "example.com", "a.example.com"},
        MintRow{"Underscore", "_svc.example.com", false, "_svc.example.com", "svc.example.com"},
        MintRow{"Cn64Bytes", std::string(60, 'a') + ".com", false, std::string(60, 'a') + ".com",
                "b.com"},
        MintRow{"LongNameHasNoCn", std::string(61, 'a') + ".com", false, "", "b.com"},
        MintRow{"Ipv4", "127.0.0.1", true, "127.0.0.1", "127.0.0.2"},
        MintRow{"Ipv6", "::1", true, "::1", "::2"},
        MintRow{"Ipv6Bracketed", "[2001:db8::1]", true, "2001:db8::1", "2001:db8::2"},
        MintRow{"Ipv6Canonicalised", "2001:DB8:0:0::1", true, "2001:db8::1", "2001:db8::2"}),
    [](const auto& row) { return std::string(row.param.test_name); });

TEST(AuthorityMint, LeafShape) {
  const CaFixture f;
  const Clock::time_point now = Clock::now();
  const auto minted = f.ca->mint("example.com", leaf_options(6h, now));
  ASSERT_TRUE(minted);
  X509* cert = (*minted)->certificate();

  EXPECT_EQ(X509_check_private_key(cert, (*minted)->key()), 1);
  EXPECT_TRUE(EVP_PKEY_is_a((*minted)->key(), "EC"));
  std::array<char, 32> group{};
  std::size_t group_len = 0;
  EVP_PKEY_get_group_name((*minted)->key(), group.data(), group.size(), &group_len);
  EXPECT_STREQ(group.data(), "prime256v1");

  EXPECT_EQ(X509_check_ca(cert), 0);
  EXPECT_EQ(test::critical_flag(cert, NID_basic_constraints), 1);
  EXPECT_EQ(test::critical_flag(cert, NID_key_usage), 1);
  EXPECT_EQ(X509_get_key_usage(cert), std::uint32_t{KU_DIGITAL_SIGNATURE});
  EXPECT_EQ(X509_get_extended_key_usage(cert), std::uint32_t{XKU_SSL_SERVER});
  ASSERT_NE(X509_get0_authority_key_id(cert), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(cert),
                                  X509_get0_subject_key_id(f.ca->certificate())),
            0);
  EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(cert), X509_get_subject_name(f.ca->certificate())),
            0);

  const auto secs = [](Clock::time_point t) { return Clock::to_time_t(t); };
  EXPECT_EQ(secs(not_before(cert)), secs(now - 1h));
  EXPECT_EQ(secs(not_after(cert)), secs(now + 6h));
  EXPECT_EQ((*minted)->not_after(), not_after(cert));
  EXPECT_EQ((*minted)->not_before(), not_before(cert));
}

TEST(AuthorityMint, ValidityNeverOutlivesTheCa) {
  const CaFixture f;
  const Clock::time_point ca_end = not_after(f.ca->certificate());
  const auto minted = f.ca->mint("example.com", leaf_options(24h, ca_end - 2h));
  ASSERT_TRUE(minted);
  EXPECT_EQ((*minted)->not_after(), ca_end);
}

TEST(AuthorityMint, EveryLeafIsNew) {
  const CaFixture f;
  const auto a = f.ca->mint("example.com");
  const auto b = f.ca->mint("example.com");
  ASSERT_TRUE(a && b);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber((*a)->certificate()),
                             X509_get0_serialNumber((*b)->certificate())),
            0);
  EXPECT_NE(EVP_PKEY_eq((*a)->key(), (*b)->key()), 1);
}

TEST(AuthorityMint, ALeafOfAnotherCaDoesNotVerify) {
  const CaFixture f;
  const CaFixture other;
  const auto leaf = other.ca->mint("example.com");
  ASSERT_TRUE(leaf);
  EXPECT_NE(test::verify(f.ca->certificate(), (*leaf)->certificate(), true), "");
}

TEST(AuthorityMint, RefusesWhatIsNotAName) {
  const CaFixture f;
  for (const std::string& name : std::vector<std::string>{
           "", "*.example.com", "*", "a b.com", "a,DNS:evil.com", "evil.com\n", "[::1", "a/b", ".",
           "a..b", ".a.com", "a.com.", std::string(254, 'a'), std::string("nul\0x", 5)}) {
    const auto minted = f.ca->mint(name);
    ASSERT_FALSE(minted) << "minted for \"" << name << "\"";
    EXPECT_EQ(minted.error(), std::make_error_code(std::errc::invalid_argument)) << name;
  }
}

TEST(AuthorityMint, RefusesAValidityThatIsNotPositiveAndAnExpiredCa) {
  const CaFixture f;
  const auto zero = f.ca->mint("example.com", leaf_options(std::chrono::seconds(0), Clock::now()));
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error(), std::make_error_code(std::errc::invalid_argument));
  const auto late = f.ca->mint("example.com", leaf_options(24h, not_after(f.ca->certificate())));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error(), make_error_code(Errc::internal_error));
}

TEST(AuthorityMint, HookRunsOnTheServerContext) {
  const CaFixture f;
  SSL_CTX* seen = nullptr;
  const auto minted = f.ca->mint("example.com", with_hook([&](SSL_CTX* ctx) { seen = ctx; }));
  ASSERT_TRUE(minted);
  EXPECT_EQ(seen, (*minted)->server_context().get());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(seen), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_options(seen) & SSL_OP_NO_TICKET, 0u);
  EXPECT_EQ(X509_cmp(SSL_CTX_get0_certificate(seen), (*minted)->certificate()), 0);
}

// A CA certificate for `key` named `cn`, signed by `issuer` (null: self-signed) with
// `issuer_key`; no path length limit.
X509Ptr make_ca(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  set_random_serial(cert.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  set_validity(cert.get(), Clock::now() - 1h, Clock::now() + 48h);
  X509_set_pubkey(cert.get(), key);
  EXPECT_TRUE(add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
  EXPECT_TRUE(add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign"));
  EXPECT_TRUE(add_extension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  EXPECT_TRUE(sign(cert.get(), issuer_key));
  return cert;
}

TEST(Authority, AnIntermediateCaIsSentWithEveryLeaf) {
  const TempDir tmp;
  const PkeyPtr root_key = generate_p256_key();
  const X509Ptr root = make_ca(root_key.get(), "test root", nullptr, root_key.get());
  const PkeyPtr mid_key = generate_p256_key();
  const X509Ptr mid = make_ca(mid_key.get(), "test intermediate", root.get(), root_key.get());
  const fs::path cert_file = tmp.path() / "ca.pem";
  const fs::path key_file = tmp.path() / "ca.key";
  test::write_text(cert_file, to_pem(mid.get()), 0644);
  test::write_text(key_file, to_pem(mid_key.get()), 0600);

  const auto ca = Authority::load(cert_file, key_file);
  const auto leaf = ca->mint("example.com");
  ASSERT_TRUE(leaf);
  STACK_OF(X509)* chain = nullptr;
  ASSERT_EQ(SSL_CTX_get0_chain_certs((*leaf)->server_context().get(), &chain), 1);
  ASSERT_EQ(sk_X509_num(chain), 1);
  EXPECT_EQ(X509_cmp(sk_X509_value(chain, 0), mid.get()), 0);
  // Without the intermediate the leaf does not verify against the root; with it, it does.
  EXPECT_NE(test::verify(root.get(), (*leaf)->certificate(), true), "");
  EXPECT_EQ(test::verify(root.get(), (*leaf)->certificate(), true, chain), "");
}

TEST(Authority, ARootIsNotSent) {
  const CaFixture f;
  const auto leaf = f.ca->mint("example.com");
  ASSERT_TRUE(leaf);
  STACK_OF(X509)* chain = nullptr;
  ASSERT_EQ(SSL_CTX_get0_chain_certs((*leaf)->server_context().get(), &chain), 1);
  EXPECT_EQ(chain, nullptr);  // no chain at all: OpenSSL sends the leaf alone
}

TEST(Authority, ConstructorChecksTheCa) {
  const CaFixture f;
  const auto leaf = f.ca->mint("example.com");
  ASSERT_TRUE(leaf);
  try {
    Authority(share((*leaf)->certificate()), share((*leaf)->key()));
    FAIL() << "a leaf became a CA";
  } catch (const CaError& e) {
    EXPECT_EQ(std::string(e.what()),
              "CA: the certificate is not a CA (basicConstraints CA:TRUE missing)");
  }
}

}  // namespace
}  // namespace sandgate::tls
