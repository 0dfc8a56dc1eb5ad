#pragma once

// Internal to src/config: the [[...http_rules]] and [[...git]] tables of a profile or a
// sandbox, read into policy rules. Errors go to an ErrorSink; reading never stops early.

#include <string>
#include <vector>

#include "config/toml_reader.hpp"
#include "policy/request_rules.hpp"

namespace sandgate::config::detail {

// `path` prefixes error keys ("profiles.default", "" in a drop-in); `origin_prefix` prefixes
// the rules' origins ("profiles.default", "sandboxes.ci"), e.g. "sandboxes.ci.http_rules[0]".
void read_http_rules(const toml::table& table, const std::string& path,
                     const std::string& origin_prefix, std::vector<policy::HttpRule>& out,
                     ErrorSink& sink);
void read_git_rules(const toml::table& table, const std::string& path,
                    const std::string& origin_prefix, std::vector<policy::GitRule>& out,
                    ErrorSink& sink);

}  // namespace sandgate::config::detail
