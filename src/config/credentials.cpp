#include "config/credentials.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <span>
#include <utility>

#include "config/sandboxes.hpp"
#include "policy/address_class.hpp"
#include "policy/host.hpp"

namespace sandgate::config::detail {

namespace {

namespace fs = std::filesystem;
using secrets::CredentialSpec;
using secrets::ProviderKind;

// Keys that would put a secret into the config itself. Each is refused with a pointer to the
// key that names a file instead.
struct InlineSecret {
  std::string_view key;
  std::string_view instead;
};
constexpr InlineSecret kInlineSecrets[] = {
    {"token", "file (provider = \"static\")"},
    {"secret", "client_secret_file"},
    {"client_secret", "client_secret_file"},
    {"private_key", "private_key_file"},
    {"password", "file (provider = \"static\")"},
    {"value", "file (provider = \"static\")"},
    {"access_key_id", "access_key_id_file"},
    {"secret_access_key", "secret_access_key_file"},
    {"session_token", "session_token_file"},
    {"authorization_token", "authorization_token_file"},
};

constexpr ProviderKind kKinds[] = {
    ProviderKind::static_file,       ProviderKind::exec,
    ProviderKind::github_app,        ProviderKind::oauth2_client_credentials,
    ProviderKind::oauth2_jwt_bearer, ProviderKind::vault,
    ProviderKind::aws_static,        ProviderKind::aws_assume_role,
    ProviderKind::aws_web_identity,  ProviderKind::aws_secrets_manager,
    ProviderKind::aws_instance,      ProviderKind::aws_container};

constexpr std::string_view kCommonKeys[] = {"provider", "env", "refresh_before", "timeout",
                                            "ca_file"};

bool valid_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

// Shared with inject_rules.cpp (declared in credentials.hpp).

bool valid_token_char(char c) {
  // RFC 9110 tchar: what a header field name is made of.
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool visible_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c <= '~'; });
}

bool lower_name(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A GitHub owner or repository name: letters, digits, '-', '_', '.'; 1-100 characters.
bool github_name(std::string_view text) {
  return !text.empty() && text.size() <= 100 && text != "." && text != ".." &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
         });
}

fs::path resolve(const fs::path& base_dir, const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() ? p : (base_dir / p).lexically_normal();
}

// A required or optional non-empty string key.
std::optional<std::string> read_text(const toml::table& table, std::string_view key,
                                     const std::string& path, bool required, ErrorSink& sink) {
  const std::string key_path = join_key(path, key);
  const toml::node* node = table.get(key);
  if (node == nullptr) {
    if (required) sink.add(table.source(), key_path, "missing required key");
    return std::nullopt;
  }
  auto value = read_string(*node, key_path, sink);
  if (value && value->empty()) {
    sink.add(node->source(), key_path, "must not be empty");
    return std::nullopt;
  }
  return value;
}

void read_file_key(const toml::table& table, std::string_view key, const std::string& path,
                   bool required, const fs::path& base_dir, std::string& out, ErrorSink& sink) {
  if (auto text = read_text(table, key, path, required, sink)) {
    out = resolve(base_dir, *text).string();
  }
}

// An https URL without userinfo, query or fragment, for a token endpoint.
void read_https_url(const toml::table& table, std::string_view key, const std::string& path,
                    bool required, std::string& out, ErrorSink& sink) {
  const auto text = read_text(table, key, path, required, sink);
  if (!text) return;
  const auto target = policy::parse_target(*text);
  const bool https = target && text->starts_with("https://");
  if (!https || !policy::normalize_host(target->host).is_valid() ||
      target->rest.find_first_of("?#") != std::string_view::npos) {
    sink.add(table.get(key)->source(), join_key(path, key),
             "expected an https URL such as \"https://api.github.com\", got " + in_quotes(*text));
    return;
  }
  out = *text;
  while (out.ends_with('/')) out.pop_back();
}

