#include "config/sandboxes.hpp"

#include <algorithm>
#include <utility>

#include "config/addresses.hpp"
#include "config/request_rules.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::config::detail {

namespace {

constexpr std::string_view kIdRule = "use 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'";

std::optional<std::vector<std::uint16_t>> read_ports(const toml::node& node,
                                                     const std::string& path, ErrorSink& sink) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    sink.add(node.source(), path,
             "expected an array of integers, got " + std::string(type_name(node)));
    return std::nullopt;
  }
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto port = read_int(*array->get(i), join_index(path, i), 1, 65535, sink);
    if (!port) continue;
    const auto value = static_cast<std::uint16_t>(*port);  // in range: checked above
    if (std::find(ports.begin(), ports.end(), value) == ports.end()) ports.push_back(value);
  }
  return ports;
}

// Reads a list of rule strings (`allow`, `deny_cidrs`, ...) with `parse`, naming each bad
// entry as an invalid `what` with the parser's reason.
template <class Source, class Parse>
void read_rules(const toml::table& table, std::string_view key, const std::string& path,
                const std::string& origin_prefix, std::string_view what, Parse parse,
                std::vector<Source>& out, ErrorSink& sink) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return;
  const auto items = read_string_array(*node, join_key(path, key), sink);
  if (!items) return;
  const std::string origin = join_key(origin_prefix, key);
  for (const StringItem& item : *items) {
    std::string reason;
    if (auto parsed = parse(item.value, &reason)) {
      out.push_back({std::move(*parsed), origin});
    } else {
      sink.add(item.where, item.path,
               "invalid " + std::string(what) + " " + in_quotes(item.value) +
                   (reason.empty() ? "" : ": ") + reason);
    }
  }
}

void read_patterns(const toml::table& table, std::string_view key, const std::string& path,
                   const std::string& origin_prefix, std::vector<policy::RuleSource>& out,
                   ErrorSink& sink) {
  read_rules(
      table, key, path, origin_prefix, "host pattern",
      [](std::string_view text, std::string* error) {
        return policy::parse_host_pattern(text, error);
      },
      out, sink);
}

// `opaque`: an exact host name with an explicit port, nothing wider.
void read_opaque(const toml::table& table, const std::string& path,
                 const std::string& origin_prefix, std::vector<policy::RuleSource>& out,
                 ErrorSink& sink) {
  read_rules(
      table, "opaque", path, origin_prefix, "opaque destination",
      [](std::string_view text, std::string* error) -> std::optional<policy::HostPattern> {
        auto pattern = policy::parse_host_pattern(text, error);
        if (pattern && (pattern->wildcard || !pattern->port)) {
          *error = "use an exact host name and a port, e.g. \"ssh.example.com:443\"";
          return std::nullopt;
        }
        return pattern;
      },
      out, sink);
}

void read_cidrs(const toml::table& table, std::string_view key, const std::string& path,
                const std::string& origin_prefix, std::vector<policy::CidrSource>& out,
                ErrorSink& sink) {
  read_rules(
      table, key, path, origin_prefix, "CIDR",
      [](std::string_view text, std::string* error) { return policy::parse_cidr(text, error); },
      out, sink);
}

void read_host_services(const toml::table& table, const std::string& path,
                        const std::string& origin_prefix,
                        std::vector<policy::HostServiceSource>& out, ErrorSink& sink) {
  const toml::node* node = table.get("allow_host_services");
  if (node == nullptr) return;
  const auto items = read_string_array(*node, join_key(path, "allow_host_services"), sink);
  if (!items) return;
  const std::string origin = join_key(origin_prefix, "allow_host_services");
  for (const StringItem& item : *items) {
    std::string error;
    if (auto service = parse_host_service(item.value, &error)) {
      out.push_back({*service, origin});
    } else {
      sink.add(item.where, item.path, std::move(error));
    }
  }
}

