#include "config/config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"
#include "policy/policy.hpp"
#include "policy/request.hpp"

namespace sandgate::config {
namespace {

namespace fs = std::filesystem;

// A name in a directory that does not exist, so the default sandboxes_dir ("sandboxes.d"
// next to the file) is absent and no drop-ins from the test's working directory leak in.
const std::string kFile = "/nonexistent/sandgate.toml";

std::vector<ConfigError> errors_of(std::string_view toml, const std::string& name = kFile) {
  try {
    load_config_from_string(toml, name);
  } catch (const ConfigErrors& e) {
    return e.errors();
  }
  return {};
}

std::string dump(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += "\n  " + e.to_string();
  return out;
}

// The messages that embed a reason from the policy parsers, built the same way the loader
// builds them so these tests pin the loader's wording, not policy's.
std::string host_pattern_message(const std::string& text) {
  std::string reason;
  EXPECT_FALSE(policy::parse_host_pattern(text, &reason)) << text;
  return "invalid host pattern \"" + text + "\": " + reason;
}
std::string cidr_message(const std::string& text) {
  std::string reason;
  EXPECT_FALSE(policy::parse_cidr(text, &reason)) << text;
  return "invalid CIDR \"" + text + "\": " + reason;
}
std::string host_name_message(const std::string& text) {
  const policy::Host host = policy::normalize_host(text);
  EXPECT_FALSE(host.is_valid()) << text;
  return "invalid host name \"" + text + "\": " + std::string(host.invalid_reason);
}

// A private directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sandgate-config-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  std::string write(const std::string& relative, std::string_view text) const {
    const fs::path file = path_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file.string();
  }

 private:
  fs::path path_;
};

// ---------------------------------------------------------------------------------------------
// Valid configurations

constexpr std::string_view kFullConfig = R"(
workers = 4
sandboxes_dir = ""

[listeners]
explicit = ["127.0.0.1:3128", "[::1]:0"]
admin = "127.0.0.1:9090"

[limits]
max_request_line_bytes = 4096
max_header_bytes = 32768
header_timeout_ms = 1000
connect_timeout_ms = 2000
idle_timeout_ms = 3000
max_connections = 100
max_connections_per_sandbox = 10
max_dns_queries_per_sandbox = 32

[dns]
servers = ["192.0.2.53", "192.0.2.54:5353", "[2001:db8::53]:53", "2001:db8::54"]
timeout_ms = 1500
max_ttl_s = 0
denied_names = "refused"
sink_address = "198.51.100.254"
[dns.hosts]
"Origin.Test." = ["127.0.0.1", "::1"]

[log]
audit = "logs/audit.jsonl"
audit_signing_key = "keys/audit.key"
audit_checkpoint_lines = 500
audit_checkpoint_seconds = 30

[profiles.default]
ports = [443, 8443, 443]
allow = ["github.com", "*.github.com:443"]
deny = ["gist.github.com"]
allow_cidrs = ["10.0.0.0/8"]
deny_cidrs = ["10.9.0.0/16"]

[profiles.bare]

[sandboxes.ci]
profile = "default"
token = "s3cret:with-colon"
allow = ["registry.npmjs.org"]
deny_cidrs = ["10.1.0.0/16"]

[sandboxes."agent.2"]
profile = "default"
token = "t2"
ports = [80]
allow_all_hosts = true

[sandboxes.lone]
token = "t3"
)";

TEST(ConfigLoad, FullConfigFillsEveryField) {
  const Config c = load_config_from_string(kFullConfig, "/etc/sandgate/sandgate.toml");
  EXPECT_EQ(c.path, "/etc/sandgate/sandgate.toml");
  EXPECT_EQ(c.workers, 4u);
  EXPECT_EQ(c.sandboxes_dir, "");

  ASSERT_EQ(c.listeners.explicit_proxy.size(), 2u);
  EXPECT_EQ(c.listeners.explicit_proxy[0].text, "127.0.0.1:3128");
  EXPECT_EQ(c.listeners.explicit_proxy[0].port, 3128);
  EXPECT_EQ(c.listeners.explicit_proxy[0].address, *policy::parse_ip_literal("127.0.0.1"));
  EXPECT_EQ(c.listeners.explicit_proxy[1].port, 0);
  EXPECT_EQ(c.listeners.explicit_proxy[1].address, *policy::parse_ip_literal("::1"));
  ASSERT_TRUE(c.listeners.admin.has_value());
  EXPECT_EQ(c.listeners.admin->port, 9090);

  EXPECT_EQ(c.limits.max_request_line_bytes, 4096u);
  EXPECT_EQ(c.limits.max_header_bytes, 32768u);
  EXPECT_EQ(c.limits.header_timeout, std::chrono::milliseconds(1000));
  EXPECT_EQ(c.limits.connect_timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(c.limits.idle_timeout, std::chrono::milliseconds(3000));
  EXPECT_EQ(c.limits.max_connections, 100u);
  EXPECT_EQ(c.limits.max_connections_per_sandbox, 10u);
  EXPECT_EQ(c.limits.max_dns_queries_per_sandbox, 32u);

  EXPECT_EQ(c.dns.servers, (std::vector<std::string>{"192.0.2.53", "192.0.2.54:5353",
                                                     "[2001:db8::53]:53", "2001:db8::54"}));
  EXPECT_EQ(c.dns.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.dns.max_ttl, std::chrono::seconds(0));
  EXPECT_EQ(c.dns.denied_names, Dns::DeniedNames::refused);
  EXPECT_EQ(c.dns.sink_address, *policy::parse_ip_literal("198.51.100.254"));
  ASSERT_EQ(c.dns.hosts.size(), 1u);
  ASSERT_TRUE(c.dns.hosts.contains("origin.test"));  // normalised
  EXPECT_EQ(c.dns.hosts.at("origin.test"),
            (std::vector<policy::IpAddress>{*policy::parse_ip_literal("127.0.0.1"),
                                            *policy::parse_ip_literal("::1")}));

  EXPECT_EQ(c.logging.audit, "/etc/sandgate/logs/audit.jsonl");
  EXPECT_TRUE(c.logging.audit_chain);
  EXPECT_EQ(c.logging.audit_signing_key, "/etc/sandgate/keys/audit.key");
  EXPECT_EQ(c.logging.audit_checkpoint_lines, 500u);
  EXPECT_EQ(c.logging.audit_checkpoint_interval, std::chrono::seconds(30));

  ASSERT_EQ(c.sandboxes.size(), 3u);  // sorted by id
  std::vector<std::string> ids;
  for (const Sandbox& sandbox : c.sandboxes) ids.push_back(sandbox.spec.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"agent.2", "ci", "lone"}));
}

TEST(ConfigLoad, SandboxMergesProfileRulesFirst) {
  const Config c = load_config_from_string(kFullConfig, kFile);
  const Sandbox* ci = c.find_sandbox("ci");
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(ci->profile, "default");
  EXPECT_EQ(ci->token, "s3cret:with-colon");
  EXPECT_EQ(ci->file, kFile);
  const policy::SandboxSpec effective = policy::merged(ci->spec);       // profile rules first
  EXPECT_EQ(effective.ports, (std::vector<std::uint16_t>{443, 8443}));  // duplicates dropped
  EXPECT_FALSE(effective.allow_all_hosts);

  ASSERT_EQ(effective.allow.size(), 3u);
  EXPECT_EQ(effective.allow[0].pattern, *policy::parse_host_pattern("github.com"));
  EXPECT_EQ(effective.allow[0].origin, "profiles.default.allow");
  EXPECT_EQ(effective.allow[1].pattern, *policy::parse_host_pattern("*.github.com:443"));
  EXPECT_EQ(effective.allow[2].pattern, *policy::parse_host_pattern("registry.npmjs.org"));
  EXPECT_EQ(effective.allow[2].origin, "sandboxes.ci.allow");
  ASSERT_EQ(effective.deny.size(), 1u);
  EXPECT_EQ(effective.deny[0].origin, "profiles.default.deny");
  ASSERT_EQ(effective.allow_cidrs.size(), 1u);
  EXPECT_EQ(effective.allow_cidrs[0].cidr, *policy::parse_cidr("10.0.0.0/8"));
  EXPECT_EQ(effective.allow_cidrs[0].origin, "profiles.default.allow_cidrs");
  ASSERT_EQ(effective.deny_cidrs.size(), 2u);
  EXPECT_EQ(effective.deny_cidrs[0].origin, "profiles.default.deny_cidrs");
  EXPECT_EQ(effective.deny_cidrs[1].cidr, *policy::parse_cidr("10.1.0.0/16"));
  EXPECT_EQ(effective.deny_cidrs[1].origin, "sandboxes.ci.deny_cidrs");
}

