#include "proxy/request_filter.hpp"

#include <array>

#include "policy/request.hpp"
#include "proxy/session.hpp"

namespace sandgate::proxy {

namespace {

// The policy decision over the request's destination (policy::decide_request).
class DecisionFilter final : public RequestFilter {
 public:
  boost::asio::awaitable<FilterResult> on_request(const Session& s,
                                                  ProxiedRequest& r) const override {
    policy::RequestFacts facts;
    facts.sandbox = s.sandbox;
    facts.host = r.host;
    facts.port = r.port;
    facts.method = r.method;
    facts.path = r.path;
    facts.connect_to_origin = r.connect_to_origin;
    facts.intercepted = r.intercepted;
    facts.intercepted_port = r.intercepted_port;
    r.decision = policy::decide_request(*s.snap->policy, facts);
    FilterResult out;
    out.next = r.decision.allowed;
    if (!out.next) out.denial = r.decision;
    co_return out;
  }
};

const DecisionFilter kDecision;
const std::array<const RequestFilter*, 1> kChain = {&kDecision};

}  // namespace

std::span<const RequestFilter* const> request_filters() {
  return kChain;
}

boost::asio::awaitable<ChainResult> filter_request(const Session& s, ProxiedRequest& r) {
  for (const RequestFilter* f : request_filters()) {
    FilterResult result = co_await f->on_request(s, r);
    if (result.next) continue;
    if (result.error != Errc::ok) {
      co_return ChainResult{false, r.decision, result.error, std::move(result.message)};
    }
    co_return ChainResult{false, std::move(result.denial), Errc::ok, {}};
  }
  co_return ChainResult{true, r.decision, Errc::ok, {}};
}

}  // namespace sandgate::proxy
