// [credentials] and [[...inject]]: what loads, what it compiles to, and every error with its
// file, line, column and key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "policy/host.hpp"
#include "secrets/injection.hpp"
#include "secrets/placeholder.hpp"

namespace sandgate::config {
namespace {

const std::string kFile = "/nonexistent/dir/sandgate.toml";

std::vector<ConfigError> errors_of(std::string_view toml) {
  try {
    load_config_from_string(toml, kFile);
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

constexpr std::string_view kInterception = R"(
[interception]
ca_cert = "ca/ca.pem"
ca_key = "ca/ca.key"
)";

constexpr std::string_view kCredentials = R"(
[credentials]
placeholder_key_file = "state/ph.key"

[credentials.github]
provider = "github_app"
app_id = 12345
private_key_file = "keys/github-app.pem"
installation_account = "Acme"
permissions = { contents = "write", metadata = "read" }
env = ["GH_TOKEN", "GITHUB_TOKEN"]
refresh_before = "15m"
ca_file = "/etc/ssl/extra.pem"

[credentials.ghe]
provider = "github_app"
app_id = 7
private_key_file = "/etc/sandgate/ghe.pem"
installation_id = 678
api_url = "https://ghe.example.com/api/v3/"

[credentials.npm]
provider = "static"
file = "/etc/sandgate/npm-token"
env = ["NPM_TOKEN"]

[credentials.vault]
provider = "exec"
command = ["/usr/local/bin/get-token", "--scope", "x"]
timeout = "2500ms"
ttl = "1h"

[credentials.api]
provider = "oauth2_client_credentials"
token_url = "https://auth.example.com/oauth/token"
client_id = "sandgate"
client_secret_file = "api-secret"
scopes = ["write", "read", "read"]
audience = "https://api.example.com"
)";

std::string with_credentials(std::string_view rest) {
  return std::string(kInterception) + std::string(kCredentials) + std::string(rest);
}

TEST(CredentialsConfig, EveryProviderLoadsWithDefaultsAndResolvedPaths) {
  const Config config = load_config_from_string(with_credentials(""), kFile);
  ASSERT_EQ(config.credentials.size(), 5u);
  EXPECT_EQ(config.placeholder_key_file, "/nonexistent/dir/state/ph.key");

  const auto* github = config.find_credential("github");
  ASSERT_NE(github, nullptr);
  EXPECT_EQ(github->kind, secrets::ProviderKind::github_app);
  EXPECT_EQ(github->app_id, 12345);
  EXPECT_EQ(github->private_key_file, "/nonexistent/dir/keys/github-app.pem");
  EXPECT_EQ(github->installation_id, 0);
  EXPECT_EQ(github->installation_account, "Acme");
  EXPECT_EQ(github->api_url, "https://api.github.com");
  EXPECT_EQ(github->permissions,
            (secrets::Permissions{{"contents", "write"}, {"metadata", "read"}}));
  EXPECT_EQ(github->env, (std::vector<std::string>{"GH_TOKEN", "GITHUB_TOKEN"}));
  EXPECT_EQ(github->refresh_before, std::chrono::minutes(15));
  EXPECT_EQ(github->ca_file, "/etc/ssl/extra.pem");
  EXPECT_EQ(github->timeout, std::chrono::seconds(10));

  const auto* ghe = config.find_credential("ghe");
  ASSERT_NE(ghe, nullptr);
  EXPECT_EQ(ghe->installation_id, 678);
  EXPECT_EQ(ghe->api_url, "https://ghe.example.com/api/v3");  // trailing '/' dropped
  EXPECT_EQ(ghe->refresh_before, std::chrono::minutes(10));

  const auto* npm = config.find_credential("npm");
  ASSERT_NE(npm, nullptr);
  EXPECT_EQ(npm->kind, secrets::ProviderKind::static_file);
  EXPECT_EQ(npm->file, "/etc/sandgate/npm-token");

  const auto* vault = config.find_credential("vault");
  ASSERT_NE(vault, nullptr);
  EXPECT_EQ(vault->command, (std::vector<std::string>{"/usr/local/bin/get-token", "--scope", "x"}));
  EXPECT_EQ(vault->timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(vault->ttl, std::chrono::hours(1));

  const auto* api = config.find_credential("api");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->token_url, "https://auth.example.com/oauth/token");
  EXPECT_EQ(api->client_id, "sandgate");
  EXPECT_EQ(api->client_secret_file, "/nonexistent/dir/api-secret");
  EXPECT_EQ(api->scopes, (std::vector<std::string>{"write", "read", "read"}));
  EXPECT_EQ(api->audience, "https://api.example.com");
  EXPECT_EQ(api->secret_files(), (std::vector<std::string>{"/nonexistent/dir/api-secret"}));
  EXPECT_EQ(config.find_credential("nope"), nullptr);
}

// A token endpoint trusts [interception] upstream_ca_file, as the upstream leg does, unless
// its credential names a ca_file of its own; providers that fetch nothing over HTTPS get none.
TEST(CredentialsConfig, TokenEndpointsTrustTheUpstreamCaUnlessTheyNameTheirOwn) {
  const std::string interception =
      std::string(kInterception) + "upstream_ca_file = \"/etc/ssl/private-ca.pem\"\n";
  const Config config = load_config_from_string(interception + std::string(kCredentials), kFile);
  EXPECT_EQ(config.find_credential("github")->ca_file, "/etc/ssl/extra.pem");
  EXPECT_EQ(config.find_credential("ghe")->ca_file, "/etc/ssl/private-ca.pem");
  EXPECT_EQ(config.find_credential("api")->ca_file, "/etc/ssl/private-ca.pem");
  EXPECT_EQ(config.find_credential("npm")->ca_file, "");
  EXPECT_EQ(config.find_credential("vault")->ca_file, "");
  // Control: without upstream_ca_file, only the system roots (and a credential's own).
  const Config plain = load_config_from_string(with_credentials(""), kFile);
  EXPECT_EQ(plain.find_credential("ghe")->ca_file, "");
}

TEST(CredentialsConfig, PlaceholderKeyDefaultsToTheLauncherStateDir) {
  const Config config = load_config_from_string("[launcher]\nstate_dir = \"/run/sg\"\n", kFile);
  EXPECT_EQ(config.placeholder_key_file, "/run/sg/placeholder.key");
}

constexpr std::string_view kRules = R"(
[profiles.default]
ports = [443]
[[profiles.default.inject]]
hosts = ["github.com", "api.github.com"]
path_prefixes = ["/acme/", "/%61pi"]
credential = "github"
as = "basic"
user = "x-access-token"
repositories = ["acme/Widgets", "acme/gadgets", "acme/widgets"]
permissions = { contents = "read" }

[[profiles.default.inject]]
hosts = ["*.npmjs.org"]
credential = "npm"
as = "bearer"

[sandboxes.a]
token = "t1"
profile = "default"
[sandboxes.b]
token = "t2"
profile = "default"
[sandboxes.c]
token = "t3"
profile = "default"
[[sandboxes.c.inject]]
hosts = ["api.example.com:8443"]
credential = "api"
as = "header"
header = "X-Api-Key"
format = "Key {token}"
[sandboxes.d]
token = "t4"
)";

TEST(CredentialsConfig, InjectRulesCompileSandboxFirstAndProfilesShare) {
  const Config config = load_config_from_string(with_credentials(kRules), kFile);
  const auto table = config.build_injection();
  const secrets::InjectionRules* a = table->for_sandbox("a");
  const secrets::InjectionRules* b = table->for_sandbox("b");
  const secrets::InjectionRules* c = table->for_sandbox("c");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);  // one compiled set for the profile
  ASSERT_NE(c, nullptr);
  EXPECT_NE(a, c);
  EXPECT_EQ(table->for_sandbox("d"), nullptr);
  EXPECT_EQ(table->for_sandbox("zzz"), nullptr);
  EXPECT_EQ(table->distinct_rule_sets(), 2u);