TEST(ConfigLoad, RequestRulesMergeProfileFirstAndReachThePolicy) {
  const Config c = load_config_from_string(R"(
[profiles.default]
allow = ["api.github.com", "github.com"]
inspect = ["*.example.com:8443"]

[[profiles.default.http_rules]]
hosts = ["api.github.com"]
methods = ["GET", "HEAD"]
paths = ["/repos/acme/**", "/user"]
path_case = "insensitive"
action = "allow"

[[profiles.default.git]]
repos = ["github.com/acme/*"]
allow = ["fetch"]

[sandboxes.ci]
token = "t"
profile = "default"
allow = ["registry.npmjs.org"]
inspect = ["registry.npmjs.org"]
http_rules = [{ hosts = ["api.github.com"], action = "deny", mode = "audit" }]

[[sandboxes.ci.git]]
repos = ["github.com/acme/widget", "GitHub.com/Acme-Open/**.git"]
allow = ["fetch", "push"]
mode = "audit"

[interception]
ca_cert = "ca.pem"
ca_key = "ca.key"
)",
                                           kFile);
  const Sandbox* ci = c.find_sandbox("ci");
  ASSERT_NE(ci, nullptr);
  const policy::SandboxSpec spec = policy::merged(ci->spec);
  ASSERT_EQ(spec.inspect.size(), 2u);
  EXPECT_EQ(spec.inspect[0].pattern, *policy::parse_host_pattern("*.example.com:8443"));
  EXPECT_EQ(spec.inspect[0].origin, "profiles.default.inspect");
  EXPECT_EQ(spec.inspect[1].origin, "sandboxes.ci.inspect");

  ASSERT_EQ(spec.http_rules.size(), 2u);
  const policy::HttpRule& first = spec.http_rules[0];
  EXPECT_EQ(first.origin, "profiles.default.http_rules[0]");
  ASSERT_EQ(first.hosts.size(), 1u);
  EXPECT_EQ(first.hosts[0], *policy::parse_host_pattern("api.github.com"));
  EXPECT_EQ(first.methods, (std::vector<std::string>{"GET", "HEAD"}));
  ASSERT_EQ(first.paths.size(), 2u);
  EXPECT_EQ(first.paths[1].text(), "/user");
  EXPECT_EQ(first.path_case, policy::PathCase::insensitive);
  EXPECT_TRUE(first.allow);
  EXPECT_EQ(first.mode, policy::RuleMode::enforce);
  const policy::HttpRule& second = spec.http_rules[1];
  EXPECT_EQ(second.origin, "sandboxes.ci.http_rules[0]");
  EXPECT_TRUE(second.methods.empty());
  EXPECT_TRUE(second.paths.empty());
  EXPECT_FALSE(second.path_case);  // the request's host decides
  EXPECT_FALSE(second.allow);
  EXPECT_EQ(second.mode, policy::RuleMode::audit);

  ASSERT_EQ(spec.git_rules.size(), 2u);
  EXPECT_EQ(spec.git_rules[0].origin, "profiles.default.git[0]");
  EXPECT_TRUE(spec.git_rules[0].fetch);
  EXPECT_FALSE(spec.git_rules[0].push);
  const policy::GitRule& own = spec.git_rules[1];
  EXPECT_EQ(own.origin, "sandboxes.ci.git[0]");
  ASSERT_EQ(own.repos.size(), 2u);
  EXPECT_EQ(own.repos[1].to_string(), "github.com/acme-open/**");
  EXPECT_TRUE(own.fetch && own.push);
  EXPECT_EQ(own.mode, policy::RuleMode::audit);

  const auto policy = c.build_policy();
  const auto request = [&](const char* host, const char* method, const char* target) {
    const policy::Host h = policy::normalize_host(host);
    policy::RequestFacts f;
    f.sandbox = "ci";
    f.host = &h;
    f.port = 443;
    f.method = method;
    f.path = target;
    return policy::decide_request(*policy, f);
  };
  EXPECT_EQ(request("api.github.com", "GET", "/repos/acme/x").rule,
            "profiles.default.http_rules[0]");
  const auto audited = request("api.github.com", "DELETE", "/repos/acme/x");
  EXPECT_TRUE(audited.allowed);
  EXPECT_TRUE(audited.audit);
  EXPECT_EQ(audited.reason, policy::Reason::denied_by_http_rule);
  EXPECT_EQ(audited.rule, "sandboxes.ci.http_rules[0]");
  // The profile's git rule matches first: push stays refused, though the sandbox's allows it.
  const auto push = request("github.com", "POST", "/acme/widget.git/git-receive-pack");
  EXPECT_FALSE(push.allowed);
  EXPECT_EQ(push.reason, policy::Reason::git_not_allowed);
  EXPECT_EQ(push.rule, "profiles.default.git[0]:github.com/acme/*");
  EXPECT_TRUE(request("github.com", "POST", "/acme-open/a/b/git-receive-pack").allowed);
  EXPECT_TRUE(policy->inspects("ci", policy::normalize_host("registry.npmjs.org"), 443));
  EXPECT_TRUE(policy->inspects("ci", policy::normalize_host("a.example.com"), 8443));
  EXPECT_FALSE(policy->inspects("ci", policy::normalize_host("a.example.com"), 443));
}

// The suggestion of a refusal by the request rules, added where it says, allows the request.
TEST(ConfigLoad, SuggestedRequestRulesAllowWhatWasRefused) {
  const std::string base = R"(
[interception]
ca_cert = "ca.pem"
ca_key = "ca.key"

[profiles.default]
allow = ["api.github.com", "github.com"]
[[profiles.default.http_rules]]
hosts = ["api.github.com"]
methods = ["GET"]
action = "allow"
[[profiles.default.git]]
repos = ["github.com/acme/*"]
allow = ["fetch"]

[sandboxes.ci]
token = "t"
profile = "default"
)";
  struct Row {
    const char* host;
    const char* method;
    const char* target;
  };
  const Row rows[] = {
      {"api.github.com", "POST", "/repos/acme/widget/issues"},
      {"github.com", "GET", "/other/tool.git/info/refs?service=git-upload-pack"},
      {"github.com", "POST", "/other/tool.git/git-receive-pack"},
  };
  for (const Row& row : rows) {
    const policy::Host h = policy::normalize_host(row.host);
    policy::RequestFacts f;
    f.sandbox = "ci";
    f.host = &h;
    f.port = 443;
    f.method = row.method;
    f.path = row.target;
    const Config loaded = load_config_from_string(base, kFile);
    const policy::Decision refused = policy::decide_request(*loaded.build_policy(), f);
    ASSERT_FALSE(refused.allowed) << row.target;
    const policy::Suggestion s =
        policy::suggest(home_of(*loaded.find_sandbox("ci")), h, 443, refused);
    ASSERT_TRUE(s.block) << row.target << ": " << s.text();
    // An array-of-tables block, at the end of the file, after the rules the table has.
    EXPECT_TRUE(s.text().starts_with("[[sandboxes.ci.")) << s.text();
    const auto fixed = load_config_from_string(base + s.toml + "\n", kFile).build_policy();
    EXPECT_TRUE(policy::decide_request(*fixed, f).allowed) << s.text();
  }
}

TEST(ConfigLoad, HostServicesMergeProfileFirstAndPoolReachesThePolicy) {
  const Config c = load_config_from_string(R"(
[launcher]
pool = "10.77.0.0/16"

[profiles.dev]
allow_host_services = ["10.77.0.1:8080"]
allow_cidrs = ["10.0.0.0/8"]

[sandboxes.ci]
token = "t"
profile = "dev"
allow_host_services = ["[fd00::1]:5432", "192.168.1.1:22"]
)",
                                           kFile);
  const Sandbox* ci = c.find_sandbox("ci");
  ASSERT_NE(ci, nullptr);
  const auto services = policy::merged(ci->spec).allow_host_services;
  ASSERT_EQ(services.size(), 3u);
  EXPECT_EQ(policy::endpoint_text(services[0].service), "10.77.0.1:8080");
  EXPECT_EQ(services[0].origin, "profiles.dev.allow_host_services");
  EXPECT_EQ(policy::endpoint_text(services[1].service), "[fd00::1]:5432");
  EXPECT_EQ(services[2].origin, "sandboxes.ci.allow_host_services");

  const auto policy = c.build_policy();
  const auto decide = [&](const char* host, std::uint16_t port) {
    return policy->decide({"ci", host, port, policy::EntryMode::connect});
  };
  EXPECT_EQ(decide("10.77.3.1", 443).reason, policy::Reason::host_address);      // the pool
  EXPECT_EQ(decide("10.201.0.1", 443).reason, policy::Reason::allowed_by_cidr);  // not the pool
  EXPECT_EQ(decide("10.77.0.1", 8080).reason, policy::Reason::allowed_host_service);
}

TEST(ConfigLoad, SandboxPortsReplaceProfilePortsAndDefaultTo80And443) {
  const Config c = load_config_from_string(kFullConfig, kFile);
  const Sandbox* agent = c.find_sandbox("agent.2");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->spec.ports, (std::vector<std::uint16_t>{80}));
  EXPECT_TRUE(agent->spec.allow_all_hosts);
  EXPECT_EQ(policy::merged(agent->spec).allow.size(), 2u);  // the profile's only

  const Sandbox* lone = c.find_sandbox("lone");
  ASSERT_NE(lone, nullptr);
  EXPECT_EQ(lone->profile, "");
  EXPECT_EQ(lone->spec.ports, (std::vector<std::uint16_t>{80, 443}));
  EXPECT_TRUE(lone->spec.allow.empty());

  EXPECT_EQ(c.find_sandbox("nope"), nullptr);
  EXPECT_EQ(c.find_sandbox(""), nullptr);
}

