#include "config/sections.hpp"

#include <limits>
#include <map>
#include <utility>

#include "config/addresses.hpp"
#include "policy/address_class.hpp"
#include "policy/host.hpp"

namespace sandgate::config::detail {

namespace {

// Upper bound of every size, count and duration: big enough for any real setting, small
// enough that no conversion (to a 32-bit timer, to size_t) can overflow.
constexpr std::int64_t kMaxLimit = std::numeric_limits<std::int32_t>::max();

// A listen address with where it was written, to report duplicates.
struct PlacedListener {
  ListenAddress address;
  std::string path;
  toml::source_region where;
};

std::optional<PlacedListener> read_listener(const std::string& text, std::string path,
                                            const toml::source_region& where, ErrorSink& sink) {
  std::string error;
  auto address = parse_listen_address(text, &error);
  if (!address) {
    sink.add(where, std::move(path), std::move(error));
    return std::nullopt;
  }
  return PlacedListener{std::move(*address), std::move(path), where};
}

// Two listeners on the same fixed address and port cannot both bind.
void check_duplicate_listeners(const std::vector<PlacedListener>& listeners, ErrorSink& sink) {
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const ListenAddress& a = listeners[i].address;
      const ListenAddress& b = listeners[j].address;
      if (a.port != 0 && a.port == b.port && a.address == b.address) {
        sink.add(listeners[i].where, listeners[i].path,
                 "duplicate listen address " + in_quotes(a.text) + ", also at " +
                     describe_location(sink.file(), listeners[j].where));
        break;
      }
    }
  }
}

std::optional<std::int64_t> read_limit(const toml::table& table, std::string_view key,
                                       std::int64_t min, const std::string& prefix,
                                       ErrorSink& sink) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return std::nullopt;
  return read_int(*node, join_key(prefix, key), min, kMaxLimit, sink);
}

void read_dns_hosts(const toml::node& node, Dns& dns, ErrorSink& sink) {
  const toml::table* table = read_table(node, "dns.hosts", sink);
  if (table == nullptr) return;
  std::map<std::string, toml::source_region> seen;
  for (const auto& [key_ptr, value_ptr] : in_document_order(*table)) {
    const toml::key& key = *key_ptr;
    const toml::node& value = *value_ptr;
    const std::string path = join_key("dns.hosts", key.str());
    const policy::Host host = policy::normalize_host(key.str());
    if (host.is_address()) {
      sink.add(key.source(), path,
               in_quotes(key.str()) + " is an IP address; static answers are for host names");
    } else if (!host.is_name()) {
      sink.add(
          key.source(), path,
          "invalid host name " + in_quotes(key.str()) + ": " + std::string(host.invalid_reason));
    } else if (const auto first = seen.find(host.name); first != seen.end()) {
      sink.add(key.source(), path,
               "duplicate host name " + in_quotes(host.name) + ", first written at " +
                   describe_location(sink.file(), first->second));
    } else {
      seen.emplace(host.name, key.source());
    }
    const auto items = read_string_array(value, path, sink);
    if (!items) continue;
    if (value.as_array()->empty()) {
      sink.add(value.source(), path, "expected at least one address");
      continue;
    }
    std::vector<policy::IpAddress> addresses;
    for (const StringItem& item : *items) {
      if (const auto address = parse_strict_ip(item.value)) {
        addresses.push_back(*address);
      } else {
        sink.add(item.where, item.path, invalid_ip_message(item.value));
      }
    }
    if (host.is_name()) dns.hosts[host.name] = std::move(addresses);
  }
}

}  // namespace

Listeners default_listeners() {
  std::string error;
  Listeners listeners;
  listeners.explicit_proxy.push_back(*parse_listen_address("127.0.0.1:3128", &error));
  return listeners;
}