  ASSERT_EQ(a->rules().size(), 2u);
  const secrets::InjectRule& git = a->rules()[0];
  EXPECT_EQ(git.origin, "profiles.default.inject[0]");
  EXPECT_EQ(git.as, secrets::InjectAs::basic);
  EXPECT_EQ(git.user, "x-access-token");
  EXPECT_EQ(git.path_prefixes, (std::vector<std::string>{"/acme/", "/api"}));
  EXPECT_EQ(git.scope.repositories, (std::vector<std::string>{"acme/gadgets", "acme/widgets"}));
  EXPECT_EQ(git.scope.permissions, (secrets::Permissions{{"contents", "read"}}));

  ASSERT_EQ(c->rules().size(), 3u);
  EXPECT_EQ(c->rules()[0].origin, "sandboxes.c.inject[0]");
  EXPECT_EQ(c->rules()[0].header, "X-Api-Key");
  EXPECT_EQ(c->rules()[0].format, "Key {token}");
  EXPECT_EQ(c->rules()[1].origin, "profiles.default.inject[0]");
  EXPECT_EQ(c->credentials(), (std::vector<std::string>{"api", "github", "npm"}));

  const policy::Host github = policy::normalize_host("github.com");
  EXPECT_EQ(a->match(github, 443, "/acme/widgets.git/info/refs?service=git-upload-pack"), &git);
  EXPECT_EQ(a->match(github, 443, "/other/x"), nullptr);
  EXPECT_EQ(a->match(github, 80, "/acme/x"), nullptr);  // ports = [443]
}

TEST(CredentialsConfig, SandboxesWithOtherPortsDoNotShareCompiledRules) {
  const Config config = load_config_from_string(
      with_credentials(std::string(kRules) + "[sandboxes.e]\ntoken = \"t5\"\nprofile = "
                                             "\"default\"\nports = [443, 8443]\n"),
      kFile);
  const auto table = config.build_injection();
  const auto* a = table->for_sandbox("a");
  const auto* e = table->for_sandbox("e");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(a, e);
  const policy::Host github = policy::normalize_host("github.com");
  EXPECT_EQ(a->match(github, 8443, "/acme/x"), nullptr);
  ASSERT_NE(e->match(github, 8443, "/acme/x"), nullptr);
  EXPECT_EQ(table->distinct_rule_sets(), 3u);
}