TEST(ConfigLoad, EmptyFileGivesDefaults) {
  const Config c = load_config_from_string("", kFile);
  const Limits defaults;
  EXPECT_EQ(c.workers, 0u);
  ASSERT_EQ(c.listeners.explicit_proxy.size(), 1u);
  EXPECT_EQ(c.listeners.explicit_proxy[0].text, "127.0.0.1:3128");
  EXPECT_EQ(c.listeners.explicit_proxy[0].port, 3128);
  EXPECT_FALSE(c.listeners.admin.has_value());
  EXPECT_EQ(c.limits.max_header_bytes, defaults.max_header_bytes);
  EXPECT_EQ(c.limits.idle_timeout, defaults.idle_timeout);
  EXPECT_TRUE(c.dns.servers.empty());
  EXPECT_EQ(c.dns.max_ttl, std::chrono::seconds(300));
  EXPECT_EQ(c.dns.denied_names, Dns::DeniedNames::sink);
  EXPECT_EQ(c.dns.sink_address, *policy::parse_ip_literal("192.0.2.254"));
  EXPECT_EQ(c.logging.audit, "stdout");
  EXPECT_TRUE(c.logging.audit_chain);
  EXPECT_EQ(c.logging.audit_signing_key, "");
  EXPECT_EQ(c.logging.audit_checkpoint_lines, 1000u);
  EXPECT_EQ(c.logging.audit_checkpoint_interval, std::chrono::seconds(60));
  EXPECT_EQ(c.sandboxes_dir, "/nonexistent/sandboxes.d");  // default; absent is fine
  EXPECT_TRUE(c.sandboxes.empty());
}

TEST(ConfigLoad, EmptyExplicitListListensNowhere) {
  const Config c = load_config_from_string("[listeners]\nexplicit = []\n", kFile);
  EXPECT_TRUE(c.listeners.explicit_proxy.empty());
}

TEST(ConfigLoad, BuildPolicyDecidesWithMergedRules) {
  const Config c = load_config_from_string(kFullConfig, kFile);
  const auto policy = c.build_policy();
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->sandbox_count(), 3u);
  EXPECT_TRUE(policy->has_sandbox("ci"));
  const auto allowed =
      policy->decide({"ci", "registry.npmjs.org", 443, policy::EntryMode::connect});
  EXPECT_TRUE(allowed.allowed) << allowed.rule;
  EXPECT_EQ(allowed.rule, "sandboxes.ci.allow:registry.npmjs.org");
  const auto from_profile = policy->decide({"ci", "api.github.com", 443, policy::EntryMode::tls});
  EXPECT_TRUE(from_profile.allowed);
  EXPECT_EQ(from_profile.rule, "profiles.default.allow:*.github.com:443");
  EXPECT_FALSE(policy->decide({"ci", "gist.github.com", 443, policy::EntryMode::tls}).allowed);
  EXPECT_FALSE(policy->decide({"lone", "github.com", 443, policy::EntryMode::tls}).allowed);
}

TEST(ConfigError, ToStringOmitsUnknownPositionAndEmptyKey) {
  EXPECT_EQ((ConfigError{"a.toml", 3, 7, "limits.x", "bad"}).to_string(),
            "a.toml:3:7: limits.x: bad");
  EXPECT_EQ((ConfigError{"a.toml", 0, 0, "id", "missing required key"}).to_string(),
            "a.toml: id: missing required key");
  EXPECT_EQ((ConfigError{"a.toml", 1, 2, "", "syntax"}).to_string(), "a.toml:1:2: syntax");
}

// ---------------------------------------------------------------------------------------------
// One error per row: the exact text, line, column and key.

struct ErrorCase {
  std::string name;
  std::string toml;
  std::uint32_t line;
  std::uint32_t column;
  std::string key;
  std::string message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.name;
}

// Tokens for sandbox tables in rows that are about something else.
const std::string kSandboxHead = "[sandboxes.ci]\ntoken = \"t\"\n";
const std::string kHttpRule = "[[profiles.p.http_rules]]\n";

