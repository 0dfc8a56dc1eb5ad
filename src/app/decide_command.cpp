#include "app/decide_command.hpp"

#include <boost/json.hpp>
#include <iostream>

#include "app/holds_command.hpp"
#include "common/ascii.hpp"
#include "http/client/plain_exchange.hpp"
#include "policy/host.hpp"
#include "policy/path.hpp"
#include "policy/policy.hpp"
#include "policy/request.hpp"
#include "policy/request_rules.hpp"
#include "policy/suggestion.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::app {

namespace {

// RFC 9110 5.6.2: a method is a token.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const bool tchar = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!tchar) return false;
  }
  return true;
}

// The sandbox's grant covering host:port in the running daemon (GET /sandboxes/ID): "" when
// none; *unknown says why the daemon could not be asked.
boost::json::object find_grant(const config::Config& cfg, const std::string& admin_given,
                               const std::string& sandbox, const std::string& host,
                               std::uint16_t port, std::string* unknown) {
  std::string error;
  const std::optional<AdminAddress> admin = admin_address(cfg, admin_given, &error);
  if (!admin || admin->port == 0) {
    *unknown = admin ? "the admin listener's port is chosen at start: give --admin" : error;
    return {};
  }
  http::PlainRequest request;
  request.target = "/sandboxes/" + sandbox;
  const http::PlainAnswer answer =
      http::plain_exchange(admin->host, admin->port, std::move(request), std::chrono::seconds(3));
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(answer.body, ec);
  const boost::json::value* granted = answer.status == 200 && !ec && parsed.is_object()
                                          ? parsed.as_object().if_contains("granted")
                                          : nullptr;
  if (granted == nullptr || !granted->is_array()) {
    *unknown =
        answer.status == 0 ? answer.error : "the daemon answered " + std::to_string(answer.status);
    return {};
  }
  // A name's grant (port 0, from its DNS question's hold) covers every port.
  const std::string exact = host + ":" + std::to_string(port);
  const std::string any = host + ":0";
  for (const boost::json::value& g : granted->as_array()) {
    const boost::json::value* d =
        g.is_object() ? g.as_object().if_contains("destination") : nullptr;
    if (d != nullptr && d->is_string() && (d->as_string() == exact || d->as_string() == any)) {
      return g.as_object();
    }
  }
  return {};
}

}  // namespace

int run_decide(const config::Config& cfg, const std::string& sandbox, const std::string& target,
               const DecideRequest& request, const std::string& admin) {
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
  // The request target a client would send: --path, else what follows the URL's authority
  // (the fragment is never sent), else "/".
  std::string method;
  std::string request_target;
  if (request.given()) {
    const std::string_view rest = parsed->rest.substr(0, parsed->rest.find('#'));
    if (request.path && !rest.empty()) {
      std::cerr << "sandgate decide: TARGET \"" << target
                << "\" has a path and --path gives another; give the path once\n";
      return 2;
    }
    if (request.path && request.path->empty()) {
      std::cerr << "sandgate decide: --path must not be empty\n";
      return 2;
    }
    if (request.method && !is_token(*request.method)) {
      std::cerr << "sandgate decide: --method \"" << *request.method
                << "\" is not an HTTP method token\n";
      return 2;
    }
    method = request.method.value_or("GET");
    request_target = request.path            ? *request.path
                     : rest.empty()          ? std::string("/")
                     : rest.starts_with('?') ? "/" + std::string(rest)
                                             : std::string(rest);
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
  policy::RequestFacts facts;
  if (request.given()) {
    // As the proxy fills RequestFacts (proxy/request_filter.cpp) for a request inside an
    // intercepted stream to this host and port; an http:// TARGET is plain HTTP, seen by the
    // explicit proxy without interception. Its authority is the intercepted one, so it is
    // never misdirected.
    facts.sandbox = sandbox;
    facts.host = &host;
    facts.port = port;
    facts.method = method;
    facts.path = request_target;
    if (!iequals_ascii(parsed->scheme, "http")) {
      facts.intercepted = &host;
      facts.intercepted_port = port;
    }
  }
  const auto decide = [&](bool granted) {
    facts.granted = granted;
    return request.given() ? policy::decide_request(*policy, facts)
                           : policy->decide(sandbox, host, port, policy::EntryMode::http, granted);
  };
  policy::Decision d = decide(false);
  // Held: what an operator's grant in the running daemon makes of it.
  boost::json::object grant;
  std::string grants_unknown;
  if (d.held) {
    grant = find_grant(cfg, admin, sandbox, host.display(), port, &grants_unknown);
    if (!grant.empty()) d = decide(true);
  }

  boost::json::object out;
  out["decision"] = d.allowed ? "allow" : d.held ? "hold" : "deny";
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
  if (request.given()) {
    out["method"] = method;
    // The path the rules matched (the query is not theirs), as the audit line shows it.
    const policy::CanonicalPath canonical = policy::canonicalize_path(request_target);
    out["path"] = canonical.path;
    if (canonical.ambiguous) out["path_ambiguous"] = true;
    if (d.git.op != policy::GitOperation::none) {
      out["git"] = policy::git_operation_name(d.git.op);
      out["repository"] = d.git.repo;
    }
    if (d.audit) out["would_deny"] = policy::reason_name(d.reason);
  }
  if (!grant.empty()) out["grant"] = grant;
  if (d.held) {
    out["hold_timeout_ms"] = cfg.limits.hold_timeout.count();
    if (!grants_unknown.empty()) out["grants_unknown"] = grants_unknown;
  }
  if (!d.allowed || d.audit) {
    // Placed where the sandbox is defined, as the 403 body and the audit line place it.
    const policy::Suggestion s = policy::suggest(config::home_of(cfg, sandbox), host, port, d);
    if (s) {
      out["suggestion"] = s.text();
      if (!s.launcher_allow.empty() && s.place != policy::Suggestion::Place::launcher) {
        out["suggestion_launcher"] = s.launcher_allow;
      }
    } else {
      out["no_suggestion"] = s.why_none;
    }
  }
  std::cout << boost::json::serialize(out) << "\n";
  return d.allowed ? 0 : 3;
}

}  // namespace sandgate::app