TEST(CredentialsConfig, InjectHostsAreInspected) {
  const Config config = load_config_from_string(with_credentials(kRules), kFile);
  const auto policy = config.build_policy();
  EXPECT_TRUE(policy->inspects("a", policy::normalize_host("api.github.com"), 443));
  EXPECT_TRUE(policy->inspects("a", policy::normalize_host("registry.npmjs.org"), 443));
  EXPECT_FALSE(policy->inspects("a", policy::normalize_host("api.example.com"), 8443));
  EXPECT_TRUE(policy->inspects("c", policy::normalize_host("api.example.com"), 8443));
  EXPECT_FALSE(policy->inspects("d", policy::normalize_host("github.com"), 443));
}

TEST(CredentialsConfig, PlaceholderEnvNamesEachCredentialOfTheSandbox) {
  const Config config = load_config_from_string(with_credentials(kRules), kFile);
  const auto key = secrets::PlaceholderKey::from_bytes(std::string(32, 'k'));
  const auto env = config.placeholder_env("a", key);
  ASSERT_EQ(env.size(), 3u);
  EXPECT_EQ(env[0].name, "GH_TOKEN");
  EXPECT_EQ(env[1].name, "GITHUB_TOKEN");
  EXPECT_EQ(env[0].value, env[1].value);
  EXPECT_EQ(env[0].value, key.placeholder_for("a", "github"));
  EXPECT_EQ(env[2].name, "NPM_TOKEN");
  EXPECT_EQ(env[2].credential, "npm");
  EXPECT_NE(config.placeholder_env("b", key)[0].value, env[0].value);  // per sandbox
  EXPECT_TRUE(config.placeholder_env("d", key).empty());
  EXPECT_TRUE(config.placeholder_env("nope", key).empty());

  const auto pairs = config.placeholder_pairs();
  const secrets::PlaceholderIndex index(key, pairs);
  const auto hit = index.find("token " + env[0].value);
  ASSERT_TRUE(hit && hit->known());
  EXPECT_EQ(*hit->sandbox, "a");
  EXPECT_EQ(*hit->credential, "github");
}

TEST(CredentialsConfig, ReloadWithSameTablesGivesEqualSpecs) {
  const Config one = load_config_from_string(with_credentials(""), kFile);
  const Config two = load_config_from_string(with_credentials(""), kFile);
  EXPECT_EQ(one.credentials, two.credentials);
}

struct CredentialErrorCase {
  std::string name;
  std::string toml;  // appended to kInterception (and kCredentials when `with_credentials`)
  bool with_credentials;
  std::uint32_t line;
  std::uint32_t column;
  std::string key;
  std::string message;  // a substring of the message
};