std::optional<std::chrono::milliseconds> read_duration(const toml::table& table,
                                                       std::string_view key,
                                                       const std::string& path,
                                                       std::chrono::milliseconds min,
                                                       ErrorSink& sink) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return std::nullopt;
  const std::string key_path = join_key(path, key);
  const auto text = read_string(*node, key_path, sink);
  if (!text) return std::nullopt;
  std::string error;
  auto value = parse_duration(*text, &error);
  if (!value) {
    sink.add(node->source(), key_path, error);
    return std::nullopt;
  }
  if (*value < min) {
    sink.add(node->source(), key_path,
             "must be at least " + std::to_string(min.count()) + "ms, got " + in_quotes(*text));
    return std::nullopt;
  }
  return value;
}

std::optional<secrets::Permissions> read_permissions(const toml::node& node,
                                                     const std::string& path, ErrorSink& sink) {
  const toml::table* table = read_table(node, path, sink);
  if (table == nullptr) return std::nullopt;
  secrets::Permissions out;
  for (const auto& [key, value] : *table) {
    const std::string name(key.str());
    const std::string item_path = join_key(path, name);
    if (!lower_name(name)) {
      sink.add(key.source(), item_path,
               "invalid permission name " + in_quotes(name) +
                   ": GitHub's names are lowercase, e.g. contents, metadata, pull_requests");
      continue;
    }
    const auto level = read_string(value, item_path, sink);
    if (!level) continue;
    if (*level != "read" && *level != "write" && *level != "admin") {
      sink.add(value.source(), item_path,
               "expected \"read\", \"write\" or \"admin\", got " + in_quotes(*level));
      continue;
    }
    out.emplace(name, *level);
  }
  return out;
}

namespace {

std::optional<ProviderKind> read_provider(const toml::table& table, const std::string& path,
                                          ErrorSink& sink) {
  const auto text = read_text(table, "provider", path, true, sink);
  if (!text) return std::nullopt;
  for (const ProviderKind kind : kKinds) {
    if (*text == secrets::kind_name(kind)) return kind;
  }
  sink.add(table.get("provider")->source(), join_key(path, "provider"),
           "unknown provider " + in_quotes(*text) +
               ": expected \"static\", \"exec\", \"github_app\", \"oauth2_client_credentials\", "
               "\"oauth2_jwt_bearer\", \"vault\", \"aws_static\", \"aws_assume_role\", "
               "\"aws_web_identity\", \"aws_instance\", \"aws_container\" or "
               "\"aws_secrets_manager\"");
  return std::nullopt;
}

std::vector<std::string_view> provider_keys(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::static_file:
      return {"file"};
    case ProviderKind::exec:
      return {"command", "ttl"};
    case ProviderKind::github_app:
      return {"app_id",  "private_key_file", "installation_id", "installation_account",
              "api_url", "permissions"};
    case ProviderKind::oauth2_client_credentials:
      return {"token_url", "client_id", "client_secret_file", "scopes", "audience", "ttl"};
    case ProviderKind::aws_static:
      return {"access_key_id_file", "secret_access_key_file", "session_token_file"};
    case ProviderKind::aws_secrets_manager:
      return {"aws_credential", "secret_id",    "region", "json_field",
              "version_stage",  "endpoint_url", "ttl"};
    case ProviderKind::oauth2_jwt_bearer:
      return {"key_file", "token_url", "issuer", "subject", "scopes", "audience"};
    case ProviderKind::vault:
      return {"address",  "auth",       "token_file", "role_id", "secret_id_file", "role",
              "jwt_file", "auth_mount", "namespace",  "path",    "field",          "ttl"};
    case ProviderKind::aws_assume_role:
      return {"aws_credential", "role_arn",     "role_session_name",
              "region",         "endpoint_url", "duration"};
    case ProviderKind::aws_web_identity:
      return {"web_identity_token_file",
              "role_arn",
              "role_session_name",
              "region",
              "endpoint_url",
              "duration"};
    case ProviderKind::aws_instance:
      return {"endpoint_url", "role_name"};
    case ProviderKind::aws_container:
      return {"endpoint_url", "relative_uri", "authorization_token_file"};
  }
  return {};
}

