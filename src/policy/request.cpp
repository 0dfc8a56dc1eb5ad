#include "policy/request.hpp"

namespace sandgate::policy {

Decision decide_request(const Policy& policy, const RequestFacts& f) {
  if (f.connect_to_origin) {
    Decision d;
    d.reason = Reason::nested_proxy;
    return d;
  }
  return policy.decide(f.sandbox, *f.host, f.port, EntryMode::http);
}

}  // namespace sandgate::policy
