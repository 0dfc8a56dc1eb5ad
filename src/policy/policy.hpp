#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/address_class.hpp"
#include "policy/address_set.hpp"
#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"
#include "policy/request_rules.hpp"

namespace sandgate::policy {

// How the sandbox reached sandgate. Every entry mode asks the same question.
enum class EntryMode { http, connect, tls, tcp, dns };
std::string_view mode_name(EntryMode m);

// Why a decision came out the way it did. Names (reason_name) appear in logs and error bodies.
enum class Reason {
  allowed_by_rule,         // a rule allowed it (Decision::rule names which: host, http or git)
  allowed_by_cidr,         // an allow_cidrs range allowed the address
  allowed_all_hosts,       // the sandbox allows every host name
  allowed_host_service,    // an allow_host_services entry names this exact address and port
  unknown_sandbox,         // no such sandbox
  invalid_host,            // not a valid name or IP literal
  no_matching_rule,        // nothing allowed it
  denied_by_rule,          // a deny rule matched (deny beats allow)
  port_not_allowed,        // the host is allowed, but not on this port
  ip_literal_not_allowed,  // IP literal destination not inside an allow_cidrs range
  special_address,         // a resolved/literal address in a special range not opened by config
  always_denied_address,   // link-local, metadata, unspecified, multicast, broadcast
  proxy_loop,              // one of sandgate's own listeners
  host_address,            // an address of the sandbox host itself (or the launcher's pool)
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
  // Decided per request by the method, path and git rules (decide_request):
  denied_by_http_rule,    // the first http rule matching the request has action "deny"
  no_matching_http_rule,  // http rules name the host, none matches the method and path
  ambiguous_path,         // the path holds an encoding servers read differently (%2F, ...)
  git_not_allowed,        // git rules name the host; none allows this operation on the repo
  // A request inside an intercepted stream for another host or port than the one whose TLS
  // sandgate terminated (fronting, HTTP/2 connection coalescing): answered 421.
  misdirected_request,
  // A credential placeholder (secrets/placeholder.hpp) on a request its credential is not
  // bound to: another host, plain HTTP, another sandbox's or an unknown one (exfiltration).
  placeholder_misuse,
  // A connection to the DNS sink address (Dns::sink_address) for a name the policy allows now:
  // the sandbox's DNS answer is older than the policy (a reload allowed it since); resolving
  // the name again gives its real address.
  stale_dns_answer,
  // Held destinations (SandboxSpec::hold_unlisted; docs/policy.md, "Held destinations"): an
  // operator answered a hold with "allow" (once, or for the sandbox), or "deny"; or nobody
  // answered before the hold's deadline.
  allowed_by_operator,
  denied_by_operator,
  hold_expired,
};
// The last Reason, for code that lists them all (metrics labels made ahead of time).
inline constexpr Reason kLastReason = Reason::hold_expired;
std::string_view reason_name(Reason r);

// The outcome of one decision. `rule` names the rule that decided, e.g.
// "profiles.default.allow:*.github.com", or is empty when nothing matched.
struct Decision {
  bool allowed = false;
  Reason reason = Reason::no_matching_rule;
  std::string rule;
  AddressClass address_class = AddressClass::global;  // set for address decisions
  // Audit mode: `allowed` is true only because the rule that refuses the request is in audit
  // mode (or, for no_matching_http_rule, git_not_allowed and ambiguous_path, because every
  // rule naming the host is). `reason` and `rule` then say what would have refused it; the
  // proxy lets the request through and logs that. Never set on a refusal.
  bool audit = false;
  // Set by decide_request for a git smart-HTTP request, whatever the outcome, so that a
  // refusal can be answered the way git prints it (GitRequest::advertisement).
  GitRequest git;
  // no_matching_http_rule: the method (uppercase) and canonical path no rule matched, so
  // that policy::suggest can write the rule that would (the method an override asked for,
  // when that is the one refused).
  std::string refused_method;
  std::string refused_path;
  // no_matching_rule in a sandbox that holds such destinations (SandboxSpec::hold_unlisted):
  // the proxy holds the stream or request for an operator's answer instead of refusing it,
  // then decides again with the answer (StreamFacts::granted, RequestFacts::granted).
  bool held = false;
  // denied_by_operator: what the operator told the sandbox (may be empty).
  std::string message;

