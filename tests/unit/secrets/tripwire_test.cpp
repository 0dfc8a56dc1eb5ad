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

// Feeds `body` to a BodyTripwire in chunks of `chunk` bytes the way the proxy does: the bytes
// held back go again in front of the next chunk. What was released, and whether it refused.
struct Streamed {
  std::string released;
  bool refused = false;
  bool found = false;
};
Streamed stream_body(BodyTripwire& trip, std::string_view body, std::size_t chunk) {
  Streamed out;
  std::string held;
  for (std::size_t at = 0; at < body.size() || at == 0; at += chunk) {
    const std::string data = held + std::string(body.substr(at, chunk));
    const bool last = at + chunk >= body.size();
    const std::size_t go = trip.feed(data, last);
    if (trip.refused()) {
      EXPECT_EQ(go, 0u);
      out.refused = true;
      break;
    }
    EXPECT_LE(data.size() - go, BodyTripwire::kHoldBack);
    if (last) {
      EXPECT_EQ(go, data.size());
    }
    out.released += data.substr(0, go);
    held = data.substr(go);
    if (last) break;
  }
  out.found = trip.found();
  return out;
}

struct BodyCase {
  std::string name;
  std::string body;  // "{ci/github}" and "{forged}" stand for placeholders
  std::string host;
  bool refused;
  bool found;
};

std::string expand(std::string text) {
  const std::vector<std::pair<std::string, std::string>> tokens = {
      {"{ci/github}", key().placeholder_for("ci", "github")},
      {"{other/github}", key().placeholder_for("other", "github")},
      {"{forged}", "sgph_" + std::string(40, 'a')}};
  for (const auto& [name, value] : tokens) {
    for (auto at = text.find(name); at != std::string::npos; at = text.find(name)) {
      text.replace(at, name.size(), value);
    }
  }
  return text;
}

class BodyTripwireRows : public ::testing::TestWithParam<BodyCase> {};

// Every chunking of the body (1 byte to the whole) gives the same verdict, a refused body
// releases no byte of the placeholder that tripped it, and an allowed one is released whole.
TEST_P(BodyTripwireRows, EveryChunkingGivesTheSameVerdict) {
  const BodyCase& c = GetParam();
  const PlaceholderIndex index(key(), {{"ci", "github"}, {"other", "github"}});
  const InjectionRules rules({rule("api.github.com", "github")}, {443});
  const policy::Host host = policy::normalize_host(c.host);
  const std::string body = expand(c.body);
  const std::size_t first = body.rfind("sgph_");  // the one that trips, in the rows below
  for (std::size_t chunk = 1; chunk <= body.size() + 1; ++chunk) {
    BodyTripwire trip(index, &rules, "ci", host, 443, true);
    const Streamed s = stream_body(trip, body, chunk);
    EXPECT_EQ(s.refused, c.refused) << "chunk " << chunk;
    EXPECT_EQ(s.found, c.found) << "chunk " << chunk;
    if (c.refused) {
      EXPECT_LE(s.released.size(), first) << "chunk " << chunk;
    } else {
      EXPECT_EQ(s.released, body) << "chunk " << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BodyTripwireRows,
    ::testing::Values(
        BodyCase{"no_placeholder", R"({"a":"sgph_","b":"sgph_1234"})", "evil.example", false,
                 false},
        BodyCase{"to_the_bound_host", R"({"token":"{ci/github}"})", "api.github.com", false, true},
        BodyCase{"to_another_host", R"({"token":"{ci/github}"})", "evil.example", true, true},
        BodyCase{"at_the_very_end", "x={ci/github}", "evil.example", true, true},
        BodyCase{"alone", "{ci/github}", "evil.example", true, true},
        BodyCase{"another_sandboxs_to_the_bound_host", "t={other/github}&x=1", "api.github.com",
                 true, true},
        BodyCase{"forged", "t={forged}&x=1", "api.github.com", true, true},
        // 41 hex digits: not a placeholder (as in headers), whatever the chunking.
        BodyCase{"one_digit_too_many", "t={ci/github}0 and more", "evil.example", false, false},
        BodyCase{"second_one_refused", "{ci/github} then {forged}", "api.github.com", true, true},
        BodyCase{"prefix_repeated", "sgph_sgph_sgph_{ci/github}.", "evil.example", true, true}),
    [](const auto& row) { return row.param.name; });

// A body that pauses (a client waiting for an answer) is held back only while its end could
// begin a placeholder.
TEST(BodyTripwire, OnlyAnEndThatMayBeginAPlaceholderWaits) {
  const PlaceholderIndex index(key(), {{"ci", "github"}});
  const policy::Host host = policy::normalize_host("example.com");
  BodyTripwire trip(index, nullptr, "ci", host, 443, true);
  EXPECT_EQ(trip.feed("hello, world", false), 12u);
  EXPECT_EQ(trip.feed("token: sg", false), 7u);       // "sg" waits
  EXPECT_EQ(trip.feed("sgph_0123", false), 0u);       // the "sg" again, then more of it
  EXPECT_EQ(trip.feed("sgph_0123x ok", false), 13u);  // cannot be one any more
  EXPECT_EQ(trip.feed("is sgph_ses", false), 10u);    // the last "s" might
  EXPECT_EQ(trip.feed("s", true), 1u);
  EXPECT_FALSE(trip.refused());
}

TEST(BodyTripwire, AnEmptyBodyIsFine) {
  const PlaceholderIndex index(key(), {{"ci", "github"}});
  const policy::Host host = policy::normalize_host("example.com");
  BodyTripwire trip(index, nullptr, "ci", host, 443, true);
  EXPECT_EQ(trip.feed({}, true), 0u);
  EXPECT_FALSE(trip.refused());
}

}  // namespace
}  // namespace sandgate::secrets