Listeners read_listeners(const toml::node& node, ErrorSink& sink) {
  Listeners listeners;
  const toml::table* table = read_table(node, "listeners", sink);
  if (table == nullptr) return listeners;
  check_known_keys(*table, "listeners",
                   {"explicit", "transparent", "dns", "admin", "admin_token_file"}, sink);

  std::vector<PlacedListener> placed;
  const auto read_list = [&](std::string_view key, std::vector<ListenAddress>& out) {
    const toml::node* list = table->get(key);
    if (list == nullptr) return false;
    const std::string path = join_key("listeners", key);
    if (const auto items = read_string_array(*list, path, sink)) {
      for (const StringItem& item : *items) {
        if (auto listener = read_listener(item.value, item.path, item.where, sink)) {
          out.push_back(listener->address);
          placed.push_back(std::move(*listener));
        }
      }
    }
    return true;
  };
  if (!read_list("explicit", listeners.explicit_proxy)) {
    listeners.explicit_proxy = default_listeners().explicit_proxy;
  }
  read_list("transparent", listeners.transparent);
  read_list("dns", listeners.dns);
  if (const toml::node* admin_node = table->get("admin")) {
    if (const auto text = read_string(*admin_node, "listeners.admin", sink)) {
      if (auto listener = read_listener(*text, "listeners.admin", admin_node->source(), sink)) {
        listeners.admin = listener->address;
        placed.push_back(std::move(*listener));
      }
    }
  }
  if (const toml::node* file = table->get("admin_token_file")) {
    if (auto path = read_string(*file, "listeners.admin_token_file", sink)) {
      if (path->empty() || path->front() != '/') {
        sink.add(file->source(), "listeners.admin_token_file", "must be an absolute path");
      } else {
        listeners.admin_token_file = std::move(*path);
      }
    }
  }
  check_duplicate_listeners(placed, sink);
  return listeners;
}

Limits read_limits(const toml::node& node, ErrorSink& sink) {
  Limits limits;
  const toml::table* table = read_table(node, "limits", sink);
  if (table == nullptr) return limits;
  const std::string prefix = "limits";
  check_known_keys(
      *table, prefix,
      {"max_request_line_bytes", "max_header_bytes", "header_timeout_ms", "connect_timeout_ms",
       "idle_timeout_ms", "max_connections", "max_connections_per_sandbox", "peek_timeout_ms",
       "max_unauthenticated_connections", "max_unauthenticated_per_source", "auth_timeout_ms",
       "max_dns_queries_per_sandbox", "upstream_keepalive_ms", "max_idle_upstream_connections",
       "hold_timeout_ms"},
      sink);
  // Every value is within [1, kMaxLimit], so the casts below cannot truncate.
  const auto size = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  const auto ms = [](std::int64_t v) { return std::chrono::milliseconds(v); };
  if (auto v = read_limit(*table, "max_request_line_bytes", 1, prefix, sink)) {
    limits.max_request_line_bytes = size(*v);
  }
  if (auto v = read_limit(*table, "max_header_bytes", 1, prefix, sink)) {
    limits.max_header_bytes = size(*v);
  }
  if (auto v = read_limit(*table, "header_timeout_ms", 1, prefix, sink)) {
    limits.header_timeout = ms(*v);
  }
  if (auto v = read_limit(*table, "connect_timeout_ms", 1, prefix, sink)) {
    limits.connect_timeout = ms(*v);
  }
  if (auto v = read_limit(*table, "idle_timeout_ms", 1, prefix, sink)) {
    limits.idle_timeout = ms(*v);
  }
  if (auto v = read_limit(*table, "hold_timeout_ms", 1, prefix, sink)) {
    limits.hold_timeout = ms(*v);
  }
  if (auto v = read_limit(*table, "peek_timeout_ms", 1, prefix, sink)) {
    limits.peek_timeout = ms(*v);
  }
  if (auto v = read_limit(*table, "max_connections", 1, prefix, sink)) {
    limits.max_connections = size(*v);
  }
  if (auto v = read_limit(*table, "max_connections_per_sandbox", 1, prefix, sink)) {
    limits.max_connections_per_sandbox = size(*v);
  }
  if (auto v = read_limit(*table, "max_unauthenticated_connections", 1, prefix, sink)) {
    limits.max_unauthenticated_connections = size(*v);
  }
  if (auto v = read_limit(*table, "max_unauthenticated_per_source", 1, prefix, sink)) {
    limits.max_unauthenticated_per_source = size(*v);
  }
  if (auto v = read_limit(*table, "auth_timeout_ms", 1, prefix, sink)) {
    limits.auth_timeout = ms(*v);
  }
  if (const toml::node* v = table->get("max_dns_queries_per_sandbox")) {
    if (auto n = read_int(*v, join_key(prefix, "max_dns_queries_per_sandbox"), 1,
                          static_cast<std::int64_t>(kMaxDnsQueriesPerSandbox), sink)) {
      limits.max_dns_queries_per_sandbox = size(*n);
    }
  }
  if (auto v = read_limit(*table, "upstream_keepalive_ms", 0, prefix, sink)) {
    limits.upstream_keepalive = ms(*v);
  }
  if (auto v = read_limit(*table, "max_idle_upstream_connections", 0, prefix, sink)) {
    limits.max_idle_upstream_connections = size(*v);
  }
  return limits;
}