std::vector<ErrorCase> error_cases() {
  const std::string range_limit = "must be between 1 and 2147483647, got ";
  return {
      // TOML syntax: toml++'s own description at its position.
      {"SyntaxMissingValue", "workers = \n", 1, 11, "",
       "Error while parsing key-value pair: expected value, saw '\\n'"},
      {"SyntaxDuplicateKey", "workers = 1\nworkers = 2\n", 2, 11, "",
       "Error while parsing key-value pair: cannot redefine existing integer 'workers'"},
      {"SyntaxUnclosedHeader", "workers = 1\n[limits\n", 2, 8, "",
       "Error while parsing table header: expected ']', saw '\\n'"},

      // Unknown keys, with a suggestion when one is close.
      {"UnknownTopLevelKey", "worker = 4\n", 1, 1, "worker",
       "unknown key \"worker\"; did you mean \"workers\"?"},
      {"UnknownProfileKey", "[profiles.default]\nalow = []\n", 2, 1, "profiles.default.alow",
       "unknown key \"alow\"; did you mean \"allow\"?"},
      {"UnknownKeyNoSuggestion", "[limits]\nfoo_bar_baz = 1\n", 2, 1, "limits.foo_bar_baz",
       "unknown key \"foo_bar_baz\""},
      {"UnknownSandboxKey", kSandboxHead + "allow_all_host = true\n", 3, 1,
       "sandboxes.ci.allow_all_host",
       "unknown key \"allow_all_host\"; did you mean \"allow_all_hosts\"?"},
      {"UnknownSandboxIdKey", kSandboxHead + "id = \"ci\"\n", 3, 1, "sandboxes.ci.id",
       "unknown key \"id\""},
      // Held destinations.
      {"UnlistedNeitherDenyNorHold", "[profiles.p]\nunlisted = \"ask\"\n", 2, 12,
       "profiles.p.unlisted", "expected \"deny\" or \"hold\", got \"ask\""},
      {"AdminTokenFileRelative", "[listeners]\nadmin_token_file = \"admin.token\"\n", 2, 20,
       "listeners.admin_token_file", "must be an absolute path"},
      {"UnknownListenersKey", "[listeners]\nexplict = []\n", 2, 1, "listeners.explict",
       "unknown key \"explict\"; did you mean \"explicit\"?"},
      {"UnknownDnsKey", "[dns]\nserver = []\n", 2, 1, "dns.server",
       "unknown key \"server\"; did you mean \"servers\"?"},
      {"UnknownLogKey", "[log]\naduit = \"off\"\n", 2, 1, "log.aduit",
       "unknown key \"aduit\"; did you mean \"audit\"?"},
      {"UnknownQuotedKey", "\"my key\" = 1\n", 1, 1, "\"my key\"", "unknown key \"my key\""},

      // Wrong types.
      {"WorkersString", "workers = \"4\"\n", 1, 11, "workers", "expected an integer, got string"},
      {"WorkersFloat", "workers = 4.0\n", 1, 11, "workers", "expected an integer, got float"},
      {"AllowNotArray", "[profiles.default]\nallow = \"github.com\"\n", 2, 9,
       "profiles.default.allow", "expected an array of strings, got string"},
      {"AllowElementNotString", "[profiles.default]\nallow = [\"a.com\", 5]\n", 2, 19,
       "profiles.default.allow[1]", "expected a string, got integer"},
      {"ListenersNotTable", "listeners = []\n", 1, 13, "listeners", "expected a table, got array"},
      {"ProfilesArrayOfTables", "[[profiles]]\n", 1, 1, "profiles", "expected a table, got array"},
      {"SandboxNotTable", "[sandboxes]\nci = \"x\"\n", 2, 6, "sandboxes.ci",
       "expected a table, got string"},
      {"AllowAllHostsString", kSandboxHead + "allow_all_hosts = \"yes\"\n", 3, 19,
       "sandboxes.ci.allow_all_hosts", "expected a boolean, got string"},
      {"SandboxesDirInteger", "sandboxes_dir = 1\n", 1, 17, "sandboxes_dir",
       "expected a string, got integer"},
      {"PortsNotArray", "[profiles.p]\nports = 443\n", 2, 9, "profiles.p.ports",
       "expected an array of integers, got integer"},
      {"PortNotInteger", "[profiles.p]\nports = [\"443\"]\n", 2, 10, "profiles.p.ports[0]",
       "expected an integer, got string"},
      {"TokenInteger", "[sandboxes.ci]\ntoken = 5\n", 2, 9, "sandboxes.ci.token",
       "expected a string, got integer"},
      {"AuditBoolean", "[log]\naudit = false\n", 2, 9, "log.audit",
       "expected a string, got boolean"},
      {"AuditChainString", "[log]\naudit_chain = \"yes\"\n", 2, 15, "log.audit_chain",
       "expected a boolean, got string"},
      {"AuditSigningKeyEmpty", "[log]\naudit_signing_key = \"\"\n", 2, 21, "log.audit_signing_key",
       "must not be empty"},
      {"AuditCheckpointLinesZero", "[log]\naudit_checkpoint_lines = 0\n", 2, 26,
       "log.audit_checkpoint_lines", "must be between 1 and 2147483647, got 0"},
      {"AuditCheckpointSecondsString", "[log]\naudit_checkpoint_seconds = \"60s\"\n", 2, 28,
       "log.audit_checkpoint_seconds", "expected an integer, got string"},
      {"AuditSigningKeyWithoutChain", "[log]\naudit_chain = false\naudit_signing_key = \"k.pem\"\n",
       3, 21, "log.audit_signing_key",
       "signs checkpoints of the hash chain, which audit_chain = false turns off"},
      {"DnsHostsNotArray", "[dns.hosts]\n\"a.test\" = \"127.0.0.1\"\n", 2, 12,
       "dns.hosts.\"a.test\"", "expected an array of strings, got string"},

      // Host patterns and CIDRs: the policy parser's reason, prefixed with the value.
      {"BadAllowPattern", "[profiles.p]\nallow = [\"ok.com\", \"foo.*.com\"]\n", 2, 20,
       "profiles.p.allow[1]", host_pattern_message("foo.*.com")},
      {"IpLiteralDenyPattern", kSandboxHead + "deny = [\"1.2.3.4\"]\n", 3, 9,
       "sandboxes.ci.deny[0]", host_pattern_message("1.2.3.4")},
      {"CidrHostBitsSet", "[profiles.p]\nallow_cidrs = [\"10.0.0.1/8\"]\n", 2, 16,
       "profiles.p.allow_cidrs[0]", cidr_message("10.0.0.1/8")},
      {"CidrPrefixTooLong", kSandboxHead + "deny_cidrs = [\"10.0.0.0/33\"]\n", 3, 15,
       "sandboxes.ci.deny_cidrs[0]", cidr_message("10.0.0.0/33")},
      {"OpaqueWithoutPort", "[profiles.p]\nopaque = [\"ssh.example.com\"]\n", 2, 11,
       "profiles.p.opaque[0]",
       "invalid opaque destination \"ssh.example.com\": use an exact host name and a port, e.g. "
       "\"ssh.example.com:443\""},
      {"OpaqueWildcard", kSandboxHead + "opaque = [\"*.example.com:443\"]\n", 3, 11,
       "sandboxes.ci.opaque[0]",
       "invalid opaque destination \"*.example.com:443\": use an exact host name and a port, "
       "e.g. \"ssh.example.com:443\""},

      {"DnsDeniedNamesUnknown", "[dns]\ndenied_names = \"drop\"\n", 2, 16, "dns.denied_names",
       "expected \"sink\" or \"refused\", got \"drop\""},
      {"DnsSinkAddressV6", "[dns]\nsink_address = \"2001:db8::1\"\n", 2, 16, "dns.sink_address",
       "\"2001:db8::1\" cannot be dialled through the launcher's redirect; use an IPv4 unicast "
       "address no sandbox needs, e.g. \"192.0.2.254\""},
      {"DnsSinkAddressLoopback", "[dns]\nsink_address = \"127.0.0.1\"\n", 2, 16, "dns.sink_address",
       "\"127.0.0.1\" cannot be dialled through the launcher's redirect; use an IPv4 unicast "
       "address no sandbox needs, e.g. \"192.0.2.254\""},
      // dns.hosts.
      {"DnsHostBadAddress", "[dns.hosts]\n\"origin.test\" = [\"127.1\"]\n", 2, 18,
       "dns.hosts.\"origin.test\"[0]",
       "invalid IP address \"127.1\": use dotted-quad IPv4 or standard IPv6 text"},
      {"DnsHostNoAddress", "[dns.hosts]\n\"origin.test\" = []\n", 2, 17,
       "dns.hosts.\"origin.test\"", "expected at least one address"},
      {"DnsHostIsAddress", "[dns.hosts]\n\"127.0.0.1\" = [\"127.0.0.1\"]\n", 2, 1,
       "dns.hosts.\"127.0.0.1\"",
       "\"127.0.0.1\" is an IP address; static answers are for host names"},
      {"DnsHostBadName", "[dns.hosts]\n\"bad..name\" = [\"127.0.0.1\"]\n", 2, 1,
       "dns.hosts.\"bad..name\"", host_name_message("bad..name")},
      {"DnsHostDuplicateAfterNormalising",
       "[dns.hosts]\n\"a.test\" = [\"127.0.0.1\"]\n\"A.TEST.\" = [\"127.0.0.2\"]\n", 3, 1,
       "dns.hosts.\"A.TEST.\"",
       "duplicate host name \"a.test\", first written at " + kFile + ":2:1"},

      // dns.servers.
      {"DnsServerPortZero", "[dns]\nservers = [\"192.0.2.1:0\"]\n", 2, 12, "dns.servers[0]",
       "invalid DNS server \"192.0.2.1:0\": port must be between 1 and 65535"},
      {"DnsServerName", "[dns]\nservers = [\"dns.google\"]\n", 2, 12, "dns.servers[0]",
       "invalid DNS server \"dns.google\": expected \"ip\", \"ip:port\" or \"[ipv6]:port\""},
      {"DnsServerBracketedV4", "[dns]\nservers = [\"[192.0.2.1]:53\"]\n", 2, 12, "dns.servers[0]",
       "invalid DNS server \"[192.0.2.1]:53\": \"192.0.2.1\" is not an IP address"},

      // Listen addresses.
      {"ListenNoPort", "[listeners]\nexplicit = [\"127.0.0.1\"]\n", 2, 13, "listeners.explicit[0]",
       "invalid listen address \"127.0.0.1\": expected \"ip:port\" or \"[ipv6]:port\""},
      {"ListenHostName", "[listeners]\nexplicit = [\"localhost:3128\"]\n", 2, 13,
       "listeners.explicit[0]",
       "invalid listen address \"localhost:3128\": \"localhost\" is not an IP address"},
      {"ListenSloppyIpv4", "[listeners]\nexplicit = [\"127.1:3128\"]\n", 2, 13,
       "listeners.explicit[0]",
       "invalid listen address \"127.1:3128\": \"127.1\" is not an IP address"},
      {"ListenUnbracketedV6", "[listeners]\nexplicit = [\"::1:3128\"]\n", 2, 13,
       "listeners.explicit[0]",
       "invalid listen address \"::1:3128\": write an IPv6 address in brackets, e.g. "
       "\"[::1]:3128\""},
      {"ListenPortTooBig", "[listeners]\nexplicit = [\"127.0.0.1:65536\"]\n", 2, 13,
       "listeners.explicit[0]",
       "invalid listen address \"127.0.0.1:65536\": port must be between 0 and 65535"},
      {"AdminPortName", "[listeners]\nadmin = \"127.0.0.1:http\"\n", 2, 9, "listeners.admin",
       "invalid listen address \"127.0.0.1:http\": port must be between 0 and 65535"},
      {"AdminSameAsExplicit",
       "[listeners]\nexplicit = [\"127.0.0.1:3128\"]\nadmin = \"127.0.0.1:3128\"\n", 3, 9,
       "listeners.admin",
       "duplicate listen address \"127.0.0.1:3128\", also at " + kFile + ":2:13"},

      // Ports and limits out of range.
      {"RulePortZero", "[profiles.p]\nports = [0]\n", 2, 10, "profiles.p.ports[0]",
       "must be between 1 and 65535, got 0"},
      {"RulePortTooBig", kSandboxHead + "ports = [443, 65536]\n", 3, 15, "sandboxes.ci.ports[1]",
       "must be between 1 and 65535, got 65536"},
      {"LimitZero", "[limits]\nmax_connections = 0\n", 2, 19, "limits.max_connections",
       range_limit + "0"},
      {"LimitNegative", "[limits]\nheader_timeout_ms = -5\n", 2, 21, "limits.header_timeout_ms",
       range_limit + "-5"},
      {"LimitTooBig", "[limits]\nmax_header_bytes = 4294967296\n", 2, 20, "limits.max_header_bytes",
       range_limit + "4294967296"},
      {"DnsQueryBudgetZero", "[limits]\nmax_dns_queries_per_sandbox = 0\n", 2, 31,
       "limits.max_dns_queries_per_sandbox", "must be between 1 and 512, got 0"},
      {"DnsQueryBudgetOverTheWorkerBound", "[limits]\nmax_dns_queries_per_sandbox = 513\n", 2, 31,
       "limits.max_dns_queries_per_sandbox", "must be between 1 and 512, got 513"},
      {"WorkersNegative", "workers = -1\n", 1, 11, "workers", "must be between 0 and 1024, got -1"},
      {"WorkersTooMany", "workers = 5000\n", 1, 11, "workers",
       "must be between 0 and 1024, got 5000"},
      {"DnsTimeoutZero", "[dns]\ntimeout_ms = 0\n", 2, 14, "dns.timeout_ms", range_limit + "0"},
      {"DnsMaxTtlNegative", "[dns]\nmax_ttl_s = -1\n", 2, 13, "dns.max_ttl_s",
       "must be between 0 and 2147483647, got -1"},

      // Profiles.
      {"ProfileMisspelt", "[profiles.default]\n" + kSandboxHead + "profile = \"defualt\"\n", 4, 11,
       "sandboxes.ci.profile", "unknown profile \"defualt\"; did you mean \"default\"?"},
      {"ProfileMissing", kSandboxHead + "profile = \"nope\"\n", 3, 11, "sandboxes.ci.profile",
       "unknown profile \"nope\""},
      {"ProfileBadName", "[profiles.\"bad name\"]\n", 1, 11, "profiles.\"bad name\"",
       "invalid profile name \"bad name\": use 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'"},

      // Sandbox ids and tokens.
      {"SandboxIdWithSpace", "[sandboxes.\"bad id\"]\ntoken = \"t\"\n", 1, 12,
       "sandboxes.\"bad id\"",
       "invalid sandbox id \"bad id\": use 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'"},
      {"SandboxIdTooLong", "[sandboxes." + std::string(65, 'a') + "]\ntoken = \"t\"\n", 1, 12,
       "sandboxes." + std::string(65, 'a'),
       "invalid sandbox id \"" + std::string(65, 'a') +
           "\": use 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'"},
      {"TokenMissing", "workers = 1\n[sandboxes.ci]\nallow = []\n", 2, 1, "sandboxes.ci.token",
       "missing required key (a sandbox needs a token, sources, or both)"},
      {"SourceInvalid", "[sandboxes.ci]\nsources = [\"10.0.0.300\"]\n", 2, 12,
       "sandboxes.ci.sources[0]",
       "invalid IP address \"10.0.0.300\": use dotted-quad IPv4 or standard IPv6 text"},
      // allow_host_services: exact "ip:port" of an address a connection can go to.
      {"HostServiceNoPort", kSandboxHead + "allow_host_services = [\"10.201.0.1\"]\n", 3, 24,
       "sandboxes.ci.allow_host_services[0]",
       "invalid host service \"10.201.0.1\": expected \"ip:port\" or \"[ipv6]:port\""},
      {"HostServicePortZero", kSandboxHead + "allow_host_services = [\"10.201.0.1:0\"]\n", 3, 24,
       "sandboxes.ci.allow_host_services[0]",
       "invalid host service \"10.201.0.1:0\": port must be between 1 and 65535"},
      {"HostServiceName", "[profiles.p]\nallow_host_services = [\"gw.test:80\"]\n", 2, 24,
       "profiles.p.allow_host_services[0]",
       "invalid host service \"gw.test:80\": \"gw.test\" is not an IP address"},
      {"HostServiceUnbracketedV6", kSandboxHead + "allow_host_services = [\"fd00::1:80\"]\n", 3, 24,
       "sandboxes.ci.allow_host_services[0]",
       "invalid host service \"fd00::1:80\": expected \"ip:port\" or \"[ipv6]:port\""},
      {"HostServiceBracketedV4", kSandboxHead + "allow_host_services = [\"[10.0.0.1]:80\"]\n", 3,
       24, "sandboxes.ci.allow_host_services[0]",
       "invalid host service \"[10.0.0.1]:80\": \"10.0.0.1\" is not an IP address"},
      {"HostServiceMetadata",
       kSandboxHead + "allow_host_services = [\"10.0.0.1:80\", \"169.254.169.254:80\"]\n", 3, 39,
       "sandboxes.ci.allow_host_services[1]",
       "invalid host service \"169.254.169.254:80\": metadata addresses are always refused and "
       "cannot be opened"},
      {"HostServiceMapped", kSandboxHead + "allow_host_services = [\"[::ffff:10.201.0.1]:80\"]\n",
       3, 24, "sandboxes.ci.allow_host_services[0]",
       "invalid host service \"[::ffff:10.201.0.1]:80\": write the IPv4 address itself "
       "(\"10.201.0.1:80\")"},
      {"HostServiceNotArray", kSandboxHead + "allow_host_services = \"10.201.0.1:80\"\n", 3, 23,
       "sandboxes.ci.allow_host_services", "expected an array of strings, got string"},
      {"TokenEmpty", "[sandboxes.ci]\ntoken = \"\"\n", 2, 9, "sandboxes.ci.token",
       "must not be empty"},
      {"TokenWithSpace", "[sandboxes.ci]\ntoken = \"two words\"\n", 2, 9, "sandboxes.ci.token",
       "must be printable ASCII without spaces or control characters"},

      // inspect, http_rules and git.
      {"InspectBadPattern", kSandboxHead + "inspect = [\"a.test\", \"*\"]\n", 3, 22,
       "sandboxes.ci.inspect[1]", host_pattern_message("*")},
      {"InspectNotArray", "[profiles.p]\ninspect = \"a.test\"\n", 2, 11, "profiles.p.inspect",
       "expected an array of strings, got string"},
      {"HttpRulesNotArray", kSandboxHead + "http_rules = \"x\"\n", 3, 14, "sandboxes.ci.http_rules",
       "expected an array of tables, got string"},
      {"HttpRuleNotTable", kSandboxHead + "http_rules = [\"x\"]\n", 3, 15,
       "sandboxes.ci.http_rules[0]", "expected a table, got string"},
      {"HttpRuleUnknownKey",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"allow\"\nmethod = [\"GET\"]\n", 4, 1,
       "profiles.p.http_rules[0].method", "unknown key \"method\"; did you mean \"methods\"?"},
      {"HttpRuleMissingHosts", kHttpRule + "action = \"allow\"\n", 1, 1,
       "profiles.p.http_rules[0].hosts", "missing required key"},
      {"HttpRuleEmptyHosts", kHttpRule + "hosts = []\naction = \"allow\"\n", 2, 9,
       "profiles.p.http_rules[0].hosts", "must not be empty"},
      {"HttpRuleBadHost", kHttpRule + "hosts = [\"1.2.3.4\"]\naction = \"allow\"\n", 2, 10,
       "profiles.p.http_rules[0].hosts[0]", host_pattern_message("1.2.3.4")},
      {"HttpRuleMissingAction", kHttpRule + "hosts = [\"a.test\"]\n", 1, 1,
       "profiles.p.http_rules[0].action", "missing required key"},
      {"HttpRuleBadAction", kHttpRule + "hosts = [\"a.test\"]\naction = \"permit\"\n", 3, 10,
       "profiles.p.http_rules[0].action", "expected \"allow\" or \"deny\", got \"permit\""},
      {"HttpRuleBadMode", kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\nmode = \"log\"\n",
       4, 8, "profiles.p.http_rules[0].mode", "expected \"enforce\" or \"audit\", got \"log\""},
      {"HttpRuleLowercaseMethod",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\nmethods = [\"get\"]\n", 4, 12,
       "profiles.p.http_rules[0].methods[0]",
       "invalid method \"get\": methods are written in uppercase (a rule matches any case); "
       "write \"GET\""},
      {"HttpRuleBadPathCase",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\npath_case = \"ignore\"\n", 4, 13,
       "profiles.p.http_rules[0].path_case",
       "expected \"sensitive\" or \"insensitive\", got \"ignore\""},
      {"HttpRuleMethodNotAToken",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\nmethods = [\"GET\", \"GET /\"]\n", 4,
       19, "profiles.p.http_rules[0].methods[1]",
       "invalid method \"GET /\": not an HTTP method token"},
      {"HttpRuleEmptyMethods",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\nmethods = []\n", 4, 11,
       "profiles.p.http_rules[0].methods", "must not be empty; leave it out to match any method"},
      {"HttpRuleEmptyPaths", kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\npaths = []\n", 4,
       9, "profiles.p.http_rules[0].paths", "must not be empty; leave it out to match any path"},
      {"HttpRuleGlobWithoutSlash",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\npaths = [\"repos/*\"]\n", 4, 10,
       "profiles.p.http_rules[0].paths[0]",
       "invalid path glob \"repos/*\": a path glob starts with '/'"},
      {"HttpRuleGlobPartialDoubleStar",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\npaths = [\"/a/**b\"]\n", 4, 10,
       "profiles.p.http_rules[0].paths[0]",
       "invalid path glob \"/a/**b\": \"**\" must be a whole segment, as in \"/repos/**\""},
      {"HttpRuleGlobEncodedSlash",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\npaths = [\"/a%2Fb\"]\n", 4, 10,
       "profiles.p.http_rules[0].paths[0]",
       "invalid path glob \"/a%2Fb\": holds an encoded '/' or '\\', a control character, a "
       "';', a '#' or an invalid escape, which no canonical path holds"},
      {"HttpRuleSecondTableIndexed",
       kHttpRule + "hosts = [\"a.test\"]\naction = \"deny\"\n" + kHttpRule +
           "hosts = [\"a.test\"]\naction = \"deny\"\npaths = [\"/a/../b\"]\n",
       7, 10, "profiles.p.http_rules[1].paths[0]",
       "invalid path glob \"/a/../b\": \".\" and \"..\" segments never match a canonical path"},
      {"GitUnknownKey",
       kSandboxHead + "[[sandboxes.ci.git]]\nrepos = [\"github.com/a/*\"]\nallow = []\nrepo = 1\n",
       6, 1, "sandboxes.ci.git[0].repo", "unknown key \"repo\"; did you mean \"repos\"?"},
      {"GitMissingAllow", kSandboxHead + "[[sandboxes.ci.git]]\nrepos = [\"github.com/a/*\"]\n", 3,
       1, "sandboxes.ci.git[0].allow",
       "missing required key (allow = [] refuses both fetch and push)"},
      {"GitMissingRepos", kSandboxHead + "[[sandboxes.ci.git]]\nallow = [\"fetch\"]\n", 3, 1,
       "sandboxes.ci.git[0].repos", "missing required key"},
      {"GitBadOperation",
       kSandboxHead + "[[sandboxes.ci.git]]\nrepos = [\"github.com/a/*\"]\nallow = [\"clone\"]\n",
       5, 10, "sandboxes.ci.git[0].allow[0]",
       "invalid git operation \"clone\": expected \"fetch\" or \"push\""},
      {"GitRepoWithoutPath",
       kSandboxHead + "[[sandboxes.ci.git]]\nrepos = [\"github.com\"]\nallow = [\"fetch\"]\n", 4,
       10, "sandboxes.ci.git[0].repos[0]",
       "invalid repository pattern \"github.com\": expected \"host/repository\", e.g. "
       "\"github.com/acme/*\""},
      {"GitBadMode",
       kSandboxHead +
           "git = [{ repos = [\"github.com/a/*\"], allow = [\"push\"], mode = \"Audit\" }]\n",
       3, 63, "sandboxes.ci.git[0].mode", "expected \"enforce\" or \"audit\", got \"Audit\""},

      // Paths.
      {"AuditEmpty", "[log]\naudit = \"\"\n", 2, 9, "log.audit",
       "expected \"stdout\", \"stderr\", \"off\" or a file path, got an empty string"},
  };
}

// A copied example config names a sandboxes_dir that is not there yet: it holds no sandboxes
// and the daemon makes it at start (tests/integration/cli_test.cpp).
TEST(DropIns, AMissingNamedDirectoryHoldsNoSandboxes) {
  const Config c = load_config_from_string("sandboxes_dir = \"drop-ins\"\n", kFile);
  EXPECT_EQ(c.sandboxes_dir, "/nonexistent/drop-ins");
  EXPECT_TRUE(c.sandboxes_dir_named);
  EXPECT_EQ(c.sandboxes.size(), 0u);
  EXPECT_FALSE(load_config_from_string("", kFile).sandboxes_dir_named);
}

class ConfigErrorCase : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConfigErrorCase, ReportsExactlyThisError) {
  const ErrorCase& c = GetParam();
  const auto errors = errors_of(c.toml);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  const ConfigError& e = errors[0];
  EXPECT_EQ(e.file, kFile);
  EXPECT_EQ(e.message, c.message);
  EXPECT_EQ(e.key, c.key);
  EXPECT_EQ(e.line, c.line);
  EXPECT_EQ(e.column, c.column);
}

INSTANTIATE_TEST_SUITE_P(Rows, ConfigErrorCase, ::testing::ValuesIn(error_cases()),
                         [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------------------------------------
// Several errors at once

TEST(ConfigErrors, AllErrorsAreCollectedInFileOrder) {
  const auto errors = errors_of(R"([sandboxes.ci]
token = "t"
profile = "nope"

[profiles.p]
alow = ["x.com"]
ports = [0, 70000]

[limits]
max_connections = 0
)");
  ASSERT_EQ(errors.size(), 5u) << dump(errors);
  EXPECT_EQ(errors[0].key, "sandboxes.ci.profile");
  EXPECT_EQ(errors[1].key, "profiles.p.alow");
  EXPECT_EQ(errors[2].key, "profiles.p.ports[0]");
  EXPECT_EQ(errors[3].key, "profiles.p.ports[1]");
  EXPECT_EQ(errors[4].key, "limits.max_connections");
}

TEST(ConfigErrors, WhatListsEveryError) {
  try {
    load_config_from_string("worker = 1\n[limits]\nmax_connections = 0\n", "x.toml");
    FAIL() << "expected ConfigErrors";
  } catch (const ConfigErrors& e) {
    EXPECT_STREQ(e.what(),
                 "x.toml:1:1: worker: unknown key \"worker\"; did you mean \"workers\"?\n"
                 "x.toml:3:19: limits.max_connections: must be between 1 and 2147483647, got 0");
  }
}

TEST(ConfigErrors, MessagesNeverContainTheToken) {
  const auto errors = errors_of("[sandboxes.ci]\ntoken = \"hunter2 secret\"\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string().find("hunter2"), std::string::npos);
}

TEST(ConfigErrors, ControlCharactersAreEscapedInMessages) {
  const auto errors = errors_of("[profiles.p]\nallow = [\"a\\nb.com\"]\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message.find('\n'), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].message.find("\"a\\x0ab.com\""), std::string::npos) << errors[0].message;
}

TEST(LoadConfigFile, MissingFileIsAnError) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.toml").string();
  try {
    load_config(path);
    FAIL() << "expected ConfigErrors";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].to_string(), path + ": cannot read file: No such file or directory");
  }
}

// ---------------------------------------------------------------------------------------------
// Drop-in files

constexpr std::string_view kMainWithDropIns = R"(sandboxes_dir = "sandboxes.d"
[profiles.default]
allow = ["github.com"]

[sandboxes.main-one]
token = "m1"
)";

TEST(DropIns, LoadsEveryTomlFileInNameOrder) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", kMainWithDropIns);
  const std::string b = dir.write("sandboxes.d/b.toml",
                                  "id = \"ci-b\"\ntoken = \"tb\"\nprofile = \"default\"\n"
                                  "allow = [\"npmjs.org\"]\nports = [443]\n");
  const std::string a = dir.write("sandboxes.d/a.toml", "id = \"ci-a\"\ntoken = \"ta\"\n");
  dir.write("sandboxes.d/.hidden.toml", "this is not toml");
  dir.write("sandboxes.d/notes.txt", "this is not toml either");
  dir.write("sandboxes.d/a.toml.tmp", "neither is this");
  fs::create_directories(dir.path() / "sandboxes.d" / "sub.toml");

  const Config c = load_config(main);
  EXPECT_EQ(c.sandboxes_dir, (dir.path() / "sandboxes.d").string());
  ASSERT_EQ(c.sandboxes.size(), 3u);
  const Sandbox* sb = c.find_sandbox("ci-b");
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->file, b);
  EXPECT_EQ(sb->token, "tb");
  EXPECT_EQ(sb->spec.ports, (std::vector<std::uint16_t>{443}));
  ASSERT_EQ(policy::merged(sb->spec).allow.size(), 2u);
  EXPECT_EQ(policy::merged(sb->spec).allow[0].origin, "profiles.default.allow");
  EXPECT_EQ(policy::merged(sb->spec).allow[1].origin, "sandboxes.ci-b.allow");
  ASSERT_NE(c.find_sandbox("ci-a"), nullptr);
  EXPECT_EQ(c.find_sandbox("ci-a")->file, a);
  ASSERT_NE(c.find_sandbox("main-one"), nullptr);
  EXPECT_EQ(c.find_sandbox("main-one")->file, main);
}