// `inspect`: host patterns, or IP-literal destinations with their port ("10.0.0.5:443",
// "[fd00::5]:443"): an address has no pattern, so it names one exact address and port.
void read_inspect(const toml::table& table, const std::string& path,
                  const std::string& origin_prefix, RuleSet& rules, ErrorSink& sink) {
  const toml::node* node = table.get("inspect");
  if (node == nullptr) return;
  const auto items = read_string_array(*node, join_key(path, "inspect"), sink);
  if (!items) return;
  const std::string origin = join_key(origin_prefix, "inspect");
  for (const StringItem& item : *items) {
    std::string error;
    const auto authority = policy::parse_authority(item.value);
    if (authority && policy::normalize_host(authority->host).is_address()) {
      if (!authority->port) {
        sink.add(item.where, item.path,
                 "an address is inspected on one port: write it with the port, e.g. " +
                     in_quotes(std::string(item.value) + ":443"));
      } else if (auto service = parse_host_service(item.value, &error)) {
        rules.inspect_addresses.push_back({*service, origin});
      } else {
        sink.add(item.where, item.path, std::move(error));
      }
    } else if (auto pattern = policy::parse_host_pattern(item.value, &error)) {
      rules.inspect.push_back({std::move(*pattern), origin});
    } else {
      sink.add(
          item.where, item.path,
          "invalid host pattern " + in_quotes(item.value) + (error.empty() ? "" : ": ") + error);
    }
  }
}

// The keys a profile and a sandbox share. `path` prefixes error keys; `origin_prefix`
// prefixes rule origins ("profiles.default", "sandboxes.ci").
RuleSet read_rules(const toml::table& table, const std::string& path,
                   const std::string& origin_prefix, const Credentials& credentials,
                   ErrorSink& sink) {
  RuleSet rules;
  if (const toml::node* node = table.get("ports")) {
    rules.ports = read_ports(*node, join_key(path, "ports"), sink);
  }
  read_patterns(table, "allow", path, origin_prefix, rules.allow, sink);
  read_patterns(table, "deny", path, origin_prefix, rules.deny, sink);
  read_cidrs(table, "allow_cidrs", path, origin_prefix, rules.allow_cidrs, sink);
  read_cidrs(table, "deny_cidrs", path, origin_prefix, rules.deny_cidrs, sink);
  read_opaque(table, path, origin_prefix, rules.opaque, sink);
  read_host_services(table, path, origin_prefix, rules.allow_host_services, sink);
  read_inspect(table, path, origin_prefix, rules, sink);
  read_http_rules(table, path, origin_prefix, rules.http_rules, sink);
  read_git_rules(table, path, origin_prefix, rules.git_rules, sink);
  read_inject_rules(table, path, origin_prefix, credentials, rules.inject, sink);
  if (const toml::node* node = table.get("unlisted")) {
    const std::string key = join_key(path, "unlisted");
    if (const auto mode = read_string(*node, key, sink)) {
      if (*mode == "hold" || *mode == "deny") {
        rules.hold_unlisted = *mode == "hold";
      } else {
        sink.add(node->source(), key, "expected \"deny\" or \"hold\", got \"" + *mode + "\"");
      }
    }
  }
  return rules;
}

template <class T>
void append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// The hosts of inject rules are inspected: a credential is only ever added inside a stream
// sandgate terminated.
void inspect_inject_hosts(const std::vector<secrets::InjectRule>& rules,
                          std::vector<policy::RuleSource>& inspect) {
  for (const secrets::InjectRule& rule : rules) {
    for (const policy::HostPattern& host : rule.hosts) inspect.push_back({host, rule.origin});
  }
}

// The lists a profile's sandboxes share, its inject rules' hosts inspected.
std::shared_ptr<const policy::RuleLists> shared_lists(const RuleSet& profile) {
  auto lists = std::make_shared<policy::RuleLists>();
  lists->allow = profile.allow;
  lists->deny = profile.deny;
  lists->allow_cidrs = profile.allow_cidrs;
  lists->deny_cidrs = profile.deny_cidrs;
  lists->opaque = profile.opaque;
  lists->allow_host_services = profile.allow_host_services;
  lists->inspect = profile.inspect;
  lists->inspect_addresses = profile.inspect_addresses;
  lists->http_rules = profile.http_rules;
  lists->git_rules = profile.git_rules;
  inspect_inject_hosts(profile.inject, lists->inspect);
  return lists;
}

