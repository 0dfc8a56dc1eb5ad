#include "launcher/environment.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

TEST(LauncherEnvironment, StripsProxiesAndSetsCaVariables) {
  const std::vector<std::string> parent = {
      "PATH=/usr/bin",
      "HTTP_PROXY=http://p:1",
      "http_proxy=http://p:1",
      "HTTPS_PROXY=x",
      "https_proxy=x",
      "ALL_PROXY=x",
      "all_proxy=x",
      "NO_PROXY=x",
      "no_proxy=x",
      "Http_Proxy=x",
      "SSL_CERT_FILE=/old",
      "PROXY_HOME=kept",
      "HOME=/root",
      "EMPTY=",
  };
  const std::vector<std::string> expected = {
      "PATH=/usr/bin",
      "PROXY_HOME=kept",
      "HOME=/root",
      "EMPTY=",
      "SSL_CERT_FILE=/b.pem",
      "NODE_EXTRA_CA_CERTS=/b.pem",
      "GIT_SSL_CAINFO=/b.pem",
      "REQUESTS_CA_BUNDLE=/b.pem",
      "CURL_CA_BUNDLE=/b.pem",
      "PIP_CERT=/b.pem",
      "CARGO_HTTP_CAINFO=/b.pem",
      "AWS_CA_BUNDLE=/b.pem",
      "DENO_CERT=/b.pem",
      "NPM_CONFIG_CAFILE=/b.pem",
  };
  EXPECT_EQ(sandbox_environment(parent, "/b.pem"), expected);
}

// THREATS 34: a credential variable from the launcher's environment never reaches a sandbox;
// it is the sandbox's placeholder (its rules name the credential) or unset (they do not).
TEST(LauncherEnvironment, CredentialVariablesArePlaceholdersOrUnset) {
  using Env = std::vector<std::string>;
  const Env declared = {"API_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "NPM_TOKEN"};
  struct Row {
    const char* name;
    Env parent;
    Env placeholders;
    Env expected;
  };
  const std::vector<Row> rows = {
      {"no credential named: every declared variable is removed",
       {"PATH=/usr/bin", "GH_TOKEN=ghp_real", "GITHUB_TOKEN=ghp_real", "API_TOKEN=real",
        "HOME=/root"},
       {},
       {"PATH=/usr/bin", "HOME=/root"}},
      {"a named credential's variables hold its placeholder, the others are removed",
       {"GH_TOKEN=ghp_real", "NPM_TOKEN=npm_real", "PATH=/usr/bin"},
       {"GH_TOKEN=sgph_1", "GITHUB_TOKEN=sgph_1"},
       {"PATH=/usr/bin", "GH_TOKEN=sgph_1", "GITHUB_TOKEN=sgph_1"}},
      {"an empty value and a name without '=' are removed too",
       {"GH_TOKEN=", "API_TOKEN", "PATH=/usr/bin"},
       {},
       {"PATH=/usr/bin"}},
      {"names compare exactly: other case, prefixes and suffixes are other variables",
       {"gh_token=x", "GH_TOKEN_FILE=/f", "MY_GH_TOKEN=x", "GH=x", "GH_TOKEN=ghp_real"},
       {},
       {"gh_token=x", "GH_TOKEN_FILE=/f", "MY_GH_TOKEN=x", "GH=x"}},
      {"a value that merely mentions a token name is kept",
       {"NOTE=GH_TOKEN=x", "PATH=/usr/bin"},
       {},
       {"NOTE=GH_TOKEN=x", "PATH=/usr/bin"}},
      {"a placeholder variable no credential declares still replaces the parent's",
       {"EXTRA=old", "PATH=/usr/bin"},
       {"EXTRA=sgph_2"},
       {"PATH=/usr/bin", "EXTRA=sgph_2"}},
      {"no credential variable in the parent: only the placeholders are added",
       {"PATH=/usr/bin"},
       {"NPM_TOKEN=sgph_3"},
       {"PATH=/usr/bin", "NPM_TOKEN=sgph_3"}},
      {"duplicate entries of a declared variable are all removed",
       {"GH_TOKEN=a", "PATH=/usr/bin", "GH_TOKEN=b"},
       {"GH_TOKEN=sgph_4"},
       {"PATH=/usr/bin", "GH_TOKEN=sgph_4"}},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(with_credential_variables(row.parent, declared, row.placeholders), row.expected)
        << row.name;
  }
  // No credential in the config: nothing is declared, nothing removed.
  EXPECT_EQ(with_credential_variables({"GH_TOKEN=x"}, {}, {}), Env{"GH_TOKEN=x"});
}

}  // namespace
}  // namespace sandgate::launcher
