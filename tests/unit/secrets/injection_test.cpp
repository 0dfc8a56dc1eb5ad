#include "secrets/injection.hpp"

#include <gtest/gtest.h>

#include "policy/host.hpp"
#include "secrets/encoding.hpp"
#include "secrets/scope.hpp"
#include "secrets/sigv4.hpp"

namespace sandgate::secrets {
namespace {

policy::HostPattern pattern(std::string_view text) {
  return *policy::parse_host_pattern(text);
}

InjectRule rule(std::vector<std::string_view> hosts, std::vector<std::string> prefixes,
                std::string credential) {
  InjectRule r;
  for (auto h : hosts) r.hosts.push_back(pattern(h));
  r.path_prefixes = std::move(prefixes);
  r.credential = std::move(credential);
  r.origin = "test." + r.credential;
  return r;
}

struct MatchCase {
  std::string name;
  std::string host;
  std::uint16_t port;
  std::string target;
  std::string credential;  // "" = no rule
};

class InjectionMatch : public ::testing::TestWithParam<MatchCase> {};

const InjectionRules& rules() {
  static const InjectionRules compiled(
      {
          rule({"github.com"}, {"/acme/"}, "acme"),
          rule({"github.com", "api.github.com"}, {"/repos/acme", "/orgs/acme"}, "api"),
          rule({"*.npmjs.org"}, {}, "npm"),
          rule({"github.com"}, {}, "fallback"),
          rule({"ghe.test:8443"}, {}, "ghe"),
          rule({"registry.test"}, {"/v2/acme/"}, "registry"),
      },
      {443, 80});
  return compiled;
}

TEST_P(InjectionMatch, FirstMatchingRuleWins) {
  const MatchCase& c = GetParam();
  const InjectRule* hit = rules().match(policy::normalize_host(c.host), c.port, c.target);
  if (c.credential.empty()) {
    EXPECT_EQ(hit, nullptr) << (hit ? hit->credential : "");
  } else {
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->credential, c.credential);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InjectionMatch,
    ::testing::Values(
        MatchCase{"PathPrefix", "github.com", 443, "/acme/widgets.git/info/refs?x=1", "acme"},
        MatchCase{"PrefixIsCanonical", "github.com", 443, "/%61cme/widgets", "acme"},
        MatchCase{"DotSegmentsRemovedFirst", "github.com", 443, "/other/../acme/w", "acme"},
        MatchCase{"DotSegmentsLeaveThePrefix", "github.com", 443, "/acme/../other", "fallback"},
        MatchCase{"TrailingSlashPrefixNeedsTheSlash", "github.com", 443, "/acme", "fallback"},
        MatchCase{"SegmentBoundary", "api.github.com", 443, "/repos/acme/x", "api"},
        MatchCase{"SegmentBoundaryExact", "api.github.com", 443, "/repos/acme", "api"},
        MatchCase{"NotAPrefixOfASegment", "api.github.com", 443, "/repos/acmex/y", ""},
        MatchCase{"AmbiguousPathMatchesNoPrefixRule", "api.github.com", 443, "/repos/acme%2Fx", ""},
        MatchCase{"AmbiguousPathStillMatchesHostOnlyRule", "github.com", 443, "/acme%2Fx",
                  "fallback"},
        MatchCase{"HostCaseAndDotNormalised", "GitHub.com.", 443, "/x", "fallback"},
        MatchCase{"WildcardSubdomain", "registry.npmjs.org", 443, "/", "npm"},
        MatchCase{"WildcardNotApex", "npmjs.org", 443, "/", ""},
        MatchCase{"WildcardNotSuffixOfLabel", "evilnpmjs.org", 443, "/", ""},
        MatchCase{"PortNotOfTheSandbox", "github.com", 8443, "/acme/x", ""},
        MatchCase{"OtherSandboxPort", "github.com", 80, "/acme/x", "acme"},
        MatchCase{"ExplicitPort", "ghe.test", 8443, "/", "ghe"},
        MatchCase{"ExplicitPortOnly", "ghe.test", 443, "/", ""},
        MatchCase{"AddressNeverMatches", "140.82.112.3", 443, "/acme/x", ""},
        MatchCase{"OtherHost", "gitlab.com", 443, "/acme/x", ""},
        // GitHub resolves owners and repositories in any case (as the http and git rules).
        MatchCase{"PrefixWithoutCaseOnGitHub", "github.com", 443, "/Acme/Widgets.git", "acme"},
        MatchCase{"ApiPrefixWithoutCase", "api.github.com", 443, "/REPOS/ACME/x", "api"},
        MatchCase{"PrefixCaseCountsElsewhere", "registry.test", 443, "/v2/ACME/x", ""},
        MatchCase{"PrefixElsewhere", "registry.test", 443, "/v2/acme/x", "registry"}),
    [](const auto& row) { return row.param.name; });

TEST(InjectionRules, BindsIgnoresPathsAndKnowsItsCredentials) {
  const auto github = policy::normalize_host("github.com");
  EXPECT_TRUE(rules().binds("api", github, 443));
  EXPECT_TRUE(rules().binds("acme", github, 80));
  EXPECT_FALSE(rules().binds("npm", github, 443));
  EXPECT_FALSE(rules().binds("api", policy::normalize_host("evil.test"), 443));
  EXPECT_EQ(rules().credentials(),
            (std::vector<std::string>{"acme", "api", "fallback", "ghe", "npm", "registry"}));
}

TEST(InjectionApply, BearerBasicAndHeader) {
  InjectRule r = rule({"a.test"}, {}, "c");
  r.as = InjectAs::bearer;
  Injection bearer = apply(r, "tok123");
  EXPECT_EQ(bearer.name, "Authorization");
  EXPECT_EQ(bearer.value, "Bearer tok123");
  EXPECT_EQ(bearer.secret_forms, (std::vector<std::string>{"tok123"}));

  r.as = InjectAs::basic;
  r.user = "x-access-token";
  Injection basic = apply(r, "tok123");
  EXPECT_EQ(basic.name, "Authorization");
  EXPECT_EQ(basic.value, "Basic eC1hY2Nlc3MtdG9rZW46dG9rMTIz");  // base64("x-access-token:tok123")
  EXPECT_EQ(basic.secret_forms,
            (std::vector<std::string>{"tok123", "eC1hY2Nlc3MtdG9rZW46dG9rMTIz"}));
  // Padded and not, standard and URL-safe, each once: base64("u:a?>") is "dTphPz4=" (its
  // URL-safe form is the same); base64("u:\xfb\xff") is "dTr7/w==", URL-safe "dTr7_w==".
  r.user = "u";
  EXPECT_EQ(apply(r, "a?>").secret_forms, (std::vector<std::string>{"a?>", "dTphPz4=", "dTphPz4"}));
  EXPECT_EQ(apply(r, "\xfb\xff").secret_forms,
            (std::vector<std::string>{"\xfb\xff", "dTr7/w==", "dTr7/w", "dTr7_w", "dTr7_w=="}));

  r.as = InjectAs::header;
  r.header = "X-Api-Key";
  r.format = "Token {token} v1";
  Injection header = apply(r, "tok123");
  EXPECT_EQ(header.name, "X-Api-Key");
  EXPECT_EQ(header.value, "Token tok123 v1");
}

// AWS keys are never a header: the request is signed again (sigv4::resign). What the response
// must not carry back is each of the three, the key id included; a long-term key has no token.
TEST(InjectionApply, AwsKeysAreRedactedOneByOne) {
  InjectRule r = rule({"*.amazonaws.com"}, {}, "aws");
  r.as = InjectAs::aws_sigv4;
  // (secrets::apply: a std::string argument would find std::apply too.)
  const Injection temporary =
      secrets::apply(r, sigv4::pack_credentials({"ASIAKEY", "secret/key+1", "session-token"}));
  EXPECT_TRUE(temporary.name.empty());
  EXPECT_EQ(temporary.secret_forms,
            (std::vector<std::string>{"ASIAKEY", "secret/key+1", "session-token"}));
  EXPECT_EQ(secrets::apply(r, sigv4::pack_credentials({"AKIAKEY", "secret", ""})).secret_forms,
            (std::vector<std::string>{"AKIAKEY", "secret"}));
}

// The store's one token for a key pair: three lines, each of visible ASCII; the key id and the
// secret never empty.
TEST(AwsCredentials, PackAndUnpackRoundTripAndRefuseWhatIsNotAKeyPair) {
  const std::string packed = sigv4::pack_credentials({"AKIAKEY", "sec/ret+", "tok=="});
  EXPECT_EQ(packed, "AKIAKEY\nsec/ret+\ntok==");
  const auto keys = sigv4::unpack_credentials(packed);
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->access_key_id, "AKIAKEY");
  EXPECT_EQ(keys->secret_access_key, "sec/ret+");
  EXPECT_EQ(keys->session_token, "tok==");
  EXPECT_TRUE(sigv4::unpack_credentials("AKIAKEY\nsecret\n"));
  for (const std::string_view bad :
       {"AKIAKEY\nsecret", "\nsecret\n", "AKIAKEY\n\n", "AKIA KEY\ns\n",
        "AKIAKEY\nsecret\ntok\nmore", "AKIAKEY\nsecr\xc3\xa9t\n"}) {
    EXPECT_FALSE(sigv4::unpack_credentials(bad)) << bad;
  }
}

TEST(Encoding, KnownVectors) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url(std::string("\xfb\xff", 2)), "-_8");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(fingerprint("abc"), "ba7816bf8f01");
}