// The profile's rules (shared, read first), then the sandbox's own; the sandbox's ports
// replace the profile's.
policy::SandboxSpec merge(const std::string& id, const RuleSet* profile, RuleSet& own) {
  policy::SandboxSpec spec;
  spec.id = id;
  if (own.ports) {
    spec.ports = *own.ports;
  } else if (profile != nullptr && profile->ports) {
    spec.ports = *profile->ports;
  }
  if (profile != nullptr) spec.profile = profile->shared;
  spec.allow = std::move(own.allow);
  spec.deny = std::move(own.deny);
  spec.allow_cidrs = std::move(own.allow_cidrs);
  spec.deny_cidrs = std::move(own.deny_cidrs);
  spec.opaque = std::move(own.opaque);
  spec.allow_host_services = std::move(own.allow_host_services);
  spec.inspect = std::move(own.inspect);
  spec.inspect_addresses = std::move(own.inspect_addresses);
  spec.http_rules = std::move(own.http_rules);
  spec.git_rules = std::move(own.git_rules);
  inspect_inject_hosts(own.inject, spec.inspect);
  spec.hold_unlisted =
      own.hold_unlisted.value_or(profile != nullptr && profile->hold_unlisted.value_or(false));
  return spec;
}

// A token goes into a Proxy-Authorization header: visible ASCII only, so it survives
// copy-paste and Basic encoding unchanged. Its value never appears in a message.
void check_token(const toml::node& node, const std::string& path, std::string& token,
                 ErrorSink& sink) {
  auto value = read_string(node, path, sink);
  if (!value) return;
  if (value->empty()) {
    sink.add(node.source(), path, "must not be empty");
    return;
  }
  const bool visible =
      std::all_of(value->begin(), value->end(), [](char c) { return c > ' ' && c <= '~'; });
  if (!visible) {
    sink.add(node.source(), path, "must be printable ASCII without spaces or control characters");
    return;
  }
  token = std::move(*value);
}

}  // namespace

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

Profiles read_profiles(const toml::node& node, const Credentials& credentials, ErrorSink& sink) {
  Profiles profiles;
  const toml::table* table = read_table(node, "profiles", sink);
  if (table == nullptr) return profiles;
  for (auto&& [key, value] : *table) {
    const std::string name(key.str());
    const std::string path = join_key("profiles", name);
    if (!valid_id(name)) {
      sink.add(key.source(), path,
               "invalid profile name " + in_quotes(name) + ": " + std::string(kIdRule));
    }
    const toml::table* body = read_table(value, path, sink);
    if (body == nullptr) {
      RuleSet empty;  // reported; keeps "unknown profile" from piling on
      empty.shared = shared_lists(empty);
      profiles.emplace(name, std::move(empty));
      continue;
    }
    check_known_keys(*body, path,
                     {"ports", "allow", "deny", "allow_cidrs", "deny_cidrs", "opaque",
                      "allow_host_services", "inspect", "http_rules", "git", "inject", "unlisted"},
                     sink);
    RuleSet rules = read_rules(*body, path, path, credentials, sink);
    rules.shared = shared_lists(rules);
    profiles.emplace(name, std::move(rules));
  }
  return profiles;
}

void SandboxCollector::read_main_table(const toml::node& node, ErrorSink& sink) {
  const toml::table* table = read_table(node, "sandboxes", sink);
  if (table == nullptr) return;
  for (auto&& [key, value] : *table) {
    const std::string id(key.str());
    const std::string path = join_key("sandboxes", id);
    const toml::table* body = read_table(value, path, sink);
    if (body == nullptr) continue;
    check_known_keys(*body, path,
                     {"profile", "token", "sources", "ports", "allow", "deny", "allow_cidrs",
                      "deny_cidrs", "opaque", "allow_host_services", "allow_all_hosts", "inspect",
                      "http_rules", "git", "inject", "unlisted"},
                     sink);
    read_sandbox(id, *body, path, path, key.source(), &body->source(), sink);
  }
}

void SandboxCollector::read_drop_in(const toml::table& root, ErrorSink& sink, bool launcher_made) {
  in_drop_in_ = true;
  launcher_made_ = launcher_made;
  check_known_keys(root, "",
                   {"id", "profile", "token", "sources", "ports", "allow", "deny", "allow_cidrs",
                    "deny_cidrs", "opaque", "allow_host_services", "allow_all_hosts", "inspect",
                    "http_rules", "git", "inject", "unlisted"},
                   sink);
  const toml::node* id_node = root.get("id");
  std::optional<std::string> id;
  if (id_node == nullptr) {
    sink.add_unlocated("id", "missing required key");
  } else {
    id = read_string(*id_node, "id", sink);
  }
  // Without a usable id the rest is still checked, so every error is reported at once.
  read_sandbox(id, root, "", "id", id_node != nullptr ? id_node->source() : root.source(), nullptr,
               sink);
  in_drop_in_ = false;
  launcher_made_ = false;
}

