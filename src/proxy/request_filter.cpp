#include "proxy/request_filter.hpp"

#include <array>

#include "policy/request.hpp"
#include "proxy/session.hpp"

namespace sandgate::proxy {

namespace {

// The policy decision over the request's destination (policy::decide_request).
class DecisionFilter final : public RequestFilter {
 public:
  FilterResult on_request(const Session& s, ProxiedRequest& r) const override {
    policy::RequestFacts facts;
    facts.sandbox = s.sandbox;
    facts.host = r.host;
    facts.port = r.port;
    facts.method = r.method;
    facts.path = r.path;
    facts.connect_to_origin = r.connect_to_origin;
    facts.intercepted = r.intercepted;
    facts.intercepted_port = r.intercepted_port;
    FilterResult out;
    out.denial = policy::decide_request(*s.snap->policy, facts);
    out.next = out.denial.allowed;
    return out;
  }
};

const DecisionFilter kDecision;
const std::array<const RequestFilter*, 1> kChain = {&kDecision};

}  // namespace

std::span<const RequestFilter* const> request_filters() {
  return kChain;
}

FilterResult filter_request(const Session& s, ProxiedRequest& r) {
  for (const RequestFilter* f : request_filters()) {
    FilterResult result = f->on_request(s, r);
    if (!result.next) return result;
  }
  return {};
}

}  // namespace sandgate::proxy