Dns read_dns(const toml::node& node, ErrorSink& sink) {
  Dns dns;
  const toml::table* table = read_table(node, "dns", sink);
  if (table == nullptr) return dns;
  check_known_keys(*table, "dns",
                   {"servers", "timeout_ms", "max_ttl_s", "hosts", "denied_names", "sink_address"},
                   sink);
  if (const toml::node* servers = table->get("servers")) {
    if (const auto items = read_string_array(*servers, "dns.servers", sink)) {
      for (const StringItem& item : *items) {
        std::string error;
        if (check_dns_server(item.value, &error)) {
          dns.servers.push_back(item.value);
        } else {
          sink.add(item.where, item.path, std::move(error));
        }
      }
    }
  }
  if (auto v = read_limit(*table, "timeout_ms", 1, "dns", sink)) {
    dns.timeout = std::chrono::milliseconds(*v);
  }
  // 0 is allowed: answers are then not cached at all.
  if (auto v = read_limit(*table, "max_ttl_s", 0, "dns", sink)) {
    dns.max_ttl = std::chrono::seconds(*v);
  }
  if (const toml::node* hosts = table->get("hosts")) read_dns_hosts(*hosts, dns, sink);
  if (const toml::node* denied = table->get("denied_names")) {
    if (auto v = read_string(*denied, "dns.denied_names", sink)) {
      if (*v == "sink") {
        dns.denied_names = Dns::DeniedNames::sink;
      } else if (*v == "refused") {
        dns.denied_names = Dns::DeniedNames::refused;
      } else {
        sink.add(denied->source(), "dns.denied_names",
                 "expected \"sink\" or \"refused\", got " + in_quotes(*v));
      }
    }
  }
  if (const toml::node* address = table->get("sink_address")) {
    if (auto v = read_string(*address, "dns.sink_address", sink)) {
      const auto ip = parse_strict_ip(*v);
      if (!ip) {
        sink.add(address->source(), "dns.sink_address", invalid_ip_message(*v));
      } else if (!ip->is_v4() || policy::always_denied(policy::classify(*ip)) ||
                 policy::classify(*ip) == policy::AddressClass::loopback) {
        // A sandbox reaches no IPv6 (the launcher drops it), and the kernel never routes
        // these out of the sandbox to the redirect.
        sink.add(address->source(), "dns.sink_address",
                 in_quotes(*v) +
                     " cannot be dialled through the launcher's redirect; use an IPv4 unicast "
                     "address no sandbox needs, e.g. \"192.0.2.254\"");
      } else {
        dns.sink_address = *ip;
      }
    }
  }
  return dns;
}

namespace {

// A non-empty path key of `table` ([section].key), resolved against `base_dir`.
void read_path(const toml::table& table, std::string_view section, std::string_view key,
               const std::filesystem::path& base_dir, std::string& out, ErrorSink& sink) {
  const toml::node* value = table.get(key);
  if (value == nullptr) return;
  const std::string name = join_key(section, key);
  auto text = read_string(*value, name, sink);
  if (!text) return;
  if (text->empty()) {
    sink.add(value->source(), name, "must not be empty");
    return;
  }
  const std::filesystem::path p(*text);
  out = p.is_absolute() ? *text : (base_dir / p).lexically_normal().string();
}

}  // namespace

namespace {

// [log] audit_chain, audit_signing_key, audit_checkpoint_lines, audit_checkpoint_seconds.
void read_audit_chain(const toml::table& table, const std::filesystem::path& base_dir,
                      Logging& logging, ErrorSink& sink) {
  if (const toml::node* chain = table.get("audit_chain")) {
    if (auto v = read_bool(*chain, "log.audit_chain", sink)) logging.audit_chain = *v;
  }
  read_path(table, "log", "audit_signing_key", base_dir, logging.audit_signing_key, sink);
  if (auto v = read_limit(table, "audit_checkpoint_lines", 1, "log", sink)) {
    logging.audit_checkpoint_lines = static_cast<std::uint64_t>(*v);
  }
  if (auto v = read_limit(table, "audit_checkpoint_seconds", 1, "log", sink)) {
    logging.audit_checkpoint_interval = std::chrono::seconds(*v);
  }
  if (!logging.audit_chain && !logging.audit_signing_key.empty()) {
    const toml::node* at = table.get("audit_signing_key");
    sink.add(at->source(), "log.audit_signing_key",
             "signs checkpoints of the hash chain, which audit_chain = false turns off");
  }
}

}  // namespace

