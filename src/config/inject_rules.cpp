// The [[...inject]] rules of profiles and sandboxes (declared in credentials.hpp, with the
// reading helpers shared with the [credentials] reader).
#include <algorithm>

#include "common/hop_by_hop.hpp"
#include "config/credentials.hpp"
#include "policy/path.hpp"

namespace sandgate::config::detail {

namespace {

using secrets::ProviderKind;

std::optional<secrets::InjectAs> read_as(const toml::table& rule, const std::string& path,
                                         ErrorSink& sink) {
  const std::string key_path = join_key(path, "as");
  const toml::node* node = rule.get("as");
  if (node == nullptr) {
    sink.add(rule.source(), key_path,
             "missing required key (\"bearer\", \"basic\", \"header\" or \"aws_sigv4\")");
    return std::nullopt;
  }
  const auto text = read_string(*node, key_path, sink);
  if (!text) return std::nullopt;
  if (*text == "bearer") return secrets::InjectAs::bearer;
  if (*text == "basic") return secrets::InjectAs::basic;
  if (*text == "header") return secrets::InjectAs::header;
  if (*text == "aws_sigv4") return secrets::InjectAs::aws_sigv4;
  sink.add(node->source(), key_path,
           "expected \"bearer\", \"basic\", \"header\" or \"aws_sigv4\", got " + in_quotes(*text));
  return std::nullopt;
}

// Header fields sandgate itself owns on the way out, or that would change how the request is
// framed or routed: never a credential's header.
bool reserved_header(std::string_view name) {
  return iequals_ascii(name, "host") || iequals_ascii(name, "content-length") ||
         hop_by_hop_field(name);
}

void read_injection_style(const toml::table& rule, const std::string& path, secrets::InjectRule& r,
                          ErrorSink& sink) {
  const auto as = read_as(rule, path, sink);
  if (as) r.as = *as;
  const auto only_for = [&](std::string_view key, std::string_view style) {
    if (const toml::node* node = rule.get(key); node != nullptr && as) {
      sink.add(node->source(), join_key(path, key),
               in_quotes(key) + " is only for as = " + in_quotes(style));
    }
  };
  if (as == secrets::InjectAs::basic) {
    if (auto user = read_text(rule, "user", path, false, sink)) {
      if (!visible_ascii(*user) || user->find(':') != std::string::npos) {
        sink.add(rule.get("user")->source(), join_key(path, "user"),
                 "must be printable ASCII without spaces or ':'");
      } else {
        r.user = *user;
      }
    } else if (!rule.contains("user")) {
      sink.add(rule.source(), join_key(path, "user"),
               "missing required key for as = \"basic\" (git over HTTPS with a GitHub token: "
               "user = \"x-access-token\")");
    }
  } else {
    only_for("user", "basic");
  }
  if (as == secrets::InjectAs::header) {
    if (auto header = read_text(rule, "header", path, false, sink)) {
      if (!std::all_of(header->begin(), header->end(), valid_token_char)) {
        sink.add(rule.get("header")->source(), join_key(path, "header"),
                 "invalid header name " + in_quotes(*header));
      } else if (reserved_header(*header)) {
        sink.add(rule.get("header")->source(), join_key(path, "header"),
                 in_quotes(*header) + " cannot carry a credential");
      } else {
        r.header = *header;
      }
    } else if (!rule.contains("header")) {
      sink.add(rule.source(), join_key(path, "header"),
               "missing required key for as = \"header\" (the header name, e.g. \"X-Api-Key\")");
    }
    if (auto format = read_text(rule, "format", path, false, sink)) {
      const auto first = format->find("{token}");
      const bool printable =
          std::all_of(format->begin(), format->end(), [](char c) { return c >= ' ' && c <= '~'; });
      if (first == std::string::npos || format->find("{token}", first + 1) != std::string::npos) {
        sink.add(rule.get("format")->source(), join_key(path, "format"),
                 "must contain \"{token}\" exactly once, e.g. \"Token {token}\"");
      } else if (!printable) {
        sink.add(rule.get("format")->source(), join_key(path, "format"), "must be printable ASCII");
      } else {
        r.format = *format;
      }
    }
  } else {
    only_for("header", "header");
    only_for("format", "header");
  }
}

void read_path_prefixes(const toml::table& rule, const std::string& path, secrets::InjectRule& r,
                        ErrorSink& sink) {
  const toml::node* node = rule.get("path_prefixes");
  if (node == nullptr) return;
  const std::string key_path = join_key(path, "path_prefixes");
  const auto items = read_string_array(*node, key_path, sink);
  if (!items) return;
  if (node->as_array()->empty()) {
    sink.add(node->source(), key_path, "must not be empty; leave it out to match any path");
    return;
  }
  for (const StringItem& item : *items) {
    const policy::CanonicalPath canonical = policy::canonicalize_path(item.value);
    if (!item.value.starts_with('/') || canonical.ambiguous || canonical.has_query ||
        canonical.path.find("//") != std::string::npos) {
      sink.add(item.where, item.path,
               "invalid path prefix " + in_quotes(item.value) +
                   ": expected a path starting with '/', without a query or anything ambiguous");
      continue;
    }
    // A trailing '/' survives canonicalisation; it keeps the prefix to what is below it.
    r.path_prefixes.push_back(canonical.path);
  }
}

void read_rule_scope(const toml::table& rule, const std::string& path, secrets::InjectRule& r,
                     ErrorSink& sink) {
  if (const toml::node* node = rule.get("repositories")) {
    const std::string key_path = join_key(path, "repositories");
    if (const auto items = read_string_array(*node, key_path, sink)) {
      if (node->as_array()->empty()) {
        sink.add(node->source(), key_path,
                 "must not be empty; leave it out for every repository of the installation");
      }
      std::string owner;
      for (const StringItem& item : *items) {
        const auto slash = item.value.find('/');
        const std::string_view text(item.value);
        if (slash == std::string::npos || !github_name(text.substr(0, slash)) ||
            !github_name(text.substr(slash + 1))) {
          sink.add(item.where, item.path,
                   "invalid repository " + in_quotes(item.value) + ": expected \"owner/name\"");
          continue;
        }
        std::string this_owner(text.substr(0, slash));
        for (char& c : this_owner) {
          if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
        if (!owner.empty() && owner != this_owner) {
          sink.add(item.where, item.path,
                   "every repository of a rule belongs to one owner (a token is minted for one "
                   "installation); write a rule per owner");
          continue;
        }
        owner = this_owner;
        r.scope.repositories.push_back(item.value);
      }
    }
  }
  if (const toml::node* node = rule.get("permissions")) {
    r.scope.permissions = read_permissions(*node, join_key(path, "permissions"), sink)
                              .value_or(secrets::Permissions{});
  }
  r.scope.normalize();
}

}  // namespace

void read_inject_rules(const toml::table& table, const std::string& path,
                       const std::string& origin_prefix, const Credentials& credentials,
                       std::vector<secrets::InjectRule>& out, ErrorSink& sink) {
  const toml::node* node = table.get("inject");
  if (node == nullptr) return;
  const std::string list_path = join_key(path, "inject");
  const auto* array = node->as_array();
  if (array == nullptr) {
    sink.add(node->source(), list_path,
             "expected an array of tables, got " + std::string(type_name(*node)));
    return;
  }
  const std::string origin = join_key(origin_prefix, "inject");
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string rule_path = join_index(list_path, i);
    const toml::table* rule = read_table(*array->get(i), rule_path, sink);
    if (rule == nullptr) continue;
    check_known_keys(*rule, rule_path,
                     {"hosts", "path_prefixes", "credential", "as", "user", "header", "format",
                      "repositories", "permissions"},
                     sink);
    secrets::InjectRule r;
    r.origin = join_index(origin, i);
    const std::string hosts_path = join_key(rule_path, "hosts");
    if (const toml::node* hosts = rule->get("hosts")) {
      if (const auto items = read_string_array(*hosts, hosts_path, sink)) {
        if (hosts->as_array()->empty()) sink.add(hosts->source(), hosts_path, "must not be empty");
        for (const StringItem& item : *items) {
          std::string reason;
          if (auto pattern = policy::parse_host_pattern(item.value, &reason)) {
            r.hosts.push_back(std::move(*pattern));
          } else {
            sink.add(item.where, item.path,
                     "invalid host pattern " + in_quotes(item.value) +
                         (reason.empty() ? "" : ": ") + reason);
          }
        }
      }
    } else {
      sink.add(rule->source(), hosts_path, "missing required key");
    }
    read_path_prefixes(*rule, rule_path, r, sink);
    const secrets::CredentialSpec* spec = nullptr;
    if (auto name = read_text(*rule, "credential", rule_path, true, sink)) {
      if (const auto it = credentials.find(*name); it != credentials.end()) {
        spec = &it->second;
      } else {
        std::vector<std::string_view> names;
        for (const auto& [known, unused] : credentials) names.push_back(known);
        std::string message = "unknown credential " + in_quotes(*name) +
                              " (define it in the main file as [credentials." + *name + "])";
        if (const auto suggestion = closest_name(*name, names)) {
          message = "unknown credential " + in_quotes(*name) + "; did you mean " +
                    in_quotes(*suggestion) + "?";
        }
        sink.add(rule->get("credential")->source(), join_key(rule_path, "credential"), message);
      }
      r.credential = *name;
    }
    read_injection_style(*rule, rule_path, r, sink);
    // AWS keys go only by signing again, and signing again needs AWS keys.
    if (spec != nullptr && rule->contains("as") &&
        secrets::is_aws(spec->kind) != (r.as == secrets::InjectAs::aws_sigv4)) {
      sink.add(rule->get("as")->source(), join_key(rule_path, "as"),
               secrets::is_aws(spec->kind)
                   ? "credential " + in_quotes(spec->name) +
                         " holds AWS keys, which requests get by being signed again: use as = "
                         "\"aws_sigv4\""
                   : "as = \"aws_sigv4\" signs requests again with AWS keys; credential " +
                         in_quotes(spec->name) + " is " +
                         in_quotes(secrets::kind_name(spec->kind)));
    }
    read_rule_scope(*rule, rule_path, r, sink);
    if (spec != nullptr && spec->kind != ProviderKind::github_app) {
      for (const std::string_view key : {"repositories", "permissions"}) {
        if (const toml::node* at = rule->get(key)) {
          sink.add(at->source(), join_key(rule_path, key),
                   in_quotes(key) + " down-scopes github_app tokens; credential " +
                       in_quotes(spec->name) + " is " + in_quotes(secrets::kind_name(spec->kind)));
        }
      }
      r.scope = {};
    }
    // A role assumed through STS is a session per sandbox, named after it (CloudTrail then says
    // which sandbox acted), unless the credential names one session for all.
    r.session_per_sandbox = spec != nullptr &&
                            (spec->kind == ProviderKind::aws_assume_role ||
                             spec->kind == ProviderKind::aws_web_identity) &&
                            spec->role_session_name.empty();
    if (spec != nullptr && !spec->installation_account.empty()) {
      for (const std::string& repository : r.scope.repositories) {
        const std::string owner = repository.substr(0, repository.find('/'));
        std::string account = spec->installation_account;
        for (char& c : account) {
          if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
        if (owner != account) {
          sink.add(rule->get("repositories")->source(), join_key(rule_path, "repositories"),
                   "repository " + in_quotes(repository) + " is not of " + in_quotes(account) +
                       ", the account credential " + in_quotes(spec->name) + " is installed on");
          break;
        }
      }
    }
    out.push_back(std::move(r));
  }
}

}  // namespace sandgate::config::detail