// A denial's suggestion names where the operator can add the rule: the sandbox's table, its
// hand-written drop-in, or for a sandbox sandgate-launch registered (its drop-in is the
// launcher's) its profile or the launcher's flag.
TEST(DropIns, SuggestionsNameWhatTheOperatorCanEdit) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", kMainWithDropIns);
  const std::string hand =
      dir.write("sandboxes.d/hand.toml", "id = \"hand\"\nsources = [\"10.77.0.30\"]\n");
  dir.write("sandboxes.d/l1.toml",
            "# written by sandgate-launch; removed by `sandgate-launch down`\nid = \"l1\"\n"
            "profile = \"default\"\nsources = [\"10.201.0.2\"]\nallow = []\n");
  dir.write("sandboxes.d/l2.toml",
            "# written by sandgate-launch; removed by `sandgate-launch down`\nid = \"l2\"\n"
            "sources = [\"10.201.0.6\"]\nallow = []\n");
  const Config c = load_config(main);
  const policy::Host host = policy::normalize_host("x.org");
  const policy::Host address = policy::normalize_host("192.0.2.1");
  policy::Decision no_rule;
  no_rule.reason = policy::Reason::no_matching_rule;
  policy::Decision literal;
  literal.reason = policy::Reason::ip_literal_not_allowed;
  const std::string allow = "allow = [\"x.org:443\"]";
  const std::string cidr = "allow_cidrs = [\"192.0.2.1/32\"]";
  struct Row {
    const char* id;
    bool by_address;
    std::string suggestion;
  };
  const Row rows[] = {
      {"main-one", false, "[sandboxes.main-one] " + allow},
      {"hand", false, hand + ": " + allow},
      {"l1", false, "[profiles.default] " + allow},
      {"l1", true, "[profiles.default] " + cidr},
      {"l2", false, "sandgate-launch --allow \"x.org:443\""},
      {"l2", true, "[profiles.NAME] " + cidr + " (sandgate-launch --profile NAME)"},
      {"gone", false, "sandgate-launch --allow \"x.org:443\""},  // not in this config
  };
  for (const Row& row : rows) {
    const policy::Suggestion s =
        policy::suggest(home_of(c, row.id), row.by_address ? address : host, 443,
                        row.by_address ? literal : no_rule);
    EXPECT_EQ(s.text(), row.suggestion) << row.id;
  }
  // The launcher's flag that allows it too, for a launched sandbox with a profile.
  EXPECT_EQ(policy::suggest(home_of(c, "l1"), host, 443, no_rule).launcher_allow,
            "sandgate-launch --allow \"x.org:443\"");
}