void PrintTo(const CredentialErrorCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<CredentialErrorCase> credential_error_cases() {
  // kInterception is 4 lines; kCredentials adds 39 more: rules start on line 44.
  const std::string cred = "[credentials.x]\n";
  return {
      {"UnknownProvider", cred + "provider = \"vaultish\"\n", false, 6, 12,
       "credentials.x.provider", "unknown provider \"vaultish\""},
      {"MissingProvider", cred + "file = \"/f\"\n", false, 5, 1, "credentials.x.provider",
       "missing required key"},
      {"InlineToken", cred + "provider = \"static\"\nfile = \"/f\"\ntoken = \"ghp_abc\"\n", false,
       8, 1, "credentials.x.token", "secrets are never written in the config"},
      {"InlineClientSecret",
       cred + "provider = \"oauth2_client_credentials\"\ntoken_url = \"https://a.test/t\"\n"
              "client_id = \"c\"\nclient_secret = \"s\"\nclient_secret_file = \"/s\"\n",
       false, 9, 1, "credentials.x.client_secret", "client_secret_file"},
      {"StaticWithoutFile", cred + "provider = \"static\"\n", false, 5, 1, "credentials.x.file",
       "missing required key"},
      {"KeyOfAnotherProvider", cred + "provider = \"static\"\nfile = \"/f\"\napp_id = 3\n", false,
       8, 1, "credentials.x.app_id", "is a key of provider \"github_app\", not of \"static\""},
      {"UnknownKeySuggests", cred + "provider = \"static\"\nfile = \"/f\"\nfiel = \"/f\"\n", false,
       8, 1, "credentials.x.fiel", "did you mean \"file\""},
      {"ExecRelativeCommand", cred + "provider = \"exec\"\ncommand = [\"get-token\"]\n", false, 7,
       12, "credentials.x.command[0]", "must be an absolute path"},
      {"ExecEmptyCommand", cred + "provider = \"exec\"\ncommand = []\n", false, 7, 11,
       "credentials.x.command", "must not be empty"},
      {"BadDuration", cred + "provider = \"exec\"\ncommand = [\"/bin/x\"]\ntimeout = \"10\"\n",
       false, 8, 11, "credentials.x.timeout", "expected a duration"},
      {"GithubBothInstallationKeys",
       cred + "provider = \"github_app\"\napp_id = 1\nprivate_key_file = \"/k\"\n"
              "installation_id = 2\ninstallation_account = \"acme\"\n",
       false, 10, 24, "credentials.x.installation_account", "not both"},
      {"GithubNoInstallation",
       cred + "provider = \"github_app\"\napp_id = 1\nprivate_key_file = \"/k\"\n", false, 5, 1,
       "credentials.x.installation_id", "missing required key"},
      {"GithubNoAppId",
       cred + "provider = \"github_app\"\nprivate_key_file = \"/k\"\ninstallation_id = 2\n", false,
       5, 1, "credentials.x.app_id", "missing required key"},
      {"GithubHttpApiUrl",
       cred + "provider = \"github_app\"\napp_id = 1\nprivate_key_file = \"/k\"\n"
              "installation_id = 2\napi_url = \"http://api.github.com\"\n",
       false, 10, 11, "credentials.x.api_url", "expected an https URL"},
      {"GithubBadPermissionLevel",
       cred + "provider = \"github_app\"\napp_id = 1\nprivate_key_file = \"/k\"\n"
              "installation_id = 2\npermissions = { contents = \"all\" }\n",
       false, 10, 28, "credentials.x.permissions.contents", "expected \"read\", \"write\""},
      {"CaFileOnStatic", cred + "provider = \"static\"\nfile = \"/f\"\nca_file = \"/ca\"\n", false,
       8, 11, "credentials.x.ca_file", "only the HTTPS providers"},
      {"BadEnvName", cred + "provider = \"static\"\nfile = \"/f\"\nenv = [\"GH-TOKEN\"]\n", false,
       8, 8, "credentials.x.env[0]", "invalid environment variable name"},
      {"BadCredentialName", "[credentials.\"a b\"]\nprovider = \"static\"\nfile = \"/f\"\n", false,
       5, 14, "credentials.\"a b\"", "invalid credential name"},
      {"RuleUnknownCredential",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"githb\"\nas = \"bearer\"\n",
       true, 46, 14, "profiles.p.inject[0].credential",
       "unknown credential \"githb\"; did you mean \"github\"?"},
      {"RuleBasicWithoutUser",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"github\"\nas = \"basic\"\n",
       true, 44, 1, "profiles.p.inject[0].user", "missing required key for as = \"basic\""},
      {"RuleHeaderWithoutName",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"header\"\n", true,
       44, 1, "profiles.p.inject[0].header", "missing required key for as = \"header\""},
      {"RuleFormatWithoutToken",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"header\"\n"
       "header = \"X-Key\"\nformat = \"Token\"\n",
       true, 49, 10, "profiles.p.inject[0].format", "must contain \"{token}\" exactly once"},
      {"RuleReservedHeader",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"header\"\n"
       "header = \"Host\"\n",
       true, 48, 10, "profiles.p.inject[0].header", "cannot carry a credential"},
      {"RuleUserWithBearer",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"bearer\"\n"
       "user = \"u\"\n",
       true, 48, 8, "profiles.p.inject[0].user", "is only for as = \"basic\""},
      {"RuleRepositoriesOnStatic",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"bearer\"\n"
       "repositories = [\"acme/x\"]\n",
       true, 48, 16, "profiles.p.inject[0].repositories",
       "down-scopes github_app tokens; credential \"npm\" is \"static\""},
      {"RuleRepositoryOfAnotherAccount",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"github\"\nas = \"bearer\"\n"
       "repositories = [\"other/x\"]\n",
       true, 48, 16, "profiles.p.inject[0].repositories", "is not of \"acme\""},
      {"RuleRepositoriesOfTwoOwners",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\nas = \"bearer\"\n"
       "repositories = [\"a/x\", \"b/y\"]\n",
       true, 48, 24, "profiles.p.inject[0].repositories[1]", "belongs to one owner"},
      {"RuleBadRepository",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\nas = \"bearer\"\n"
       "repositories = [\"widgets\"]\n",
       true, 48, 17, "profiles.p.inject[0].repositories[0]", "expected \"owner/name\""},
      {"RuleBadPathPrefix",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\nas = \"bearer\"\n"
       "path_prefixes = [\"acme\"]\n",
       true, 48, 18, "profiles.p.inject[0].path_prefixes[0]", "invalid path prefix"},
      {"RuleAmbiguousPathPrefix",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\nas = \"bearer\"\n"
       "path_prefixes = [\"/a%2Fb\"]\n",
       true, 48, 18, "profiles.p.inject[0].path_prefixes[0]", "invalid path prefix"},
      {"RuleBadHost",
       "[[profiles.p.inject]]\nhosts = [\"10.0.0.1\"]\ncredential = \"ghe\"\nas = \"bearer\"\n",
       true, 45, 10, "profiles.p.inject[0].hosts[0]", "invalid host pattern \"10.0.0.1\""},
      {"RuleMissingAs", "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\n",
       true, 44, 1, "profiles.p.inject[0].as", "missing required key"},
      {"RuleUnknownKey",
       "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"ghe\"\nas = \"bearer\"\n"
       "host = \"x\"\n",
       true, 48, 1, "profiles.p.inject[0].host", "unknown key \"host\""},
      {"SandboxRule",
       "[sandboxes.s]\ntoken = \"t\"\n[[sandboxes.s.inject]]\nhosts = [\"a.test\"]\n"
       "credential = \"npm\"\nas = \"rot13\"\n",
       true, 49, 6, "sandboxes.s.inject[0].as",
       "expected \"bearer\", \"basic\", \"header\" or \"aws_sigv4\""},
      // AWS keys: in files, never inline; signed again, never put in a header, and only they.
      {"AwsInlineSecret",
       cred + "provider = \"aws_static\"\naccess_key_id_file = \"/a\"\n"
              "secret_access_key_file = \"/s\"\nsecret_access_key = \"wJalr\"\n",
       false, 9, 1, "credentials.x.secret_access_key", "secret_access_key_file"},
      {"AwsWithoutSecretFile", cred + "provider = \"aws_static\"\naccess_key_id_file = \"/a\"\n",
       false, 5, 1, "credentials.x.secret_access_key_file", "missing required key"},
      {"AwsKeysInAHeader",
       cred +
           "provider = \"aws_static\"\naccess_key_id_file = \"/a\"\n"
           "secret_access_key_file = \"/s\"\n[[profiles.p.inject]]\nhosts = [\"*.amazonaws.com\"]\n"
           "credential = \"x\"\nas = \"bearer\"\n",
       false, 12, 6, "profiles.p.inject[0].as", "use as = \"aws_sigv4\""},
      {"SecretsManagerWithoutRegion",
       "[credentials.k]\nprovider = \"aws_static\"\naccess_key_id_file = \"/a\"\n"
       "secret_access_key_file = \"/s\"\n" +
           cred +
           "provider = \"aws_secrets_manager\"\naws_credential = \"k\"\nsecret_id = \"db\"\n",
       false, 9, 1, "credentials.x.region", "unless secret_id is an ARN"},
      {"SecretsManagerWithATokenForKeys",
       "[credentials.sm]\nprovider = \"aws_secrets_manager\"\naws_credential = \"npm\"\n"
       "secret_id = \"db\"\nregion = \"eu-west-1\"\n",
       true, 46, 18, "credentials.sm.aws_credential",
       "credential \"npm\" is \"static\", not AWS keys"},
      // The instance and container endpoints: plain HTTP only where AWS serves them (or on
      // loopback); the container's also over HTTPS anywhere, as the SDKs allow.
      {"InstanceEndpointElsewhere",
       cred + "provider = \"aws_instance\"\nendpoint_url = \"http://imds.example.com\"\n", false, 7,
       16, "credentials.x.endpoint_url",
       "expected http://169.254.169.254, http://[fd00:ec2::254], or http:// on a loopback"},
      {"InstanceHttpsEndpoint",
       cred + "provider = \"aws_instance\"\nendpoint_url = \"https://169.254.169.254\"\n", false, 7,
       16, "credentials.x.endpoint_url", "expected http://169.254.169.254"},
      {"InstanceEndpointWithAPath",
       cred + "provider = \"aws_instance\"\nendpoint_url = \"http://169.254.169.254/latest\"\n",
       false, 7, 16, "credentials.x.endpoint_url", "without a path"},
      {"InstanceBadRoleName", cred + "provider = \"aws_instance\"\nrole_name = \"a/b\"\n", false, 7,
       13, "credentials.x.role_name", "expected an IAM role name"},
      {"InstanceCaFile", cred + "provider = \"aws_instance\"\nca_file = \"/ca\"\n", false, 7, 11,
       "credentials.x.ca_file", "only the HTTPS providers"},
      {"ContainerWithoutEndpoint", cred + "provider = \"aws_container\"\n", false, 5, 1,
       "credentials.x.endpoint_url", "missing required key (or relative_uri"},
      {"ContainerPlainHttpElsewhere",
       cred + "provider = \"aws_container\"\nendpoint_url = \"http://10.0.0.5/creds\"\n", false, 7,
       16, "credentials.x.endpoint_url",
       "expected http://169.254.170.2, http://169.254.170.23, http://[fd00:ec2::23], http:// on "
       "a loopback address or an https URL, got \"http://10.0.0.5/creds\""},
      {"ContainerBothEndpoints",
       cred +
           "provider = \"aws_container\"\nendpoint_url = \"http://169.254.170.23/v1/credentials\"\n"
           "relative_uri = \"/v2/credentials/x\"\n",
       false, 8, 16, "credentials.x.relative_uri", "not both"},
      {"ContainerBadRelativeUri",
       cred + "provider = \"aws_container\"\nrelative_uri = \"v2/credentials/x\"\n", false, 7, 16,
       "credentials.x.relative_uri", "expected a path such as"},
      {"ContainerInlineAuthorizationToken",
       cred + "provider = \"aws_container\"\nrelative_uri = \"/v2/credentials/x\"\n"
              "authorization_token = \"t\"\n",
       false, 8, 1, "credentials.x.authorization_token", "authorization_token_file"},
      {"RoleNameOnContainer",
       cred + "provider = \"aws_container\"\nrelative_uri = \"/v2/credentials/x\"\n"
              "role_name = \"agents\"\n",
       false, 8, 1, "credentials.x.role_name",
       "is a key of provider \"aws_instance\", not of \"aws_container\""},
      // aws_credential: any AWS key source, and no cycle.
      {"AssumeRoleWithASecretForKeys",
       "[credentials.k]\nprovider = \"aws_static\"\naccess_key_id_file = \"/a\"\n"
       "secret_access_key_file = \"/s\"\n"
       "[credentials.sm]\nprovider = \"aws_secrets_manager\"\naws_credential = \"k\"\n"
       "secret_id = \"db\"\nregion = \"eu-west-1\"\n" +
           cred +
           "provider = \"aws_assume_role\"\naws_credential = \"sm\"\n"
           "role_arn = \"arn:aws:iam::123456789012:role/a\"\n",
       false, 16, 18, "credentials.x.aws_credential",
       "credential \"sm\" is \"aws_secrets_manager\", not AWS keys (provider = \"aws_static\", "
       "\"aws_instance\""},
      {"AssumeRoleCycle",
       "[credentials.a]\nprovider = \"aws_assume_role\"\naws_credential = \"x\"\n"
       "role_arn = \"arn:aws:iam::123456789012:role/a\"\n" +
           cred +
           "provider = \"aws_assume_role\"\naws_credential = \"x\"\n"
           "role_arn = \"arn:aws:iam::123456789012:role/x\"\n",
       false, 11, 18, "credentials.x.aws_credential", "the keys' sources form a cycle: x -> x"},
      {"VaultKeyOfAnotherMethod",
       cred + "provider = \"vault\"\naddress = \"https://v.test\"\nauth = \"approle\"\n"
              "role_id = \"r\"\nsecret_id_file = \"/s\"\ntoken_file = \"/t\"\npath = \"kv/x\"\n"
              "field = \"f\"\n",
       false, 11, 14, "credentials.x.token_file", "is for auth = \"token\""},
      {"VaultUnknownAuth",
       cred + "provider = \"vault\"\naddress = \"https://v.test\"\nauth = \"ldap\"\n"
              "path = \"kv/x\"\nfield = \"f\"\n",
       false, 8, 8, "credentials.x.auth", "expected \"token\", \"approle\" or \"kubernetes\""},
      {"SigV4WithAToken",
       "[[profiles.p.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"aws_sigv4\"\n",
       true, 47, 6, "profiles.p.inject[0].as", "credential \"npm\" is \"static\""},
  };
}

class CredentialErrorCaseTest : public ::testing::TestWithParam<CredentialErrorCase> {};

TEST_P(CredentialErrorCaseTest, ReportsExactlyThisError) {
  const CredentialErrorCase& c = GetParam();
  const std::string toml =
      c.with_credentials ? with_credentials(c.toml) : std::string(kInterception) + c.toml;
  const auto errors = errors_of(toml);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].file, kFile);
  EXPECT_EQ(errors[0].line, c.line) << dump(errors);
  EXPECT_EQ(errors[0].column, c.column) << dump(errors);
  EXPECT_EQ(errors[0].key, c.key) << dump(errors);
  EXPECT_NE(errors[0].message.find(c.message), std::string::npos) << dump(errors);
}

