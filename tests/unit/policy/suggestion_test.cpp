// policy::suggest: where a suggestion goes and its text, row by row. That each one, applied,
// loads and allows is tests/unit/config/config_suggestion_property_test.cpp.
#include "policy/suggestion.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace sandgate::policy {
namespace {

SandboxHome home(SandboxHome::Kind kind, std::string id, std::string profile = {}) {
  SandboxHome h;
  h.kind = kind;
  h.id = std::move(id);
  h.profile = std::move(profile);
  if (kind == SandboxHome::Kind::file) h.file = "/etc/sandgate/sandboxes.d/" + h.id + ".toml";
  return h;
}

Decision refused(Reason reason, std::string rule = {}) {
  Decision d;
  d.reason = reason;
  d.rule = std::move(rule);
  return d;
}

struct PlaceRow {
  const char* name;
  SandboxHome home;
  const char* host;
  std::optional<std::uint16_t> port;
  Decision decision;
  std::string text;      // Suggestion::text()
  std::string launcher;  // Suggestion::launcher_allow
};

TEST(SuggestPlace, TextForEachHomeAndReason) {
  using K = SandboxHome::Kind;
  SandboxHome closed = home(K::table, "closed");
  closed.ports.clear();
  const PlaceRow rows[] = {
      {"main file", home(K::table, "ci"), "x.org", 443, refused(Reason::no_matching_rule),
       "[sandboxes.ci] allow = [\"x.org:443\"]", ""},
      {"an id TOML must quote", home(K::table, "ci.7"), "x.org", 443,
       refused(Reason::no_matching_rule), "[sandboxes.\"ci.7\"] allow = [\"x.org:443\"]", ""},
      {"hand-written drop-in", home(K::file, "hand"), "x.org", 22,
       refused(Reason::port_not_allowed),
       "/etc/sandgate/sandboxes.d/hand.toml: allow = [\"x.org:22\"]", ""},
      {"launched with a profile: the profile, and the flag too",
       home(K::launched, "run-81f2", "dev"), "x.org", 443, refused(Reason::no_matching_rule),
       "[profiles.dev] allow = [\"x.org:443\"]", "sandgate-launch --allow \"x.org:443\""},
      {"launched without: the flag", home(K::launched, "run-81f2"), "x.org", 443,
       refused(Reason::no_matching_rule), "sandgate-launch --allow \"x.org:443\"",
       "sandgate-launch --allow \"x.org:443\""},
      {"launched without, no flag for it", home(K::launched, "run-81f2"), "10.1.2.3", 443,
       refused(Reason::ip_literal_not_allowed),
       "[profiles.NAME] allow_cidrs = [\"10.1.2.3/32\"] (sandgate-launch --profile NAME)", ""},
      {"gone from the config: as launched", home(K::unknown, "run-81f2"), "x.org", 443,
       refused(Reason::no_matching_rule), "sandgate-launch --allow \"x.org:443\"",
       "sandgate-launch --allow \"x.org:443\""},
      {"DNS: the name on the sandbox's ports, never :0", home(K::table, "ci"), "x.org",
       std::nullopt, refused(Reason::no_matching_rule), "[sandboxes.ci] allow = [\"x.org\"]", ""},
      {"DNS with ports = []: a port a rule needs", closed, "x.org", std::nullopt,
       refused(Reason::port_not_allowed, "allow_all_hosts"),
       "[sandboxes.closed] allow = [\"x.org:443\"]", ""},
      {"DNS, launched", home(K::launched, "run-81f2"), "x.org", std::nullopt,
       refused(Reason::no_matching_rule), "sandgate-launch --allow \"x.org\"",
       "sandgate-launch --allow \"x.org\""},
      {"an address off the sandbox's ports: the exact service", home(K::table, "ci"), "8.8.8.8", 53,
       refused(Reason::ip_literal_not_allowed),
       "[sandboxes.ci] allow_host_services = [\"8.8.8.8:53\"]", ""},
      {"NAT64 as its IPv4 address", home(K::table, "ci"), "[64:ff9b::808:808]", 443,
       refused(Reason::ip_literal_not_allowed), "[sandboxes.ci] allow_cidrs = [\"8.8.8.8/32\"]",
       ""},
      {"a non-HTTP stream on 443", home(K::table, "ci"), "ssh.x.org", 443,
       refused(Reason::unrecognized_protocol), "[sandboxes.ci] opaque = [\"ssh.x.org:443\"]", ""},
  };
  for (const PlaceRow& row : rows) {
    const Suggestion s = suggest(row.home, normalize_host(row.host), row.port, row.decision);
    EXPECT_EQ(s.text(), row.text) << row.name;
    EXPECT_EQ(s.launcher_allow, row.launcher) << row.name;
    EXPECT_TRUE(s.why_none.empty()) << row.name;
  }
}

TEST(SuggestPlace, BlocksCarryTheirOwnHeader) {
  Decision d = refused(Reason::no_matching_http_rule);
  d.refused_method = "post";
  d.refused_path = "/repos/acme/widgets";
  const Host api = normalize_host("api.example.com");
  const std::string body =
      "hosts = [\"api.example.com\"]\nmethods = [\"POST\"]\npaths = [\"/repos/acme/widgets\"]\n"
      "action = \"allow\"";
  EXPECT_EQ(suggest(home(SandboxHome::Kind::table, "ci"), api, 443, d).text(),
            "[[sandboxes.ci.http_rules]]\n" + body);
  EXPECT_EQ(suggest(home(SandboxHome::Kind::launched, "l", "dev"), api, 443, d).text(),
            "[[profiles.dev.http_rules]]\n" + body);
  EXPECT_EQ(suggest(home(SandboxHome::Kind::file, "hand"), api, 443, d).text(),
            "/etc/sandgate/sandboxes.d/hand.toml: [[http_rules]]\n" + body);
  EXPECT_EQ(
      suggest(home(SandboxHome::Kind::launched, "l"), api, 443, d).text(),
      "[[profiles.NAME.http_rules]]\n" + body + "\n# then run sandgate-launch with --profile NAME");
  // A port the sandbox's ports do not cover is named.
  SandboxHome narrow = home(SandboxHome::Kind::table, "ci");
  narrow.ports = {80};
  EXPECT_NE(suggest(narrow, api, 443, d).toml.find("hosts = [\"api.example.com:443\"]"),
            std::string::npos);
}

TEST(SuggestPlace, NoLineSaysWhy) {
  const Host metadata = normalize_host("169.254.169.254");
  Decision always = refused(Reason::always_denied_address);
  always.address_class = AddressClass::metadata;
  const SandboxHome ci = home(SandboxHome::Kind::table, "ci");
  const struct {
    const char* name;
    Suggestion s;
    const char* why;
  } rows[] = {
      {"metadata", suggest(ci, metadata, 80, always),
       "metadata addresses are refused whatever the config says"},
      {"deny rule",
       suggest(ci, normalize_host("x.org"), 443,
               refused(Reason::denied_by_rule, "sandboxes.ci.deny:x.org")),
       "rule sandboxes.ci.deny:x.org refuses it and comes first (deny beats allow); remove or "
       "narrow that rule"},
      {"IP literal over DNS",
       suggest(ci, normalize_host("8.8.8.8"), std::nullopt,
               refused(Reason::ip_literal_not_allowed)),
       "an IP literal is never resolved: the client dials it directly"},
      {"6to4 off the ports",
       suggest(ci, normalize_host("[2002:808:808::1]"), 53,
               refused(Reason::ip_literal_not_allowed)),
       "an IPv4 address tunnelled in IPv6 (6to4, Teredo, IPv4-compatible) cannot be opened; "
       "dial the IPv4 address"},
  };
  for (const auto& row : rows) {
    EXPECT_FALSE(row.s) << row.name;
    EXPECT_EQ(row.s.text(), "") << row.name;
    EXPECT_EQ(row.s.why_none, row.why) << row.name;
  }
}

// The one TOML quoter (the suggestions' and the launcher's drop-ins).
TEST(SuggestPlace, TomlStringEscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(toml_string("plain"), "\"plain\"");
  EXPECT_EQ(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(toml_string("x\ny"), "\"x\\u000ay\"");
}

}  // namespace
}  // namespace sandgate::policy
