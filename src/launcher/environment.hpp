#pragma once

// The environment a sandboxed command gets: the parent's, without proxy settings (the sandbox's
// traffic is redirected, so it needs none and a stale one would only break it), plus every CA
// bundle variable common clients read, pointing at the launcher's bundle; and without any
// credential variable but the sandbox's own placeholders (with_credential_variables).

#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// The variables set to the CA bundle path, in the order they are appended.
inline constexpr std::string_view kCaVariables[] = {
    "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "PIP_CERT", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE", "DENO_CERT",
    // npm verifies with its own `cafile` setting and ignores NODE_EXTRA_CA_CERTS.
    "NPM_CONFIG_CAFILE"};

// `parent` holds "NAME=VALUE" entries (as in environ). Removes HTTP_PROXY, HTTPS_PROXY,
// ALL_PROXY, NO_PROXY in either case and any earlier CA variable, then appends the CA variables.
std::vector<std::string> sandbox_environment(const std::vector<std::string>& parent,
                                             const std::string& ca_bundle);

// `env` (as sandbox_environment made it) with the sandbox's credential variables: drops every
// entry named in `declared` (each variable any credential's `env` lists, across the whole
// config) or by one of `placeholders` ("NAME=VALUE", the placeholders of the credentials the
// sandbox's rules name), then appends `placeholders`. So a value the launcher's own
// environment holds for a credential variable (an operator's real GH_TOKEN) never reaches a
// sandbox: the variable is the sandbox's placeholder, or unset. Names compare exactly (the
// environment is case-sensitive).
std::vector<std::string> with_credential_variables(std::vector<std::string> env,
                                                   const std::vector<std::string>& declared,
                                                   const std::vector<std::string>& placeholders);

}  // namespace sandgate::launcher