TEST(DropIns, RequestRulesNameKeysInTheDropIn) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", kMainWithDropIns);
  const std::string drop = dir.write("sandboxes.d/r.toml",
                                     "id = \"r\"\ntoken = \"t\"\n"
                                     "inspect = [\"a.test\"]\n"
                                     "[[http_rules]]\nhosts = [\"a.test\"]\naction = \"nope\"\n"
                                     "[[git]]\nrepos = [\"a.test/x\"]\nallow = [\"fetch\"]\n");
  try {
    load_config(main);
    FAIL() << "expected an error";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.errors().size(), 1u) << dump(e.errors());
    EXPECT_EQ(e.errors()[0].file, drop);
    EXPECT_EQ(e.errors()[0].key, "http_rules[0].action");
    EXPECT_EQ(e.errors()[0].line, 6u);
  }
  dir.write("sandboxes.d/r.toml",
            "id = \"r\"\ntoken = \"t\"\n[[http_rules]]\nhosts = [\"a.test\"]\naction = \"deny\"\n");
  // Rules that terminate TLS need the CA.
  try {
    load_config(main);
    FAIL() << "expected an error";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.errors().size(), 1u) << dump(e.errors());
    EXPECT_EQ(e.errors()[0].key, drop + ": sandboxes.r");
    EXPECT_NE(e.errors()[0].message.find("needs [interception]"), std::string::npos);
  }
  dir.write("sandgate.toml",
            std::string(kMainWithDropIns) + "\n[interception]\nca_cert = \"c\"\nca_key = \"k\"\n");
  const Config c = load_config(main);
  const Sandbox* r = c.find_sandbox("r");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->spec.http_rules.size(), 1u);
  EXPECT_EQ(r->spec.http_rules[0].origin, "sandboxes.r.http_rules[0]");
}