// Unknown keys, inline secrets, and keys of another provider, each with its own message.
void check_credential_keys(const toml::table& table, const std::string& path,
                           std::optional<ProviderKind> kind, ErrorSink& sink) {
  std::vector<std::string_view> known(std::begin(kCommonKeys), std::end(kCommonKeys));
  if (kind) {
    const auto own = provider_keys(*kind);
    known.insert(known.end(), own.begin(), own.end());
  }
  for (const auto& [key, value] : table) {
    const std::string_view name = key.str();
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string key_path = join_key(path, name);
    const auto secret = std::find_if(std::begin(kInlineSecrets), std::end(kInlineSecrets),
                                     [&](const InlineSecret& s) { return s.key == name; });
    if (secret != std::end(kInlineSecrets)) {
      sink.add(key.source(), key_path,
               "secrets are never written in the config: put it in a file (mode 0600) and name "
               "that with " +
                   std::string(secret->instead));
      continue;
    }
    if (!kind) continue;  // the provider is unknown or missing: already reported
    std::optional<ProviderKind> owner;
    for (const ProviderKind other : kKinds) {
      const auto keys = provider_keys(other);
      if (std::find(keys.begin(), keys.end(), name) != keys.end()) owner = other;
    }
    if (owner) {
      sink.add(key.source(), key_path,
               in_quotes(name) + " is a key of provider " + in_quotes(secrets::kind_name(*owner)) +
                   ", not of " + in_quotes(secrets::kind_name(*kind)));
      continue;
    }
    std::string message = "unknown key " + in_quotes(name);
    if (const auto suggestion = closest_name(name, known)) {
      message += "; did you mean " + in_quotes(*suggestion) + "?";
    }
    sink.add(key.source(), key_path, message);
  }
}

void read_exec(const toml::table& table, const std::string& path, CredentialSpec& spec,
               ErrorSink& sink) {
  const std::string key_path = join_key(path, "command");
  if (const toml::node* node = table.get("command")) {
    if (const auto items = read_string_array(*node, key_path, sink)) {
      for (const StringItem& item : *items) spec.command.push_back(item.value);
      if (node->as_array()->empty()) {
        sink.add(node->source(), key_path, "must not be empty");
      } else if (!items->empty() && !fs::path(items->front().value).is_absolute()) {
        sink.add(items->front().where, items->front().path,
                 "the program must be an absolute path (it runs without a shell or PATH lookup), "
                 "got " +
                     in_quotes(items->front().value));
      }
    }
  } else {
    sink.add(table.source(), key_path, "missing required key (the argv of the helper)");
  }
  if (auto ttl = read_duration(table, "ttl", path, std::chrono::seconds(1), sink)) {
    spec.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
  }
}

void read_github_app(const toml::table& table, const std::string& path, const fs::path& base_dir,
                     CredentialSpec& spec, ErrorSink& sink) {
  constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
  if (const toml::node* node = table.get("app_id")) {
    spec.app_id = read_int(*node, join_key(path, "app_id"), 1, kMaxId, sink).value_or(0);
  } else {
    sink.add(table.source(), join_key(path, "app_id"), "missing required key");
  }
  read_file_key(table, "private_key_file", path, true, base_dir, spec.private_key_file, sink);
  const toml::node* id = table.get("installation_id");
  const toml::node* account = table.get("installation_account");
  if (id != nullptr && account != nullptr) {
    sink.add(account->source(), join_key(path, "installation_account"),
             "give installation_id or installation_account, not both");
  } else if (id == nullptr && account == nullptr) {
    sink.add(table.source(), join_key(path, "installation_id"),
             "missing required key (or installation_account, the organisation or user the app "
             "is installed on)");
  }
  if (id != nullptr) {
    spec.installation_id =
        read_int(*id, join_key(path, "installation_id"), 1, kMaxId, sink).value_or(0);
  }
  if (account != nullptr) {
    if (auto text = read_text(table, "installation_account", path, true, sink)) {
      if (!github_name(*text) || text->find('.') != std::string::npos) {
        sink.add(account->source(), join_key(path, "installation_account"),
                 "invalid account name " + in_quotes(*text));
      } else {
        spec.installation_account = *text;
      }
    }
  }
  read_https_url(table, "api_url", path, false, spec.api_url, sink);
  if (const toml::node* node = table.get("permissions")) {
    spec.permissions = read_permissions(*node, join_key(path, "permissions"), sink)
                           .value_or(secrets::Permissions{});
  }
}

