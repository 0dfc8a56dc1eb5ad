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

}  // namespace
}  // namespace sandgate::launcher