TEST(ConfigLoad, InterceptionPathsResolveAgainstTheFileAndDefaultsHold) {
  const Config c = load_config_from_string(
      "[interception]\nca_cert = \"ca/ca.pem\"\nca_key = \"/etc/ca.key\"\n"
      "leaf_cache_size = 50\nmax_leaf_mints_per_minute = 7\nupstream_ca_file = \"roots.pem\"\n",
      "/etc/sandgate/sandgate.toml");
  EXPECT_TRUE(c.interception.enabled());
  EXPECT_EQ(c.interception.ca_cert, "/etc/sandgate/ca/ca.pem");
  EXPECT_EQ(c.interception.ca_key, "/etc/ca.key");
  EXPECT_EQ(c.interception.upstream_ca_file, "/etc/sandgate/roots.pem");
  EXPECT_EQ(c.interception.leaf_cache_size, 50u);
  EXPECT_EQ(c.interception.leaf_validity, std::chrono::hours(24));
  EXPECT_EQ(c.interception.leaf_renew_before, std::chrono::hours(12));
  EXPECT_EQ(c.interception.max_leaf_mints_per_minute, 7u);
  EXPECT_FALSE(load_config_from_string("", kFile).interception.enabled());
  EXPECT_EQ(load_config_from_string("", kFile).interception.max_leaf_mints_per_minute, 120u);
  const auto errors =
      errors_of("[interception]\nca_cert = \"c\"\nca_key = \"k\"\nmax_leaf_mints_per_minute = 0\n");
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].key, "interception.max_leaf_mints_per_minute");
  EXPECT_EQ(errors[0].line, 4u);
}

TEST(ConfigLoad, InspectTakesAddressesWithTheirPort) {
  const Config c = load_config_from_string(R"([sandboxes.ci]
token = "t"
inspect = ["a.test", "10.0.0.5:443", "[fd00::5]:8443"]

[interception]
ca_cert = "c"
ca_key = "k"
)",
                                           kFile);
  const policy::SandboxSpec& spec = c.find_sandbox("ci")->spec;
  ASSERT_EQ(spec.inspect.size(), 1u);
  ASSERT_EQ(spec.inspect_addresses.size(), 2u);
  EXPECT_EQ(policy::endpoint_text(spec.inspect_addresses[0].service), "10.0.0.5:443");
  EXPECT_EQ(policy::endpoint_text(spec.inspect_addresses[1].service), "[fd00::5]:8443");
  const auto policy = c.build_policy();
  EXPECT_TRUE(policy->inspects("ci", policy::normalize_host("10.0.0.5"), 443));
  EXPECT_FALSE(policy->inspects("ci", policy::normalize_host("10.0.0.5"), 80));
  EXPECT_FALSE(policy->inspects("ci", policy::normalize_host("10.0.0.6"), 443));

  const auto errors = errors_of("[sandboxes.ci]\ntoken = \"t\"\ninspect = [\"10.0.0.5\"]\n");
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].key, "sandboxes.ci.inspect[0]");
  EXPECT_NE(errors[0].message.find("\"10.0.0.5:443\""), std::string::npos) << errors[0].message;
}

TEST(ConfigErrors, InterceptionKeysWithoutACaAreErrorsWhereTheyAreWritten) {
  const auto errors = errors_of(R"([profiles.p]
inspect = ["a.test"]

[sandboxes.ci]
token = "t"
profile = "p"
git = [{ repos = ["a.test/x/*"], allow = ["fetch"] }]
)");
  ASSERT_EQ(errors.size(), 2u) << dump(errors);
  EXPECT_EQ(errors[0].key, "profiles.p.inspect");
  EXPECT_EQ(errors[0].line, 2u);
  EXPECT_EQ(errors[1].key, "sandboxes.ci.git");
  EXPECT_EQ(errors[1].line, 7u);
  EXPECT_NE(errors[0].message.find("sandgate ca init"), std::string::npos) << errors[0].message;
}

TEST(ConfigErrors, InterceptionSectionErrors) {
  const auto one = errors_of("[interception]\nca_cert = \"c.pem\"\n");
  ASSERT_EQ(one.size(), 1u) << dump(one);
  EXPECT_EQ(one[0].key, "interception.ca_key");
  const auto renew = errors_of(
      "[interception]\nca_cert = \"c\"\nca_key = \"k\"\nleaf_validity_hours = 6\n"
      "leaf_renew_before_hours = 6\n");
  ASSERT_EQ(renew.size(), 1u) << dump(renew);
  EXPECT_EQ(renew[0].key, "interception.leaf_renew_before_hours");
  EXPECT_EQ(renew[0].line, 5u);
  const auto unknown = errors_of("[interception]\nca = \"c\"\n");
  ASSERT_EQ(unknown.size(), 1u) << dump(unknown);
  EXPECT_EQ(unknown[0].key, "interception.ca");
  const auto empty = errors_of("[interception]\nca_cert = \"\"\nca_key = \"k\"\n");
  ASSERT_FALSE(empty.empty());
  EXPECT_EQ(empty[0].key, "interception.ca_cert");
}

TEST(DropIns, FromStringResolvesAgainstTheNamesDirectory) {
  TempDir dir;
  dir.write("sandboxes.d/a.toml", "id = \"ci-a\"\ntoken = \"ta\"\n");
  const Config c = load_config_from_string(kMainWithDropIns, (dir.path() / "x.toml").string());
  EXPECT_NE(c.find_sandbox("ci-a"), nullptr);
}

TEST(DropIns, DefaultDirectoryIsReadWhenPresent) {
  TempDir dir;
  dir.write("sandboxes.d/a.toml", "id = \"ci-a\"\ntoken = \"ta\"\n");
  const Config c = load_config(dir.write("sandgate.toml", ""));
  EXPECT_NE(c.find_sandbox("ci-a"), nullptr);
}

TEST(DropIns, EmptySandboxesDirMeansNone) {
  TempDir dir;
  dir.write("sandboxes.d/a.toml", "id = \"ci-a\"\ntoken = \"ta\"\n");
  const Config c = load_config(dir.write("sandgate.toml", "sandboxes_dir = \"\"\n"));
  EXPECT_EQ(c.sandboxes_dir, "");
  EXPECT_TRUE(c.sandboxes.empty());
}

TEST(DropIns, AbsoluteSandboxesDir) {
  TempDir dir;
  dir.write("elsewhere/a.toml", "id = \"ci-a\"\ntoken = \"ta\"\n");
  const Config c = load_config_from_string(
      "sandboxes_dir = \"" + (dir.path() / "elsewhere").string() + "\"\n", kFile);
  EXPECT_NE(c.find_sandbox("ci-a"), nullptr);
}

std::vector<ConfigError> load_errors(const std::string& path) {
  try {
    load_config(path);
  } catch (const ConfigErrors& e) {
    return e.errors();
  }
  return {};
}

TEST(DropIns, DuplicateOfMainFileSandboxNamesBothPlaces) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", kMainWithDropIns);
  const std::string drop_in =
      dir.write("sandboxes.d/dup.toml", "# comment\nid = \"main-one\"\ntoken = \"x\"\n");
  const auto errors = load_errors(main);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].to_string(), drop_in + ":2:6: id: duplicate sandbox id \"main-one\", " +
                                       "first defined at " + main + ":5:12");
}

TEST(DropIns, DuplicateBetweenTwoDropIns) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", kMainWithDropIns);
  const std::string first = dir.write("sandboxes.d/10-a.toml", "id = \"same\"\ntoken = \"x\"\n");
  const std::string second = dir.write("sandboxes.d/20-b.toml", "id = \"same\"\ntoken = \"y\"\n");
  const auto errors = load_errors(main);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].to_string(),
            second + ":1:6: id: duplicate sandbox id \"same\", first defined at " + first + ":1:6");
}