INSTANTIATE_TEST_SUITE_P(Rows, CredentialErrorCaseTest,
                         ::testing::ValuesIn(credential_error_cases()),
                         [](const auto& row) { return row.param.name; });

// AWS keys from files: the key id, the secret and (for temporary keys) the session token, which
// --check-config and the store read; rules that name them sign requests again.
TEST(CredentialsConfig, AwsKeysLoadFromFilesAndRulesSignAgain) {
  const Config config = load_config_from_string(std::string(kInterception) + R"(
[credentials.aws]
provider = "aws_static"
access_key_id_file = "aws/key-id"
secret_access_key_file = "/etc/sandgate/aws/secret"
session_token_file = "aws/token"
env = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]

[[profiles.default.inject]]
hosts = ["*.amazonaws.com"]
credential = "aws"
as = "aws_sigv4"

[sandboxes.s]
token = "t"
profile = "default"
)",
                                                kFile);
  const auto* aws = config.find_credential("aws");
  ASSERT_NE(aws, nullptr);
  EXPECT_EQ(aws->kind, secrets::ProviderKind::aws_static);
  EXPECT_EQ(aws->secret_files(),
            (std::vector<std::string>{"/nonexistent/dir/aws/key-id", "/etc/sandgate/aws/secret",
                                      "/nonexistent/dir/aws/token"}));
  // A role assumed with those keys is AWS keys too: signed again, signed for with the base's.
  const Config role = load_config_from_string(std::string(kInterception) + R"(
[credentials.aws]
provider = "aws_static"
access_key_id_file = "/k"
secret_access_key_file = "/s"

[credentials.role]
provider = "aws_assume_role"
aws_credential = "aws"
role_arn = "arn:aws:iam::123456789012:role/agents"
duration = "2h"

[[profiles.default.inject]]
hosts = ["*.amazonaws.com"]
credential = "role"
as = "aws_sigv4"
)",
                                              kFile);
  const auto* assumed = role.find_credential("role");
  ASSERT_NE(assumed, nullptr);
  EXPECT_TRUE(secrets::is_aws(assumed->kind));
  EXPECT_EQ(assumed->ttl, std::chrono::hours(2));
  EXPECT_EQ(assumed->aws_credential, "aws");
  EXPECT_TRUE(assumed->secret_files().empty());  // the base's are the base's

  // A secret read with those keys: its region from the ARN.
  const Config with_secret = load_config_from_string(std::string(kInterception) + R"(
[credentials.aws]
provider = "aws_static"
access_key_id_file = "/k"
secret_access_key_file = "/s"

[credentials.db]
provider = "aws_secrets_manager"
aws_credential = "aws"
secret_id = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf"
json_field = "password"
ttl = "1h"
)",
                                                     kFile);
  const auto* db = with_secret.find_credential("db");
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->region, "eu-west-1");
  EXPECT_EQ(db->json_field, "password");
  EXPECT_EQ(db->ttl, std::chrono::hours(1));
  EXPECT_EQ(db->aws_credential, "aws");

  // A Google service-account key for JWT-bearer grants: the key file alone is enough.
  const Config gcp = load_config_from_string(std::string(kInterception) + R"(
[credentials.gcp]
provider = "oauth2_jwt_bearer"
key_file = "keys/gcp.json"
scopes = ["https://www.googleapis.com/auth/cloud-platform"]
subject = "agent@example.com"
)",
                                             kFile);
  const auto* jwt = gcp.find_credential("gcp");
  ASSERT_NE(jwt, nullptr);
  EXPECT_EQ(jwt->kind, secrets::ProviderKind::oauth2_jwt_bearer);
  EXPECT_EQ(jwt->secret_files(), (std::vector<std::string>{"/nonexistent/dir/keys/gcp.json"}));
  EXPECT_EQ(jwt->token_url, "");
  EXPECT_EQ(jwt->subject, "agent@example.com");

  // Vault with Kubernetes auth: the JWT file is what --check-config reads.
  const Config vault = load_config_from_string(std::string(kInterception) + R"(
[credentials.v]
provider = "vault"
address = "https://vault.example.com:8200/"
auth = "kubernetes"
role = "agents"
jwt_file = "/var/run/secrets/kubernetes.io/serviceaccount/token"
namespace = "team-a"
path = "/v1/secret/data/agents/api"
field = "token"
)",
                                               kFile);
  const auto* v = vault.find_credential("v");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->address, "https://vault.example.com:8200");
  EXPECT_EQ(v->secret_path, "secret/data/agents/api");
  EXPECT_EQ(v->vault_namespace, "team-a");
  EXPECT_EQ(v->secret_files(),
            (std::vector<std::string>{"/var/run/secrets/kubernetes.io/serviceaccount/token"}));

  const auto table = config.build_injection();
  const secrets::InjectionRules* rules = table->for_sandbox("s");
  ASSERT_NE(rules, nullptr);
  ASSERT_EQ(rules->rules().size(), 1u);
  EXPECT_EQ(rules->rules()[0].as, secrets::InjectAs::aws_sigv4);
}