TEST(Scope, KeyIsCanonicalAndCollisionFree) {
  Scope a;
  a.repositories = {"Acme/Widgets", "acme/gadgets", "acme/widgets"};
  a.permissions = {{"contents", "read"}};
  a.normalize();
  EXPECT_EQ(a.repositories, (std::vector<std::string>{"acme/gadgets", "acme/widgets"}));
  Scope b;
  b.repositories = {"acme/widgets", "acme/gadgets"};
  b.permissions = {{"contents", "read"}};
  b.normalize();
  EXPECT_EQ(a.key(), b.key());
  EXPECT_EQ(a, b);

  // Items that would join into the same text stay apart.
  Scope c;
  c.repositories = {"a/b,c/d"};
  Scope d;
  d.repositories = {"a/b", "c/d"};
  EXPECT_NE(c.key(), d.key());
  Scope e;
  e.oauth_scopes = {"read"};
  Scope f;
  f.permissions = {{"read", ""}};
  EXPECT_NE(e.key(), f.key());
  EXPECT_NE(Scope{}.key(), e.key());
  EXPECT_TRUE(Scope{}.empty());
}

TEST(PathPrefix, SegmentBoundaries) {
  EXPECT_TRUE(path_prefix_matches("/a", "/a"));
  EXPECT_TRUE(path_prefix_matches("/a", "/a/b"));
  EXPECT_FALSE(path_prefix_matches("/a", "/ab"));
  EXPECT_TRUE(path_prefix_matches("/a/", "/a/b"));
  EXPECT_FALSE(path_prefix_matches("/a/", "/a"));
  EXPECT_TRUE(path_prefix_matches("/", "/anything"));
}

}  // namespace
}  // namespace sandgate::secrets
