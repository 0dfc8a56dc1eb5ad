#include "secrets/tripwire.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sandgate::secrets {
namespace {

const PlaceholderKey& key() {
  static const PlaceholderKey k = PlaceholderKey::from_bytes(std::string(32, '\x17'));
  return k;
}

InjectRule rule(std::string_view host, std::string credential) {
  InjectRule r;
  r.hosts.push_back(*policy::parse_host_pattern(host));
  r.credential = std::move(credential);
  r.origin = "test";
  return r;
}

struct TripwireCase {
  std::string name;
  std::string placeholder_of_sandbox;  // "" = a forged one
  std::string placeholder_of_credential;
  std::string host;
  std::uint16_t port;
  bool intercepted;
  bool allowed;
  std::string credential;  // named in the refusal
};

class Tripwire : public ::testing::TestWithParam<TripwireCase> {};

TEST_P(Tripwire, APlaceholderGoesOnlyWhereItsCredentialIsBound) {
  const TripwireCase& c = GetParam();
  const PlaceholderIndex index(key(), {{"ci", "github"}, {"ci", "npm"}, {"other", "github"}});
  const InjectionRules ci_rules(
      {rule("api.github.com", "github"), rule("registry.npmjs.org", "npm")}, {443});
  const std::string placeholder =
      c.placeholder_of_sandbox.empty()
          ? "sgph_" + std::string(40, 'f')
          : key().placeholder_for(c.placeholder_of_sandbox, c.placeholder_of_credential);
  const std::string header = "token " + placeholder;
  const std::vector<std::string_view> texts = {"/repos/acme/widgets", "application/json", header};
  const policy::Host host = policy::normalize_host(c.host);
  const PlaceholderCheck check =
      check_placeholders(index, &ci_rules, "ci", host, c.port, c.intercepted, texts);
  EXPECT_TRUE(check.found);
  EXPECT_EQ(check.allowed, c.allowed) << check.why;
  EXPECT_EQ(check.credential, c.credential);
  EXPECT_EQ(check.why.find(placeholder), std::string::npos);  // never quoted
}

INSTANTIATE_TEST_SUITE_P(
    Rows, Tripwire,
    ::testing::Values(
        TripwireCase{"bound_host", "ci", "github", "api.github.com", 443, true, true, ""},
        TripwireCase{"other_credentials_host", "ci", "github", "registry.npmjs.org", 443, true,
                     false, "github"},
        TripwireCase{"unbound_host", "ci", "github", "evil.example", 443, true, false, "github"},
        TripwireCase{"bound_host_other_port", "ci", "github", "api.github.com", 8443, true, false,
                     "github"},
        TripwireCase{"plain_http", "ci", "github", "api.github.com", 443, false, false, "github"},
        TripwireCase{"another_sandboxs", "other", "github", "api.github.com", 443, true, false,
                     "github"},
        TripwireCase{"forged", "", "", "api.github.com", 443, true, false, ""}),
    [](const auto& row) { return row.param.name; });

TEST(Tripwire, NoPlaceholderNoRulesIsFine) {
  const PlaceholderIndex index(key(), {{"ci", "github"}});
  const policy::Host host = policy::normalize_host("example.com");
  const std::vector<std::string_view> texts = {"/", "Bearer ghp_realtoken", "sgph_short"};
  const PlaceholderCheck check = check_placeholders(index, nullptr, "ci", host, 443, true, texts);
  EXPECT_FALSE(check.found);
  EXPECT_TRUE(check.allowed);
  // With no rules at all, a real placeholder of this sandbox is refused.
  const std::string p = key().placeholder_for("ci", "github");
  const std::vector<std::string_view> with = {p};
  EXPECT_FALSE(check_placeholders(index, nullptr, "ci", host, 443, true, with).allowed);
}

}  // namespace
}  // namespace sandgate::secrets