// The keys of the role sandgate runs as: IMDS at its address (or a loopback stand-in), the
// container endpoint by its full URI or ECS's relative one; both sign requests again.
TEST(CredentialsConfig, InstanceAndContainerEndpointsLoad) {
  const Config config = load_config_from_string(std::string(kInterception) + R"(
[credentials.instance]
provider = "aws_instance"

[credentials.instance6]
provider = "aws_instance"
endpoint_url = "http://[fd00:ec2::254]/"
role_name = "agents+ci"

[credentials.local]
provider = "aws_instance"
endpoint_url = "http://localhost:1338"

[credentials.ecs]
provider = "aws_container"
relative_uri = "/v2/credentials/2f9a-41c0"

[credentials.pod]
provider = "aws_container"
endpoint_url = "http://169.254.170.23/v1/credentials"
authorization_token_file = "eks/token"

[credentials.agent]
provider = "aws_container"
endpoint_url = "https://creds.example.com/role?name=x"

[[profiles.default.inject]]
hosts = ["*.amazonaws.com"]
credential = "pod"
as = "aws_sigv4"
)",
                                                kFile);
  const auto* instance = config.find_credential("instance");
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(instance->kind, secrets::ProviderKind::aws_instance);
  EXPECT_TRUE(secrets::is_aws(instance->kind));
  EXPECT_EQ(instance->endpoint_url, "");  // the provider's default, http://169.254.169.254
  EXPECT_EQ(instance->ca_file, "");
  EXPECT_TRUE(instance->secret_files().empty());
  const auto* instance6 = config.find_credential("instance6");
  ASSERT_NE(instance6, nullptr);
  EXPECT_EQ(instance6->endpoint_url, "http://[fd00:ec2::254]");
  EXPECT_EQ(instance6->role_name, "agents+ci");
  EXPECT_EQ(config.find_credential("local")->endpoint_url, "http://localhost:1338");
  EXPECT_EQ(config.find_credential("ecs")->endpoint_url,
            "http://169.254.170.2/v2/credentials/2f9a-41c0");
  const auto* pod = config.find_credential("pod");
  ASSERT_NE(pod, nullptr);
  EXPECT_EQ(pod->endpoint_url, "http://169.254.170.23/v1/credentials");
  EXPECT_EQ(pod->authorization_token_file, "/nonexistent/dir/eks/token");
  EXPECT_EQ(pod->secret_files(), (std::vector<std::string>{"/nonexistent/dir/eks/token"}));
  EXPECT_EQ(config.find_credential("agent")->endpoint_url, "https://creds.example.com/role?name=x");
}

