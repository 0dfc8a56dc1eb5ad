#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/address_class.hpp"
#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::policy {

// How the sandbox reached sandgate. Every entry mode asks the same question.
enum class EntryMode { http, connect, tls, tcp, dns };
std::string_view mode_name(EntryMode m);

// Why a decision came out the way it did. Names (reason_name) appear in logs and error bodies.
enum class Reason {
  allowed_by_rule,         // a host rule allowed the name
  allowed_by_cidr,         // an allow_cidrs range allowed the address
  allowed_all_hosts,       // the sandbox allows every host name
  unknown_sandbox,         // no such sandbox
  invalid_host,            // not a valid name or IP literal
  no_matching_rule,        // nothing allowed it
  denied_by_rule,          // a deny rule matched (deny beats allow)
  port_not_allowed,        // the host is allowed, but not on this port
  ip_literal_not_allowed,  // IP literal destination not inside an allow_cidrs range
  special_address,         // a resolved/literal address in a special range not opened by config
  always_denied_address,   // link-local, metadata, unspecified, multicast, broadcast
  proxy_loop,              // one of sandgate's own listeners
  // Decided by the data path on what it sees inside a connection:
  sni_mismatch,    // TLS SNI names a host other than the CONNECT target (fronting)
  sni_missing,     // TLS without SNI to a named CONNECT target
  tls_malformed,   // bytes that start like TLS but are not a valid ClientHello
  nested_proxy,    // a proxy request (CONNECT, absolute-form) inside a tunnel
  host_mismatch,   // an HTTP Host inside a tunnel names a host other than the tunnel's
  http_malformed,  // bytes inside a tunnel that start like HTTP but are not a valid head
  // Bytes on port 80 or 443 that are neither HTTP nor TLS, to a host no `opaque` rule names.
  unrecognized_protocol,
  // A transparent connection with no SNI or Host whose address no DNS answer of the sandbox
  // names (and no allow_cidrs range opens).
  unnamed_destination,
};
std::string_view reason_name(Reason r);

// The outcome of one decision. `rule` names the rule that decided, e.g.
// "profiles.default.allow:*.github.com", or is empty when nothing matched.
struct Decision {
  bool allowed = false;
  Reason reason = Reason::no_matching_rule;
  std::string rule;
  AddressClass address_class = AddressClass::global;  // set for address decisions

  bool is_allowed() const { return allowed; }
};

// One pattern and where it came from (for Decision::rule).
struct RuleSource {
  HostPattern pattern;
  std::string origin;  // e.g. "profiles.default.allow" or "sandboxes.ci.deny"
};
struct CidrSource {
  Cidr cidr;
  std::string origin;
};

// One sandbox's effective rules (profile merged with its own entries), as config builds it.
struct SandboxSpec {
  std::string id;
  std::vector<std::uint16_t> ports{80, 443};  // ports for rules without an explicit port
  std::vector<RuleSource> allow;
  std::vector<RuleSource> deny;
  std::vector<CidrSource> allow_cidrs;
  std::vector<CidrSource> deny_cidrs;
  // host:port pairs (exact names, explicit ports) whose streams may carry bytes other than
  // HTTP or TLS on ports 80 and 443 (ssh over 443, say); see Reason::unrecognized_protocol.
  std::vector<RuleSource> opaque;
  bool allow_all_hosts = false;
};

// A socket endpoint of sandgate itself (never a destination).
struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
};

// The question: may this sandbox reach host:port via this entry mode?
struct Query {
  std::string_view sandbox;
  std::string_view host;  // as the client sent it; normalised inside
  std::uint16_t port = 0;
  EntryMode mode = EntryMode::http;
};

// Everything the policy decides with. Immutable once built; share as
// shared_ptr<const Policy> and swap atomically on reload, so readers take no lock.
// Decision cost does not grow with the number of rules: names are looked up in hash maps
// by exact name and by each parent suffix, addresses by prefix length.
class Policy {
 public:
  Policy(std::vector<SandboxSpec> sandboxes, std::vector<Endpoint> self_endpoints);
  ~Policy();
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Decides on the destination as named. For a name, an allow still requires every resolved
  // address to pass check_address before dialling. For an IP literal, the address checks
  // are part of this decision.
  Decision decide(const Query& q) const;
  // Same, with a host already normalised (avoids normalising twice).
  Decision decide(std::string_view sandbox, const Host& host, std::uint16_t port,
                  EntryMode mode) const;

  // A name the stream itself carries inside a tunnel opened for `tunnel` (a TLS SNI when
  // `mode` is tls, an HTTP Host when it is http) must name that host, or another host the
  // sandbox may reach on this port (domain fronting, THREATS 4). `inner` is null when the
  // stream carries none: TLS without SNI is refused to a named tunnel (clients send none only
  // to IP literals); HTTP without Host (HTTP/1.0) passes.
  Decision decide_inner_name(std::string_view sandbox, const Host& tunnel, std::uint16_t port,
                             const std::string* inner, EntryMode mode) const;

  // Checks one address the proxy is about to dial (a resolved address of an allowed name).
  Decision check_address(std::string_view sandbox, const IpAddress& a, std::uint16_t port) const;

  bool has_sandbox(std::string_view id) const;
  std::size_t sandbox_count() const;

 private:
  Decision decide_destination(std::string_view sandbox, const Host& host, std::uint16_t port,
                              EntryMode mode) const;
  struct Compiled;
  std::unique_ptr<const Compiled> impl_;
};

// A config line that would allow what the decision refused, for the denial body, e.g.
// `allow = ["api.example.com:8443"]` or `allow_cidrs = ["10.1.2.3/32"]`; empty when no
// config can allow it (invalid host, always-denied address, unknown sandbox, loop).
std::string suggest_rule(const Decision& d, const Host& host, std::uint16_t port);

}  // namespace sandgate::policy
