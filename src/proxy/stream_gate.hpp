#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "http/body_tracker.hpp"
#include "policy/policy.hpp"
#include "proxy/relay.hpp"

namespace sandgate::proxy {

struct Session;

// Watches a tunnel's client bytes before they reach upstream: a CONNECT tunnel, and a
// transparent tunnel whose first bytes came only after the peek timeout (so it was dialled
// on a DNS-remembered name). The first bytes are classified by the one first-bytes
// classifier; a ClientHello's SNI and an HTTP request's Host must name the tunnel's host or
// another host the sandbox may reach on this port (Policy::decide_inner_name); a request
// meant for a proxy, malformed TLS or HTTP, and bytes that stay undecided past the bound are
// refused. TLS and anything else (ssh, a binary protocol) then pass unwatched.
//
// A tunnel that began as HTTP/1 stays watched: every later request head (found by framing
// each body, Content-Length or chunked) is classified and decided like the first, so a
// CONNECT or a proxy request sent second to an open proxy is refused too. The stream must go
// on as HTTP/1 requests, except after a request that asked to upgrade (Upgrade and
// "Connection: upgrade"): bytes that are not HTTP/1 there are the new protocol, and watching
// ends.
//
// Lives as long as the relay (captured by its completion); reads the session's snapshot and
// sandbox, which the relay also keeps alive.
class StreamGate final : public TunnelGate {
 public:
  StreamGate(const Session& s, policy::Host tunnel, std::uint16_t port);

  Verdict check(std::span<const std::uint8_t> pending) override;
  // A TLS alert for a TLS client, the 403 denial response for an HTTP one, else nothing.
  std::string_view refusal() const override { return refusal_; }

  // After a refusal: why. Null while the tunnel was let through.
  const policy::Decision* denial() const { return denial_.get(); }
  // The SNI of the ClientHello that was read, if any.
  const std::string& sni() const { return sni_; }

 private:
  enum class Phase {
    first,     // nothing seen yet
    head,      // between HTTP/1 requests: the next must be one
    upgraded,  // after a request that asked to upgrade: HTTP/1 again, or the new protocol
    body,      // inside a request body
  };
  // What to do at the start of `rest` (a request head, or not).
  struct Step {
    std::optional<Verdict> verdict;  // decided (pass, refuse) or waiting (need_more)
    std::size_t consumed = 0;        // else: the head's bytes, now let go
  };
  Step check_start(std::span<const std::uint8_t> rest);
  Step check_head(std::string_view text, std::size_t skipped);
  Verdict refuse(policy::Decision d, bool tls, std::string_view inner_host = {});
  Verdict refuse(policy::Reason reason, bool tls = false);

  const Session& s_;
  policy::Host tunnel_;
  std::uint16_t port_;
  Phase phase_ = Phase::first;
  bool upgrade_ = false;  // the last request asked to upgrade
  std::optional<http::BodyTracker> body_;
  std::unique_ptr<policy::Decision> denial_;  // on the heap: most tunnels are never refused
  std::string sni_;
  std::string refusal_;
};

}  // namespace sandgate::proxy