// A role assumed with the instance's keys (the commonest case), or with another role's; a
// cycle of two is reported at both.
TEST(CredentialsConfig, AwsCredentialIsAnyAwsKeySourceWithoutACycle) {
  const Config config = load_config_from_string(std::string(kInterception) + R"(
[credentials.instance]
provider = "aws_instance"

[credentials.agents]
provider = "aws_assume_role"
aws_credential = "instance"
role_arn = "arn:aws:iam::123456789012:role/agents"

[credentials.deploy]
provider = "aws_assume_role"
aws_credential = "agents"
role_arn = "arn:aws:iam::210987654321:role/deploy"
)",
                                                kFile);
  EXPECT_EQ(config.find_credential("agents")->aws_credential, "instance");
  EXPECT_EQ(config.find_credential("deploy")->aws_credential, "agents");

  const auto errors = errors_of(std::string(kInterception) + R"(
[credentials.a]
provider = "aws_assume_role"
aws_credential = "b"
role_arn = "arn:aws:iam::123456789012:role/a"

[credentials.b]
provider = "aws_assume_role"
aws_credential = "a"
role_arn = "arn:aws:iam::123456789012:role/b"
)");
  ASSERT_EQ(errors.size(), 2u) << dump(errors);
  EXPECT_EQ(errors[0].key, "credentials.a.aws_credential");
  EXPECT_NE(errors[0].message.find("form a cycle: a -> b -> a"), std::string::npos);
  EXPECT_EQ(errors[1].key, "credentials.b.aws_credential");
  EXPECT_NE(errors[1].message.find("form a cycle: b -> a -> b"), std::string::npos);
}