void read_scopes(const toml::table& table, const std::string& path, CredentialSpec& spec,
                 ErrorSink& sink) {
  if (const toml::node* node = table.get("scopes")) {
    if (const auto items = read_string_array(*node, join_key(path, "scopes"), sink)) {
      for (const StringItem& item : *items) {
        // RFC 6749 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
        if (item.value.empty() || !visible_ascii(item.value) ||
            item.value.find_first_of("\"\\") != std::string::npos) {
          sink.add(item.where, item.path, "invalid scope " + in_quotes(item.value));
        } else {
          spec.scopes.push_back(item.value);
        }
      }
    }
  }
}

void read_oauth2(const toml::table& table, const std::string& path, const fs::path& base_dir,
                 CredentialSpec& spec, ErrorSink& sink) {
  read_https_url(table, "token_url", path, true, spec.token_url, sink);
  if (auto id = read_text(table, "client_id", path, true, sink)) spec.client_id = *id;
  read_file_key(table, "client_secret_file", path, true, base_dir, spec.client_secret_file, sink);
  read_scopes(table, path, spec, sink);
  if (auto audience = read_text(table, "audience", path, false, sink)) spec.audience = *audience;
  if (auto ttl = read_duration(table, "ttl", path, std::chrono::seconds(1), sink)) {
    spec.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
  }
}

// `region`, when given: an AWS region (lowercase letters, digits and '-'). Whether it was.
bool read_region(const toml::table& table, const std::string& path, CredentialSpec& spec,
                 ErrorSink& sink) {
  const auto text = read_text(table, "region", path, false, sink);
  if (!text) return false;
  if (std::all_of(text->begin(), text->end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      })) {
    spec.region = *text;
  } else {
    sink.add(table.get("region")->source(), join_key(path, "region"),
             "invalid region " + in_quotes(*text) + ", e.g. \"us-east-1\"");
  }
  return true;
}

void read_sts(const toml::table& table, const std::string& path, const fs::path& base_dir,
              CredentialSpec& spec, ErrorSink& sink) {
  if (spec.kind == ProviderKind::aws_assume_role) {
    if (auto text = read_text(table, "aws_credential", path, true, sink)) {
      spec.aws_credential = *text;
    }
  } else {
    read_file_key(table, "web_identity_token_file", path, true, base_dir,
                  spec.web_identity_token_file, sink);
  }
  if (auto text = read_text(table, "role_arn", path, true, sink)) {
    if (!text->starts_with("arn:") || !visible_ascii(*text)) {
      sink.add(table.get("role_arn")->source(), join_key(path, "role_arn"),
               "expected a role ARN such as \"arn:aws:iam::123456789012:role/agents\", got " +
                   in_quotes(*text));
    } else {
      spec.role_arn = *text;
    }
  }
  if (auto text = read_text(table, "role_session_name", path, false, sink)) {
    // STS: 2-64 characters of [\w+=,.@-].
    const bool valid = text->size() >= 2 && text->size() <= 64 &&
                       std::all_of(text->begin(), text->end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
                                std::string_view("_+=,.@-").find(c) != std::string_view::npos;
                       });
    if (valid) {
      spec.role_session_name = *text;
    } else {
      sink.add(table.get("role_session_name")->source(), join_key(path, "role_session_name"),
               "expected 2-64 characters of letters, digits and _+=,.@-");
    }
  }
  read_region(table, path, spec, sink);
  read_https_url(table, "endpoint_url", path, false, spec.endpoint_url, sink);
  spec.ttl = std::chrono::hours(1);
  if (auto v = read_duration(table, "duration", path, std::chrono::minutes(15), sink)) {
    spec.ttl = std::chrono::duration_cast<std::chrono::seconds>(*v);
  }
}

