#include "policy/request.hpp"

namespace sandgate::policy {

namespace {

bool same_host(const Host& a, const Host& b) {
  if (a.kind != b.kind || !a.is_valid()) return false;
  return a.is_name() ? a.name == b.name : a.address == b.address;
}

}  // namespace

Decision decide_request(const Policy& policy, const RequestFacts& f) {
  if (f.connect_to_origin) {
    Decision d;
    d.reason = Reason::nested_proxy;
    return d;
  }
  if (f.intercepted != nullptr &&
      (f.port != f.intercepted_port || !same_host(*f.host, *f.intercepted))) {
    Decision d;
    d.reason = Reason::misdirected_request;
    return d;
  }
  return policy.decide(f.sandbox, *f.host, f.port, EntryMode::http);
}

}  // namespace sandgate::policy