bool SandboxCollector::claim_id(const std::string& id, const std::string& id_key,
                                const toml::source_region& id_where, ErrorSink& sink) {
  if (!valid_id(id)) {
    sink.add(id_where, id_key, "invalid sandbox id " + in_quotes(id) + ": " + std::string(kIdRule));
    return false;
  }
  if (const auto first = seen_.find(id); first != seen_.end()) {
    sink.add(id_where, id_key,
             "duplicate sandbox id " + in_quotes(id) + ", first defined at " +
                 describe_location(first->second.file, first->second.where));
    return false;
  }
  seen_.emplace(id, Site{sink.file(), id_where});
  return true;
}

void SandboxCollector::read_sandbox(const std::optional<std::string>& maybe_id,
                                    const toml::table& body, const std::string& path,
                                    const std::string& id_key, const toml::source_region& id_where,
                                    const toml::source_region* table_where, ErrorSink& sink) {
  const std::string id = maybe_id.value_or("");
  const bool usable = maybe_id.has_value() && claim_id(id, id_key, id_where, sink);

  Sandbox sandbox;
  sandbox.file = sink.file();
  sandbox.in_drop_in = in_drop_in_;
  sandbox.launcher_made = launcher_made_;
  const RuleSet* profile = nullptr;
  if (const toml::node* node = body.get("profile")) {
    const std::string key = join_key(path, "profile");
    if (auto name = read_string(*node, key, sink)) {
      if (const auto found = profiles_.find(*name); found != profiles_.end()) {
        profile = &found->second;
        sandbox.profile = std::move(*name);
      } else {
        std::vector<std::string_view> names;
        for (const auto& [known, rules] : profiles_) names.push_back(known);
        std::string message = "unknown profile " + in_quotes(*name);
        if (const auto suggestion = closest_name(*name, names)) {
          message += "; did you mean " + in_quotes(*suggestion) + "?";
        }
        sink.add(node->source(), key, std::move(message));
      }
    }
  }
  if (const toml::node* node = body.get("sources")) {
    read_sources(*node, join_key(path, "sources"), id, sandbox.sources, sink);
  }
  if (const toml::node* node = body.get("token")) {
    check_token(*node, join_key(path, "token"), sandbox.token, sink);
  } else if (!body.contains("sources")) {
    const std::string key = join_key(path, "token");
    const std::string message = "missing required key (a sandbox needs a token, sources, or both)";
    if (table_where != nullptr) {
      sink.add(*table_where, key, message);
    } else {
      sink.add_unlocated(key, message);
    }
  }
  RuleSet own = read_rules(body, path, join_key("sandboxes", id), credentials_, sink);
  sandbox.spec = merge(id, profile, own);
  sandbox.inject = std::move(own.inject);
  if (const toml::node* node = body.get("allow_all_hosts")) {
    sandbox.spec.allow_all_hosts =
        read_bool(*node, join_key(path, "allow_all_hosts"), sink).value_or(false);
  }
  if (usable) sandboxes_.push_back(std::move(sandbox));
}

void SandboxCollector::read_sources(const toml::node& node, const std::string& path,
                                    const std::string& id, std::vector<policy::IpAddress>& out,
                                    ErrorSink& sink) {
  const auto items = read_string_array(node, path, sink);
  if (!items) return;
  for (const StringItem& item : *items) {
    const auto address = parse_strict_ip(item.value);
    if (!address) {
      sink.add(item.where, item.path, invalid_ip_message(item.value));
      continue;
    }
    if (!launcher_made_ && launcher_pool_.contains(*address)) {
      sink.add(item.where, item.path,
               "source address " + in_quotes(item.value) + " is inside [launcher] pool " +
                   launcher_pool_.to_string() +
                   ", which sandgate-launch gives to the sandboxes it makes; choose an address "
                   "outside it, or move the pool");
      continue;
    }
    const auto [first, fresh] = sources_.emplace(*address, Site{sink.file(), item.where});
    if (!fresh) {
      sink.add(item.where, item.path,
               "source address " + in_quotes(item.value) +
                   " already identifies another sandbox, at " +
                   describe_location(first->second.file, first->second.where));
      continue;
    }
    if (!id.empty()) out.push_back(*address);
  }
}

std::vector<Sandbox> SandboxCollector::take() {
  std::sort(sandboxes_.begin(), sandboxes_.end(),
            [](const Sandbox& a, const Sandbox& b) { return a.spec.id < b.spec.id; });
  return std::move(sandboxes_);
}

}  // namespace sandgate::config::detail