void read_secrets_manager(const toml::table& table, const std::string& path, CredentialSpec& spec,
                          ErrorSink& sink) {
  if (auto text = read_text(table, "aws_credential", path, true, sink)) spec.aws_credential = *text;
  if (auto text = read_text(table, "secret_id", path, true, sink)) spec.secret_id = *text;
  if (auto text = read_text(table, "json_field", path, false, sink)) spec.json_field = *text;
  if (auto text = read_text(table, "version_stage", path, false, sink)) spec.version_stage = *text;
  read_https_url(table, "endpoint_url", path, false, spec.endpoint_url, sink);
  // The region: given, else the ARN's (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME).
  if (!read_region(table, path, spec, sink) && spec.secret_id.starts_with("arn:")) {
    std::string_view arn = spec.secret_id;
    for (int i = 0; i < 3 && arn.find(':') != std::string_view::npos; ++i) {
      arn.remove_prefix(arn.find(':') + 1);
    }
    spec.region = std::string(arn.substr(0, arn.find(':')));
  }
  if (spec.region.empty() && table.contains("secret_id") && !table.contains("region")) {
    sink.add(table.source(), join_key(path, "region"),
             "missing required key (the secret's region, unless secret_id is an ARN)");
  }
  if (auto ttl = read_duration(table, "ttl", path, std::chrono::seconds(1), sink)) {
    spec.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
  }
}

// The URL of a credential endpoint AWS runs beside sandgate: http:// on one of `hosts` (the
// addresses the SDKs accept for it) or on loopback (a local agent, a test stand-in); with
// `https_too`, any https:// URL as well, as the SDKs allow for the container endpoint. Plain
// HTTP anywhere else would hand the keys to whoever sits on the path. `base`: no path (IMDS's
// paths are appended), trailing '/' dropped.
void read_local_endpoint(const toml::table& table, const std::string& path,
                         std::span<const std::string_view> hosts, bool https_too, bool base,
                         std::string& out, ErrorSink& sink) {
  const auto text = read_text(table, "endpoint_url", path, false, sink);
  if (!text) return;
  const auto target = policy::parse_target(*text);
  const policy::Host host = target ? policy::normalize_host(target->host) : policy::Host{};
  const bool https = text->starts_with("https://");
  bool allowed = host.is_valid() && target->rest.find('#') == std::string_view::npos &&
                 (!base || target->rest.find_first_not_of('/') == std::string_view::npos);
  if (allowed && !https) {
    allowed =
        text->starts_with("http://") &&
        (host.is_address()
             ? policy::classify(host.address) == policy::AddressClass::loopback ||
                   std::find(hosts.begin(), hosts.end(), host.address.to_string()) != hosts.end()
             : host.name == "localhost");
  }
  if (!allowed || (https && !https_too)) {
    std::string expected;
    for (const std::string_view h : hosts) {
      const bool v6 = h.find(':') != std::string_view::npos;
      expected += "http://" + (v6 ? "[" + std::string(h) + "]" : std::string(h)) + ", ";
    }
    expected += std::string(https_too ? "http:// on a loopback address or an https URL"
                                      : "or http:// on a loopback address") +
                (base ? ", without a path" : "");
    sink.add(table.get("endpoint_url")->source(), join_key(path, "endpoint_url"),
             "expected " + expected + ", got " + in_quotes(*text));
    return;
  }
  out = *text;
  while (base && out.ends_with('/')) out.pop_back();
}

