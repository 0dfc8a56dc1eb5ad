#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy {

// One HTTP request as policy sees it, whatever codec and entry mode it came through.
struct RequestFacts {
  std::string_view sandbox;
  const Host* host = nullptr;  // the request's authority, normalised
  std::uint16_t port = 0;      // its port (the transparent listener: the port the sandbox dialled)
  std::string_view method;
  std::string_view path;  // the request target as sent: path and query ("*" for OPTIONS *)
  // The value of each method-override field line the request carries (kMethodOverrideFields:
  // X-HTTP-Method-Override, ...), as sent; the http rules decide on those methods too.
  std::span<const std::string_view> method_overrides;
  // A CONNECT sent where requests are meant for origins (a transparent connection): asking
  // whatever listens there to relay.
  bool connect_to_origin = false;
  // Inside an intercepted stream: the name whose TLS sandgate terminated and the port the
  // stream was opened to. Null for plain HTTP (explicit proxy, transparent port 80).
  const Host* intercepted = nullptr;
  std::uint16_t intercepted_port = 0;
  // On a stream to the DNS sink (StreamVerdict::sunk): the request is refused whatever it
  // asks, on its host's decision (stale_dns_answer when that allows it now).
  bool sunk = false;
  // An operator allowed this held destination (Decision::held): allowed_by_operator.
  bool granted = false;
};

// The one decision over one request, in this order (docs/policy.md):
//  1. a CONNECT where origin requests belong: nested_proxy;
//  2. inside an intercepted stream, a request for another host or port than the intercepted
//     one: misdirected_request (answered 421; fronting and HTTP/2 connection coalescing end
//     here, and nothing reaches the other host);
//  3. the host rules on the request's host and port (Policy::decide, mode http): every
//     request on a connection is decided on its own, so a second one cannot ride on the
//     first's name;
//  4. for a git request (smart or dumb HTTP, recognize_git) to a host a git rule names, the
//     git rules (Decision::git says which operation it was, whatever the outcome);
//  5. the http rules naming the host, first match wins, as the method sent and as every
//     method an override asks for (request_methods): the request must pass as each of them.
// An ambiguous path (CanonicalPath::ambiguous) to a host any http or git rule names is
// refused (ambiguous_path) before 4 and 5. A refusal by a rule in audit mode comes back
// allowed with Decision::audit set. A sunk request is refused at 3, even when allowed there
// (stale_dns_answer); Decision::git then says what git asked, so that git prints the refusal.
Decision decide_request(const Policy& policy, const RequestFacts& facts);

}  // namespace sandgate::policy