  bool is_allowed() const { return allowed; }
};

// The refusal of a request that carries a placeholder of `credential` ("" when whose is not
// known) where it may not go (secrets::check_placeholders or the body's tripwire said so):
// reason placeholder_misuse, rule "credentials.NAME". `git`: the request as git sees it, so a
// git client is answered the way git prints it.
Decision placeholder_denial(std::string_view credential, GitRequest git = {});

// One pattern and where it came from (for Decision::rule).
struct RuleSource {
  HostPattern pattern;
  std::string origin;  // e.g. "profiles.default.allow" or "sandboxes.ci.deny"
};
struct CidrSource {
  Cidr cidr;
  std::string origin;
};

// A socket endpoint: an address and a port.
struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
};

// "10.201.0.1:8080" or "[fd00::1]:8080".
std::string endpoint_text(const Endpoint& e);

// One allow_host_services entry: a service of the sandbox host a sandbox may reach.
struct HostServiceSource {
  Endpoint service;
  std::string origin;  // e.g. "profiles.dev.allow_host_services"
};

// The rules written in one place: a profile, or one sandbox itself.
struct RuleLists {
  std::vector<RuleSource> allow;
  std::vector<RuleSource> deny;
  std::vector<CidrSource> allow_cidrs;
  std::vector<CidrSource> deny_cidrs;
  // host:port pairs (exact names, explicit ports) whose streams may carry bytes other than
  // HTTP or TLS on ports 80 and 443 (ssh over 443, say); see Reason::unrecognized_protocol.
  std::vector<RuleSource> opaque;
  // Exact address:port pairs opened although they are addresses of the sandbox host.
  std::vector<HostServiceSource> allow_host_services;
  // Hosts whose TLS is terminated so that each request inside is decided (Policy::inspects);
  // the hosts of http_rules and git_rules are inspected too.
  std::vector<RuleSource> inspect;
  // IP-literal destinations inspected (exact address and port; rules name only hosts).
  std::vector<HostServiceSource> inspect_addresses;
  std::vector<HttpRule> http_rules;  // in order
  std::vector<GitRule> git_rules;    // likewise

  bool empty() const;
};

// One sandbox's rules, as config builds it: its profile's (shared by every sandbox that uses
// the profile, compiled once per Policy) and its own (the RuleLists it derives from). Every
// list reads as the profile's entries followed by the sandbox's own, in that order: first
// match, deny before allow and the most specific CIDR decide exactly as over one merged list.
struct SandboxSpec : RuleLists {
  std::string id;
  std::vector<std::uint16_t> ports{80, 443};  // ports for rules without an explicit port
  bool allow_all_hosts = false;
  // A name no rule allows or denies (no_matching_rule, on any of its ports) is held for an
  // operator's answer rather than refused (config `unlisted = "hold"`); a DNS question too (its
  // hold is for the name on any port). Never an IP literal or an address.
  bool hold_unlisted = false;
  std::shared_ptr<const RuleLists> profile;  // null: no profile
};