Logging read_logging(const toml::node& node, const std::filesystem::path& base_dir,
                     ErrorSink& sink) {
  Logging logging;
  const toml::table* table = read_table(node, "log", sink);
  if (table == nullptr) return logging;
  check_known_keys(*table, "log",
                   {"audit", "audit_chain", "audit_signing_key", "audit_checkpoint_lines",
                    "audit_checkpoint_seconds"},
                   sink);
  read_audit_chain(*table, base_dir, logging, sink);
  const toml::node* audit = table->get("audit");
  if (audit == nullptr) return logging;
  auto value = read_string(*audit, "log.audit", sink);
  if (!value) return logging;
  if (value->empty()) {
    sink.add(audit->source(), "log.audit",
             "expected \"stdout\", \"stderr\", \"off\" or a file path, got an empty string");
  } else if (*value == "stdout" || *value == "stderr" || *value == "off") {
    logging.audit = std::move(*value);
  } else {
    const std::filesystem::path path(*value);
    logging.audit = path.is_absolute() ? *value : (base_dir / path).lexically_normal().string();
  }
  return logging;
}

Interception read_interception(const toml::node& node, const std::filesystem::path& base_dir,
                               ErrorSink& sink) {
  Interception out;
  const toml::table* table = read_table(node, "interception", sink);
  if (table == nullptr) return out;
  const std::string prefix = "interception";
  check_known_keys(*table, prefix,
                   {"ca_cert", "ca_key", "leaf_validity_hours", "leaf_renew_before_hours",
                    "leaf_cache_size", "max_leaf_mints_per_minute", "upstream_ca_file"},
                   sink);
  read_path(*table, prefix, "ca_cert", base_dir, out.ca_cert, sink);
  read_path(*table, prefix, "ca_key", base_dir, out.ca_key, sink);
  read_path(*table, prefix, "upstream_ca_file", base_dir, out.upstream_ca_file, sink);
  if (out.ca_cert.empty() != out.ca_key.empty()) {
    const std::string_view missing = out.ca_cert.empty() ? "ca_cert" : "ca_key";
    sink.add(table->source(), join_key(prefix, missing),
             "ca_cert and ca_key go together (create both with `sandgate ca init DIR`)");
  }
  if (auto v = read_limit(*table, "leaf_validity_hours", 1, prefix, sink)) {
    out.leaf_validity = std::chrono::hours(*v);
  }
  if (auto v = read_limit(*table, "leaf_renew_before_hours", 0, prefix, sink)) {
    out.leaf_renew_before = std::chrono::hours(*v);
  }
  if (out.leaf_renew_before >= out.leaf_validity) {
    const toml::node* at = table->get("leaf_renew_before_hours");
    sink.add(at != nullptr ? at->source() : table->source(),
             join_key(prefix, "leaf_renew_before_hours"),
             "must be shorter than leaf_validity_hours (" +
                 std::to_string(out.leaf_validity.count()) + "), or every connection mints");
  }
  if (auto v = read_limit(*table, "leaf_cache_size", 1, prefix, sink)) {
    out.leaf_cache_size = static_cast<std::size_t>(*v);
  }
  if (auto v = read_limit(*table, "max_leaf_mints_per_minute", 1, prefix, sink)) {
    out.max_leaf_mints_per_minute = static_cast<std::size_t>(*v);
  }
  return out;
}

Launcher read_launcher(const toml::node& node, const std::filesystem::path& base_dir,
                       ErrorSink& sink) {
  Launcher launcher;
  const toml::table* table = read_table(node, "launcher", sink);
  if (table == nullptr) return launcher;
  check_known_keys(*table, "launcher", {"state_dir", "pool", "ca_file", "ready_timeout_ms"}, sink);
  const auto path = [&](std::string_view key, std::string& out) {
    read_path(*table, "launcher", key, base_dir, out, sink);
  };
  path("state_dir", launcher.state_dir);
  path("ca_file", launcher.ca_file);
  if (const toml::node* value = table->get("pool")) {
    if (auto text = read_string(*value, "launcher.pool", sink)) {
      std::string error;
      const auto cidr = policy::parse_cidr(*text, &error);
      if (!cidr) {
        sink.add(value->source(), "launcher.pool", std::move(error));
      } else if (!cidr->network.is_v4() || cidr->prefix > 29) {
        sink.add(value->source(), "launcher.pool",
                 "expected an IPv4 range of /29 or wider (each sandbox takes a /30), got " +
                     in_quotes(*text));
      } else {
        launcher.pool = *cidr;
      }
    }
  }
  if (auto v = read_limit(*table, "ready_timeout_ms", 1, "launcher", sink)) {
    launcher.ready_timeout = std::chrono::milliseconds(*v);
  }
  return launcher;
}

}  // namespace sandgate::config::detail
