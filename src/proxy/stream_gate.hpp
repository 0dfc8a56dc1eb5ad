#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "policy/policy.hpp"
#include "proxy/relay.hpp"

namespace sandgate::proxy {

struct Session;

// Decides a tunnel on the client's first bytes, before any of them reaches upstream: a
// CONNECT tunnel, and a transparent tunnel whose first bytes came only after the peek timeout
// (so it was dialled on a DNS-remembered name). The bytes are classified by the one
// first-bytes classifier; a ClientHello's SNI and an HTTP request's Host must name the
// tunnel's host or another host the sandbox may reach on this port
// (Policy::decide_inner_name); a request meant for a proxy, malformed TLS or HTTP, and bytes
// that stay undecided past the bound are refused. Anything else (ssh, a binary protocol)
// passes. Lives as long as the relay (captured by its completion); reads the session's
// snapshot and sandbox, which the relay also keeps alive.
class StreamGate final : public FirstBytesGate {
 public:
  StreamGate(const Session& s, policy::Host tunnel, std::uint16_t port);

  Verdict check(std::span<const std::uint8_t> data) override;
  // A TLS alert for a TLS client, the 403 denial response for an HTTP one, else nothing.
  std::string_view refusal() const override { return refusal_; }

  // After a refusal: why. Null while the tunnel was let through.
  const policy::Decision* denial() const { return denial_ ? &*denial_ : nullptr; }
  // The SNI of the ClientHello that was read, if any.
  const std::string& sni() const { return sni_; }

 private:
  Verdict refuse(policy::Decision d, bool tls, std::string_view inner_host = {});
  Verdict check_http(std::string_view text);

  const Session& s_;
  policy::Host tunnel_;
  std::uint16_t port_;
  std::optional<policy::Decision> denial_;
  std::string sni_;
  std::string refusal_;
};

}  // namespace sandgate::proxy
