#include "policy/request.hpp"

#include "policy/path.hpp"
#include "policy/request_rules.hpp"

namespace sandgate::policy {

namespace {

bool same_host(const Host& a, const Host& b) {
  if (a.is_name() && b.is_name()) return a.name == b.name;
  if (a.is_address() && b.is_address()) return a.address == b.address;
  return false;
}

}  // namespace

Decision decide_request(const Policy& policy, const RequestFacts& f) {
  if (f.connect_to_origin) {
    Decision d;
    d.reason = Reason::nested_proxy;
    return d;
  }
  if (f.intercepted != nullptr &&
      (!same_host(*f.intercepted, *f.host) || f.intercepted_port != f.port)) {
    Decision d;
    d.reason = Reason::misdirected_request;
    return d;
  }
  Decision d = policy.decide(f.sandbox, *f.host, f.port, EntryMode::http, f.granted);
  if (f.sunk) {
    if (d.allowed) {
      d = Decision{};
      d.reason = Reason::stale_dns_answer;
    }
    const CanonicalPath path = canonicalize_path(f.path);
    d.git = recognize_git(f.method, path.path, path.query);
    return d;
  }
  if (!d.allowed) return d;
  if (auto ruled = policy.decide_request_rules(f.sandbox, *f.host, f.port, f.method, f.path,
                                               f.method_overrides)) {
    return std::move(*ruled);
  }
  return d;
}

}  // namespace sandgate::policy