void read_aws_instance(const toml::table& table, const std::string& path, CredentialSpec& spec,
                       ErrorSink& sink) {
  constexpr std::string_view kImds[] = {"169.254.169.254", "fd00:ec2::254"};
  read_local_endpoint(table, path, kImds, false, true, spec.endpoint_url, sink);
  if (auto text = read_text(table, "role_name", path, false, sink)) {
    if (secrets::valid_role_name(*text)) {
      spec.role_name = *text;
    } else {
      sink.add(
          table.get("role_name")->source(), join_key(path, "role_name"),
          "expected an IAM role name (1-64 letters, digits and _+=,.@-), got " + in_quotes(*text));
    }
  }
}

// The container endpoint as the SDKs take it from the environment: endpoint_url is
// AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity: http://169.254.170.23/v1/credentials),
// relative_uri is AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS), on http://169.254.170.2.
void read_aws_container(const toml::table& table, const std::string& path, const fs::path& base_dir,
                        CredentialSpec& spec, ErrorSink& sink) {
  constexpr std::string_view kContainer[] = {"169.254.170.2", "169.254.170.23", "fd00:ec2::23"};
  const toml::node* relative = table.get("relative_uri");
  if (relative != nullptr && table.contains("endpoint_url")) {
    sink.add(relative->source(), join_key(path, "relative_uri"),
             "give endpoint_url or relative_uri, not both");
  } else if (relative != nullptr) {
    if (auto text = read_text(table, "relative_uri", path, true, sink)) {
      if (!text->starts_with('/') || !visible_ascii(*text) ||
          text->find('#') != std::string::npos) {
        sink.add(relative->source(), join_key(path, "relative_uri"),
                 "expected a path such as \"/v2/credentials/...\" (ECS's "
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), got " +
                     in_quotes(*text));
      } else {
        spec.endpoint_url = "http://169.254.170.2" + *text;
      }
    }
  } else if (table.contains("endpoint_url")) {
    read_local_endpoint(table, path, kContainer, true, false, spec.endpoint_url, sink);
  } else {
    sink.add(table.source(), join_key(path, "endpoint_url"),
             "missing required key (or relative_uri: ECS's "
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)");
  }
  read_file_key(table, "authorization_token_file", path, false, base_dir,
                spec.authorization_token_file, sink);
}

void read_vault(const toml::table& table, const std::string& path, const fs::path& base_dir,
                CredentialSpec& spec, ErrorSink& sink) {
  read_https_url(table, "address", path, true, spec.address, sink);
  bool known_auth = true;
  if (auto text = read_text(table, "auth", path, false, sink)) {
    known_auth = *text == "token" || *text == "approle" || *text == "kubernetes";
    if (known_auth) {
      spec.auth = *text;
    } else {
      sink.add(table.get("auth")->source(), join_key(path, "auth"),
               "expected \"token\", \"approle\" or \"kubernetes\", got " + in_quotes(*text));
    }
  }
  // Each method's keys, required with it and refused without it.
  struct MethodKey {
    std::string_view key;
    std::string_view method;
    bool file;
    std::string* out;
  };
  const MethodKey keys[] = {{"token_file", "token", true, &spec.token_file},
                            {"role_id", "approle", false, &spec.role_id},
                            {"secret_id_file", "approle", true, &spec.secret_id_file},
                            {"role", "kubernetes", false, &spec.role},
                            {"jwt_file", "kubernetes", true, &spec.jwt_file}};
  for (const MethodKey& k :
       known_auth ? std::span<const MethodKey>(keys) : std::span<const MethodKey>()) {
    if (k.method != spec.auth) {
      if (const toml::node* at = table.get(k.key)) {
        sink.add(at->source(), join_key(path, k.key),
                 in_quotes(k.key) + " is for auth = " + in_quotes(k.method));
      }
    } else if (k.file) {
      read_file_key(table, k.key, path, true, base_dir, *k.out, sink);
    } else if (auto text = read_text(table, k.key, path, true, sink)) {
      *k.out = *text;
    }
  }
  if (auto text = read_text(table, "auth_mount", path, false, sink)) spec.auth_mount = *text;
  if (auto text = read_text(table, "namespace", path, false, sink)) spec.vault_namespace = *text;
  if (auto text = read_text(table, "path", path, true, sink)) {
    std::string_view p = *text;
    while (p.starts_with('/')) p.remove_prefix(1);
    if (p.starts_with("v1/")) p.remove_prefix(3);
    const bool printable = std::all_of(p.begin(), p.end(), [](char c) {
      return c > ' ' && c <= '~' && c != '?' && c != '#' && c != '%';
    });
    if (p.empty() || !printable) {
      sink.add(
          table.get("path")->source(), join_key(path, "path"),
          "expected a Vault API path such as \"secret/data/agents/api\", got " + in_quotes(*text));
    } else {
      spec.secret_path = std::string(p);
    }
  }
  if (auto text = read_text(table, "field", path, true, sink)) spec.field = *text;
  if (auto ttl = read_duration(table, "ttl", path, std::chrono::seconds(1), sink)) {
    spec.ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
  }
}