TEST(CredentialsConfig, InjectWithoutInterceptionIsAnError) {
  const std::string toml = std::string(kCredentials) +
                           "[[profiles.p.inject]]\nhosts = [\"github.com\"]\n"
                           "credential = \"npm\"\nas = \"bearer\"\n";
  const auto errors = errors_of(toml);
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].key, "profiles.p.inject");
  EXPECT_NE(errors[0].message.find("needs [interception]"), std::string::npos);
}

// What sandgate-launch keeps out of every sandbox: each credential's variables, whether or not
// any rule names the credential (npm2 is named by none), once each.
TEST(CredentialsConfig, CredentialEnvNamesListEveryCredentialsVariables) {
  const Config config = load_config_from_string(
      with_credentials("[credentials.npm2]\nprovider = \"static\"\nfile = \"/f2\"\n"
                       "env = [\"NPM_TOKEN\", \"API_TOKEN\"]\n"),
      kFile);
  EXPECT_EQ(config.credential_env_names(),
            (std::vector<std::string>{"API_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "NPM_TOKEN"}));
  EXPECT_TRUE(load_config_from_string("", kFile).credential_env_names().empty());
}

TEST(CredentialsConfig, TwoCredentialsOfASandboxCannotSetOneVariable) {
  const auto errors = errors_of(with_credentials(
      "[credentials.npm2]\nprovider = \"static\"\nfile = \"/f2\"\nenv = [\"NPM_TOKEN\"]\n"
      "[sandboxes.s]\ntoken = \"t\"\n"
      "[[sandboxes.s.inject]]\nhosts = [\"a.test\"]\ncredential = \"npm\"\nas = \"bearer\"\n"
      "[[sandboxes.s.inject]]\nhosts = [\"b.test\"]\ncredential = \"npm2\"\nas = \"bearer\"\n"));
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].key, "sandboxes.s");
  EXPECT_EQ(errors[0].message,
            "credentials \"npm\" and \"npm2\" both set NPM_TOKEN (env) in this sandbox");
}

TEST(CredentialsConfig, DropInSandboxesUseMainFileCredentials) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("sandgate-cred-test-" + std::to_string(::getpid()));
  fs::create_directories(dir / "sandboxes.d");
  std::ofstream(dir / "sandgate.toml") << with_credentials("[profiles.p]\n");
  std::ofstream(dir / "sandboxes.d" / "s.toml")
      << "id = \"s\"\ntoken = \"t\"\nprofile = \"p\"\n[[inject]]\nhosts = [\"a.test\"]\n"
         "credential = \"npm\"\nas = \"bearer\"\n";
  const Config config = load_config((dir / "sandgate.toml").string());
  const auto table = config.build_injection();
  ASSERT_NE(table->for_sandbox("s"), nullptr);
  EXPECT_EQ(table->for_sandbox("s")->rules()[0].origin, "sandboxes.s.inject[0]");
  fs::remove_all(dir);
}

TEST(CredentialsConfig, InlineSecretValueNeverAppearsInTheMessage) {
  const auto errors = errors_of(std::string(kInterception) +
                                "[credentials.x]\nprovider = \"static\"\nfile = \"/f\"\n"
                                "token = \"ghp_SECRETSECRET\"\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string().find("SECRETSECRET"), std::string::npos);
}

}  // namespace
}  // namespace sandgate::config
