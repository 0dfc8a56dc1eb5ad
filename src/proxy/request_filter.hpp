#pragma once

#include <boost/beast/http/fields.hpp>
#include <cstdint>
#include <span>
#include <string_view>

#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate::proxy {

struct Session;

// One request as every filter sees it, with no wire details: the HTTP/1.1 codec produces it
// today, the HTTP/2 codec of intercepted streams will produce the same.
struct ProxiedRequest {
  std::string_view method;
  std::string_view scheme;   // "http"; "https" once intercepted
  const policy::Host* host;  // the authority's host, normalised
  std::uint16_t port = 0;
  std::string_view path;                         // path and query
  boost::beast::http::fields* fields = nullptr;  // editable (credential injection)
  bool connect_to_origin = false;  // a CONNECT where origin requests belong (transparent)
  // Intercepted: the name (and port) whose TLS sandgate terminated; null otherwise.
  const policy::Host* intercepted = nullptr;
  std::uint16_t intercepted_port = 0;
  // Set by the decision filter: what policy decided for this request (the rule that allowed
  // it, or an audit-mode rule that would have refused it).
  policy::Decision decision;
};

// What a filter decided: go on to the next one, or refuse the request by policy.
struct FilterResult {
  bool next = true;
  policy::Decision denial;  // when !next
};

// What the whole chain decided: `decision` is the policy's (allowed, or the first refusal);
// an allowed request with decision.audit set would have been refused by an audit-mode rule.
struct ChainResult {
  bool allowed = true;
  policy::Decision decision;
};

// One step of the chain every request goes through before it is forwarded (the decision;
// then method and path rules, credential injection). Stateless: one instance serves every
// worker.
class RequestFilter {
 public:
  virtual ~RequestFilter() = default;
  virtual FilterResult on_request(const Session& s, ProxiedRequest& r) const = 0;
};

// The request filters, in order.
std::span<const RequestFilter* const> request_filters();

// Runs the chain; the first filter that refuses ends it.
ChainResult filter_request(const Session& s, ProxiedRequest& r);

}  // namespace sandgate::proxy
