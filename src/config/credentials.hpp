#pragma once

// Internal to src/config: the [credentials] table and the [[...inject]] rules of profiles
// and sandboxes. Errors go to an ErrorSink; reading never stops early.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/toml_reader.hpp"
#include "secrets/injection.hpp"
#include "secrets/spec.hpp"

namespace sandgate::config::detail {

using Credentials = std::map<std::string, secrets::CredentialSpec, std::less<>>;

// What [credentials] holds: one table per credential, and the settings beside them.
struct CredentialsSection {
  Credentials credentials;
  std::string placeholder_key_file;  // empty: not set (the caller applies the default)
};

// Relative paths are resolved against `base_dir`.
CredentialsSection read_credentials(const toml::node& node, const std::filesystem::path& base_dir,
                                    ErrorSink& sink);

// The `inject` array of tables of a profile or sandbox. `credentials` are those of the main
// file (a rule naming another is an error). `path` prefixes error keys, `origin_prefix` the
// rules' origins, as for read_http_rules.
void read_inject_rules(const toml::table& table, const std::string& path,
                       const std::string& origin_prefix, const Credentials& credentials,
                       std::vector<secrets::InjectRule>& out, ErrorSink& sink);

// Helpers both readers use.
bool valid_token_char(char c);              // RFC 9110 tchar
bool visible_ascii(std::string_view text);  // '!' to '~' only
bool github_name(std::string_view text);    // an owner or repository name
// A string key, non-empty; nullopt when absent (a missing required one is reported).
std::optional<std::string> read_text(const toml::table& table, std::string_view key,
                                     const std::string& path, bool required, ErrorSink& sink);
// permission name -> "read" | "write" | "admin".
std::optional<secrets::Permissions> read_permissions(const toml::node& node,
                                                     const std::string& path, ErrorSink& sink);

// "500ms", "10s", "10m", "1h" (a whole number and a unit). nullopt and a reason otherwise.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* error);

}  // namespace sandgate::config::detail