std::optional<CredentialSpec> read_credential(const std::string& name, const toml::table& table,
                                              const std::string& path, const fs::path& base_dir,
                                              ErrorSink& sink) {
  const auto kind = read_provider(table, path, sink);
  check_credential_keys(table, path, kind, sink);
  if (!kind) return std::nullopt;
  CredentialSpec spec;
  spec.name = name;
  spec.kind = *kind;
  if (const toml::node* node = table.get("env")) {
    if (const auto items = read_string_array(*node, join_key(path, "env"), sink)) {
      for (const StringItem& item : *items) {
        if (!valid_env_name(item.value)) {
          sink.add(item.where, item.path,
                   "invalid environment variable name " + in_quotes(item.value));
        } else if (std::find(spec.env.begin(), spec.env.end(), item.value) == spec.env.end()) {
          spec.env.push_back(item.value);
        }
      }
    }
  }
  if (auto v = read_duration(table, "refresh_before", path, std::chrono::milliseconds(0), sink)) {
    spec.refresh_before = std::chrono::duration_cast<std::chrono::seconds>(*v);
  }
  if (auto v = read_duration(table, "timeout", path, std::chrono::milliseconds(100), sink)) {
    spec.timeout = *v;
  }
  if (table.contains("ca_file")) {
    if (secrets::uses_https(*kind)) {
      read_file_key(table, "ca_file", path, false, base_dir, spec.ca_file, sink);
    } else {
      sink.add(table.get("ca_file")->source(), join_key(path, "ca_file"),
               "only the HTTPS providers (github_app, oauth2_client_credentials, "
               "oauth2_jwt_bearer, vault, aws_assume_role, aws_web_identity, "
               "aws_secrets_manager, aws_container) use ca_file");
    }
  }
  switch (*kind) {
    case ProviderKind::static_file:
      read_file_key(table, "file", path, true, base_dir, spec.file, sink);
      break;
    case ProviderKind::exec:
      read_exec(table, path, spec, sink);
      break;
    case ProviderKind::github_app:
      read_github_app(table, path, base_dir, spec, sink);
      break;
    case ProviderKind::oauth2_client_credentials:
      read_oauth2(table, path, base_dir, spec, sink);
      break;
    case ProviderKind::aws_static:
      read_file_key(table, "access_key_id_file", path, true, base_dir, spec.access_key_id_file,
                    sink);
      read_file_key(table, "secret_access_key_file", path, true, base_dir,
                    spec.secret_access_key_file, sink);
      read_file_key(table, "session_token_file", path, false, base_dir, spec.session_token_file,
                    sink);
      break;
    case ProviderKind::aws_secrets_manager:
      read_secrets_manager(table, path, spec, sink);
      break;
    case ProviderKind::vault:
      read_vault(table, path, base_dir, spec, sink);
      break;
    case ProviderKind::aws_assume_role:
    case ProviderKind::aws_web_identity:
      read_sts(table, path, base_dir, spec, sink);
      break;
    case ProviderKind::aws_instance:
      read_aws_instance(table, path, spec, sink);
      break;
    case ProviderKind::aws_container:
      read_aws_container(table, path, base_dir, spec, sink);
      break;
    case ProviderKind::oauth2_jwt_bearer:
      read_file_key(table, "key_file", path, true, base_dir, spec.key_file, sink);
      read_https_url(table, "token_url", path, false, spec.token_url, sink);
      if (auto text = read_text(table, "issuer", path, false, sink)) spec.issuer = *text;
      if (auto text = read_text(table, "subject", path, false, sink)) spec.subject = *text;
      read_scopes(table, path, spec, sink);
      if (auto text = read_text(table, "audience", path, false, sink)) spec.audience = *text;
      break;
  }
  return spec;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* error) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = 0;
  if (unit == "ms") scale = 1;
  if (unit == "s") scale = 1'000;
  if (unit == "m") scale = 60'000;
  if (unit == "h") scale = 3'600'000;
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if (ec != std::errc() || end == text.data() || value < 0 || scale == 0 || value > kMax / scale) {
    *error =
        "expected a duration such as \"500ms\", \"30s\", \"10m\" or \"1h\", got " + in_quotes(text);
    return std::nullopt;
  }
  return std::chrono::milliseconds(value * scale);
}