TEST(DropIns, ErrorsFromEveryFileAreCollected) {
  TempDir dir;
  const std::string main = dir.write("sandgate.toml", "worker = 1\n");
  const std::string no_id = dir.write("sandboxes.d/1.toml", "token = \"t\"\nalow = []\n");
  const std::string no_token = dir.write("sandboxes.d/2.toml", "id = \"b\"\n");
  const std::string syntax = dir.write("sandboxes.d/3.toml", "id = \n");
  const std::string bad = dir.write("sandboxes.d/4.toml",
                                    "id = \"bad id\"\ntoken = \"t\"\nprofile = \"nope\"\n"
                                    "[sandboxes.x]\n");
  const auto errors = load_errors(main);
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.to_string());
  EXPECT_EQ(
      lines,
      (std::vector<std::string>{
          main + ":1:1: worker: unknown key \"worker\"; did you mean \"workers\"?",
          no_id + ": id: missing required key",
          no_id + ":2:1: alow: unknown key \"alow\"; did you mean \"allow\"?",
          no_token + ": token: missing required key (a sandbox needs a token, sources, or both)",
          syntax + ":1:6: Error while parsing key-value pair: expected value, saw '\\n'",
          bad + ":1:6: id: invalid sandbox id \"bad id\": use 1-64 characters of A-Z, "
                "a-z, 0-9, '_', '.', '-'",
          bad + ":3:11: profile: unknown profile \"nope\"",
          bad + ":4:2: sandboxes: unknown key \"sandboxes\"",
      }))
      << dump(errors);
}

TEST(DropIns, SandboxesDirThatIsAFile) {
  TempDir dir;
  dir.write("file.toml", "");
  const std::string main = dir.write("sandgate.toml", "sandboxes_dir = \"file.toml\"\n");
  const auto errors = load_errors(main);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].to_string(), main + ":1:17: sandboxes_dir: \"" +
                                       (dir.path() / "file.toml").string() +
                                       "\" is not a directory");
}

// ---------------------------------------------------------------------------------------------
// The shipped example

std::string source_dir() {
  if (const char* env = std::getenv("SANDGATE_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return SANDGATE_DEFAULT_SOURCE_DIR;
}

TEST(ExampleConfig, ShippedExampleLoads) {
  const std::string path = source_dir() + "/config/sandgate.toml";
  Config c;
  try {
    c = load_config(path);
  } catch (const ConfigErrors& e) {
    FAIL() << e.what();
  }
  ASSERT_EQ(c.listeners.explicit_proxy.size(), 1u);
  EXPECT_EQ(c.listeners.explicit_proxy[0].text, "127.0.0.1:3128");
  ASSERT_TRUE(c.listeners.admin.has_value());
  EXPECT_EQ(c.listeners.admin->text, "127.0.0.1:9090");

  const Sandbox* agent = c.find_sandbox("agent-1");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->profile, "default");
  EXPECT_EQ(agent->token, "change-me-agent-1");
  EXPECT_EQ(policy::merged(agent->spec).allow.size(), 4u);

  const Sandbox* example = c.find_sandbox("example-ci");
  ASSERT_NE(example, nullptr);
  EXPECT_EQ(example->file, source_dir() + "/config/sandboxes.d/example.toml");

  const auto policy = c.build_policy();
  EXPECT_TRUE(
      policy->decide({"agent-1", "api.github.com", 443, policy::EntryMode::connect}).allowed);
  EXPECT_TRUE(
      policy->decide({"agent-1", "registry.npmjs.org", 443, policy::EntryMode::connect}).allowed);
  EXPECT_FALSE(policy->decide({"agent-1", "example.org", 443, policy::EntryMode::connect}).allowed);
  // The example's request rules live in a profile no sandbox uses: agent-1 is spliced.
  EXPECT_FALSE(policy->inspects("agent-1", policy::normalize_host("api.github.com"), 443));
}

}  // namespace
}  // namespace sandgate::config

namespace sandgate::config {
namespace {

TEST(Sources, IdentifyASandboxThatNeedsNoToken) {
  const Config c = load_config_from_string(
      "[sandboxes.a]\nsources = [\"10.77.0.2\", \"fd00::2\"]\n[sandboxes.b]\ntoken = \"t\"\n",
      "/nonexistent/s.toml");
  ASSERT_EQ(c.sandboxes.size(), 2u);
  const Sandbox& a = *c.find_sandbox("a");
  EXPECT_EQ(a.token, "");
  ASSERT_EQ(a.sources.size(), 2u);
  EXPECT_EQ(a.sources[0].to_string(), "10.77.0.2");
  EXPECT_EQ(a.sources[1].to_string(), "fd00::2");
  EXPECT_TRUE(c.find_sandbox("b")->sources.empty());
}

TEST(Sources, AnAddressIdentifiesOneSandboxOnly) {
  try {
    load_config_from_string(
        "[sandboxes.a]\nsources = [\"10.77.0.2\"]\n[sandboxes.b]\nsources = [\"10.77.0.2\"]\n",
        "/nonexistent/s.toml");
    FAIL() << "accepted";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(
        e.errors()[0].to_string(),
        "/nonexistent/s.toml:4:12: sandboxes.b.sources[0]: source address \"10.77.0.2\" already "
        "identifies another sandbox, at /nonexistent/s.toml:2:12");
  }
}

// The launcher gives the pool's addresses to the sandboxes it makes: a hand-written sandbox
// there would take the next launch's address (it waited 10 s, then failed with a wrong hint).
TEST(Sources, AnAddressInTheLauncherPoolIsRefusedUnlessTheLauncherWroteIt) {
  try {
    load_config_from_string("[sandboxes.a]\nsources = [\"10.201.0.6\"]\n", "/nonexistent/s.toml");
    FAIL() << "accepted";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].to_string(),
              "/nonexistent/s.toml:2:12: sandboxes.a.sources[0]: source address \"10.201.0.6\" is "
              "inside [launcher] pool 10.201.0.0/16, which sandgate-launch gives to the sandboxes "
              "it makes; choose an address outside it, or move the pool");
  }
  // Controls: outside the pool, and the same address once the pool is elsewhere.
  EXPECT_EQ(load_config_from_string("[sandboxes.a]\nsources = [\"10.200.0.6\"]\n", "/n/s.toml")
                .sandboxes.size(),
            1u);
  EXPECT_EQ(load_config_from_string(
                "[launcher]\npool = \"10.9.0.0/24\"\n[sandboxes.a]\nsources = [\"10.201.0.6\"]\n",
                "/n/s.toml")
                .sandboxes.size(),
            1u);
}

// What SIGHUP cannot apply is named (the daemon prints it as "reload_ignored").
TEST(RestartOnlyChanges, NameTheSectionsSetUpOnlyAtStart) {
  const std::string base =
      "workers = 2\n[listeners]\nexplicit = [\"127.0.0.1:3128\"]\n[dns]\ntimeout_ms = 100\n"
      "[log]\naudit = \"stdout\"\n";
  const Config running = load_config_from_string(base, kFile);
  const struct {
    std::string toml;
    std::vector<std::string> expected;
  } rows[] = {
      {base, {}},
      {base + "[sandboxes.a]\ntoken = \"t\"\nallow = [\"x.org\"]\n", {}},  // applied
      {"workers = 3\n[listeners]\nexplicit = [\"127.0.0.1:3129\"]\n[dns]\ntimeout_ms = 100\n"
       "[log]\naudit = \"stdout\"\n",
       {"listeners", "workers"}},
      {"workers = 2\nsandboxes_dir = \"elsewhere\"\n[listeners]\nexplicit = [\"127.0.0.1:3128\"]\n"
       "[dns]\ntimeout_ms = 200\n[log]\naudit = \"off\"\n",
       {"dns", "log.audit", "sandboxes_dir"}},
      {base + "audit_checkpoint_lines = 10\n", {"log.audit_chain"}},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(restart_only_changes(running, load_config_from_string(row.toml, kFile)), row.expected)
        << row.toml;
  }
}

TEST(Launcher, DefaultsAndValues) {
  const Config d = load_config_from_string("", "/nonexistent/l.toml");
  EXPECT_EQ(d.launcher.state_dir, "/run/sandgate");
  EXPECT_EQ(d.launcher.pool.to_string(), "10.201.0.0/16");
  const Config c = load_config_from_string(
      "[launcher]\nstate_dir = \"state\"\npool = \"10.9.0.0/24\"\nca_file = \"/x/ca.pem\"\n"
      "ready_timeout_ms = 500\n[listeners]\ntransparent = [\"0.0.0.0:15001\"]\n"
      "dns = [\"0.0.0.0:15053\"]\n[limits]\npeek_timeout_ms = 250\n",
      "/nonexistent/l.toml");
  EXPECT_EQ(c.launcher.state_dir, "/nonexistent/state");
  EXPECT_EQ(c.launcher.pool.to_string(), "10.9.0.0/24");
  EXPECT_EQ(c.launcher.ca_file, "/x/ca.pem");
  EXPECT_EQ(c.launcher.ready_timeout, std::chrono::milliseconds(500));
  ASSERT_EQ(c.listeners.transparent.size(), 1u);
  EXPECT_EQ(c.listeners.transparent[0].port, 15001);
  ASSERT_EQ(c.listeners.dns.size(), 1u);
  EXPECT_EQ(c.listeners.dns[0].port, 15053);
  EXPECT_EQ(c.limits.peek_timeout, std::chrono::milliseconds(250));
}

TEST(Launcher, PoolMustBeIpv4AndHoldTwoSandboxes) {
  for (const char* pool : {"fd00::/64", "10.0.0.0/30", "10.0.0.1/16"}) {
    EXPECT_THROW(load_config_from_string(std::string("[launcher]\npool = \"") + pool + "\"\n",
                                         "/nonexistent/l.toml"),
                 ConfigErrors)
        << pool;
  }
}

}  // namespace
}  // namespace sandgate::config
