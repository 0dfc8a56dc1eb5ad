#include "app/decide_command.hpp"

#include <boost/json.hpp>
#include <iostream>

#include "policy/host.hpp"
#include "policy/policy.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::app {

int run_decide(const config::Config& cfg, const std::string& sandbox, const std::string& target) {
  // The daemon's own parser: what it refuses as a request target or Host (400), decide refuses.
  const auto parsed = policy::parse_target(target);
  if (!parsed) {
    std::cerr << "sandgate decide: cannot parse target \"" << target
              << "\" (expected host, host:port, [IPv6]:port or a http(s) URL, as a client "
                 "would send it)\n";
    return 2;
  }
  if (!cfg.find_sandbox(sandbox)) {
    std::cerr << "sandgate decide: no sandbox \"" << sandbox << "\" in " << cfg.path << "\n";
    return 2;
  }
  const std::uint16_t port = parsed->port.value_or(443);
  // The daemon's own listeners, as far as the config fixes them (port 0 is chosen at start).
  std::vector<policy::Endpoint> self;
  for (const auto& listen : cfg.listeners.explicit_proxy) {
    if (listen.port != 0) self.push_back({listen.address, listen.port});
  }
  if (cfg.listeners.admin && cfg.listeners.admin->port != 0) {
    self.push_back({cfg.listeners.admin->address, cfg.listeners.admin->port});
  }
  const auto policy = cfg.build_policy(std::move(self));
  const policy::Host host = policy::normalize_host(parsed->host);
  const policy::Decision d = policy->decide(sandbox, host, port, policy::EntryMode::http);

  boost::json::object out;
  out["decision"] = d.allowed ? "allow" : "deny";
  out["reason"] = policy::reason_name(d.reason);
  out["rule"] = d.rule;
  out["sandbox"] = sandbox;
  // Shown as the audit log shows it: a long host keeps its rightmost labels, marked "…".
  const telemetry::ShownHost shown = telemetry::shown_host(host.display());
  out["host"] = shown.text;
  if (shown.shortened) out["host_shortened"] = true;
  out["host_kind"] = host.is_name() ? "name" : host.is_address() ? "address" : "invalid";
  out["port"] = port;
  if (host.is_address()) out["address_class"] = policy::class_name(d.address_class);
  if (!host.is_valid()) out["detail"] = host.invalid_reason;
  if (!d.allowed) {
    if (const std::string line = policy::suggest_rule(d, host, port); !line.empty()) {
      out["suggestion"] = line;
    }
  }
  std::cout << boost::json::serialize(out) << "\n";
  return d.allowed ? 0 : 3;
}

}  // namespace sandgate::app