namespace {

// A secret read with AWS keys, or a role assumed with them, names the credential whose keys
// sign its requests: any AWS key source, itself signed with no key it depends on (a cycle
// would only end in timeouts: each fetch waiting for the next).
void check_aws_credentials(const toml::table& table, const Credentials& credentials,
                           ErrorSink& sink) {
  for (const auto& [name, spec] : credentials) {
    if (spec.aws_credential.empty()) continue;
    const toml::node* at = table.get(name)->as_table()->get("aws_credential");
    const std::string key = join_key(join_key("credentials", name), "aws_credential");
    const auto base = credentials.find(spec.aws_credential);
    if (base == credentials.end()) {
      sink.add(at->source(), key, "unknown credential " + in_quotes(spec.aws_credential));
      continue;
    }
    if (!secrets::is_aws(base->second.kind)) {
      sink.add(at->source(), key,
               "credential " + in_quotes(spec.aws_credential) + " is " +
                   in_quotes(secrets::kind_name(base->second.kind)) +
                   ", not AWS keys (provider = \"aws_static\", \"aws_instance\", "
                   "\"aws_container\", \"aws_web_identity\" or \"aws_assume_role\")");
      continue;
    }
    // Along the chain of sources; a cycle that does not come back here is reported at its
    // own members, so the walk stops after as many steps as there are credentials.
    std::string chain = name;
    auto next = base;
    for (std::size_t steps = 0; next != credentials.end() && steps < credentials.size(); ++steps) {
      chain += " -> " + next->first;
      if (next->first == name) {
        sink.add(at->source(), key, "the keys' sources form a cycle: " + chain);
        break;
      }
      next = credentials.find(next->second.aws_credential);
    }
  }
}

}  // namespace

CredentialsSection read_credentials(const toml::node& node, const fs::path& base_dir,
                                    ErrorSink& sink) {
  CredentialsSection out;
  const toml::table* table = read_table(node, "credentials", sink);
  if (table == nullptr) return out;
  for (const auto& [key, value] : *table) {
    const std::string name(key.str());
    const std::string path = join_key("credentials", name);
    if (name == "placeholder_key_file" && !value.is_table()) {
      read_file_key(*table, "placeholder_key_file", "credentials", false, base_dir,
                    out.placeholder_key_file, sink);
      continue;
    }
    if (!valid_id(name)) {
      sink.add(key.source(), path,
               "invalid credential name " + in_quotes(name) +
                   ": use 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'");
    }
    const toml::table* body = read_table(value, path, sink);
    if (body == nullptr) continue;
    if (auto spec = read_credential(name, *body, path, base_dir, sink)) {
      out.credentials.emplace(name, std::move(*spec));
    }
  }
  check_aws_credentials(*table, out.credentials, sink);
  return out;
}

}  // namespace sandgate::config::detail