// The spec with its profile's rules copied in front of its own (and `profile` null): the
// same decisions, one list per kind. For tests and tools that read the effective lists.
SandboxSpec merged(const SandboxSpec& spec);

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
//
// `self_endpoints` are sandgate's own listeners (never a destination); one bound to 0.0.0.0 or
// :: stands for that port on every address of the host. `host_ranges` (the launcher's pool)
// hold addresses of the host and of its sandboxes' links whatever interfaces exist right now.
class Policy {
 public:
  Policy(std::vector<SandboxSpec> sandboxes, std::vector<Endpoint> self_endpoints,
         std::vector<Cidr> host_ranges = {});
  // `previous` without the sandboxes `removed`, with `added` (new, or replacing one of the
  // same id). Every other sandbox, and every profile already compiled, is shared with
  // `previous` rather than compiled again, so the cost follows the change, not the number of
  // sandboxes (the id table is shared too: only the parts the changes touch are copied).
  // Same self endpoints and host ranges.
  Policy(const Policy& previous, const std::vector<std::string>& removed,
         std::vector<SandboxSpec> added);
  ~Policy();
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Decides on the destination as named. For a name, an allow still requires every resolved
  // address to pass check_address before dialling. For an IP literal, the address checks
  // are part of this decision, made with the host ranges but without the host's live
  // addresses: the dialler checks the literal again with check_address.
  Decision decide(const Query& q) const;
  // Same, with a host already normalised (avoids normalising twice).
  // `granted`: an operator allowed this held destination (allowed_by_operator instead of a
  // held no_matching_rule).
  Decision decide(std::string_view sandbox, const Host& host, std::uint16_t port, EntryMode mode,
                  bool granted = false) const;

  // A name the stream itself carries inside a tunnel opened for `tunnel` (a TLS SNI when
  // `mode` is tls, an HTTP Host when it is http) must name that host, or another host the
  // sandbox may reach on this port (domain fronting, THREATS 4). `inner` is null when the
  // stream carries none: TLS without SNI is refused to a named tunnel (clients send none only
  // to IP literals); HTTP without Host (HTTP/1.0) passes.
  Decision decide_inner_name(std::string_view sandbox, const Host& tunnel, std::uint16_t port,
                             const std::string* inner, EntryMode mode) const;

  // Checks one address the proxy is about to dial (a resolved address of an allowed name, or
  // a literal). `host_addresses` are the addresses of the host's interfaces right now; they
  // and the host ranges are refused (host_address) whatever allow_cidrs or allow_all_hosts
  // say, unless an allow_host_services entry names this exact address and port.
  Decision check_address(std::string_view sandbox, const IpAddress& a, std::uint16_t port,
                         const AddressSet& host_addresses) const;

  // Whether streams to host:port are intercepted (TLS terminated, each request decided): an
  // `inspect` pattern matches it, or an http or git rule names it; an address when an
  // `inspect` entry names it with this port. Costs hash probes like decide (a scan of the few
  // inspected addresses for an IP literal). False for an unknown sandbox.
  bool inspects(std::string_view sandbox, const Host& host, std::uint16_t port) const;

  // The method, path and git rules over one request to host:port, which the host rules
  // already allow (decide_request's last steps). `target` is the request target as sent
  // (path and query). nullopt when no rule names the host (for a git request: no git rule,
  // for any other: no http rule), so the host decision stands. `method_overrides`: the
  // values of the request's method-override fields (kMethodOverrideFields), as sent.
  std::optional<Decision> decide_request_rules(
      std::string_view sandbox, const Host& host, std::uint16_t port, std::string_view method,
      std::string_view target, std::span<const std::string_view> method_overrides = {}) const;

  bool has_sandbox(std::string_view id) const;
  std::size_t sandbox_count() const;

 private:
  Decision decide_destination(std::string_view sandbox, const Host& host, std::uint16_t port,
                              EntryMode mode) const;
  struct Compiled;
  std::unique_ptr<const Compiled> impl_;
};

// The IPv4 address an IPv6 address is translated to on the way (IPv4-mapped, NAT64), as
// opposed to tunnelled through (6to4, Teredo, IPv4-compatible): only a translated address
// reaches the IPv4 host itself, so only it may be opened by an IPv4 allow range. nullopt for
// IPv4 and for every other IPv6 address.
std::optional<IpAddress> translated_ipv4(const IpAddress& a);

}  // namespace sandgate::policy
