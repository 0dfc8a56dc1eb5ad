#include "policy/policy.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <utility>

#include "common/sharded_map.hpp"
#include "policy/compiled_rules.hpp"
#include "policy/name_index.hpp"

namespace sandgate::policy {

namespace {

using detail::NameIndex;
using detail::StringMap;

IpAddress masked(IpAddress a, unsigned prefix) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const unsigned bits = i * 8 >= prefix ? 0 : std::min(8u, prefix - static_cast<unsigned>(i * 8));
    a.bytes[i] &= static_cast<std::uint8_t>(0xff00u >> bits);
  }
  return a;
}

// One host rule after compilation: the port it is pinned to (0: the sandbox's ports) and its
// name for Decision::rule.
struct NameRule {
  std::uint16_t port = 0;
  std::string name;
};

// Host rules of one list (allow, deny, opaque).
using NameTable = NameIndex<NameRule>;

void add_rule(NameTable& table, const RuleSource& r) {
  table.add(r.pattern, {r.pattern.port.value_or(0), r.origin + ":" + r.pattern.to_string()});
}

// Whether every address of the range is loopback (127.0.0.0/8 or inside it, ::1/128, or a
// translated form of those): only such a range opens loopback.
bool inside_loopback(const Cidr& c) {
  IpAddress last = c.network;
  for (std::size_t i = 0; i < last.size(); ++i) {
    const unsigned start = static_cast<unsigned>(i * 8);
    const unsigned fixed = c.prefix > start ? std::min(8u, c.prefix - start) : 0;
    last.bytes[i] |= static_cast<std::uint8_t>(0xffu >> fixed);
  }
  return classify(c.network) == AddressClass::loopback && classify(last) == AddressClass::loopback;
}

// Address ranges indexed by prefix length: one hash probe per distinct length in use.
class CidrTable {
 public:
  struct Entry {
    std::string rule;
    bool inside_loopback = false;
  };

  void add(const CidrSource& c) {
    auto& by_length = c.cidr.network.is_v4() ? v4_ : v6_;
    by_length[c.cidr.prefix].emplace(
        key(c.cidr.network), Entry{c.origin + ":" + c.cidr.to_string(), inside_loopback(c.cidr)});
  }

  // The most specific range of any table in `tables` (in order; null ones skipped) holding
  // `a`, or nullptr: the same range one table with all their entries, added table by table,
  // would find. `inner` is the IPv4 address `a` stands for, if any, which is looked up too.
  static const Entry* find(std::span<const CidrTable* const> tables, const IpAddress& a,
                           const std::optional<IpAddress>& inner) {
    if (const Entry* hit = find_exact(tables, a)) return hit;
    if (inner) return find_exact(tables, *inner);
    return nullptr;
  }

  // A range holding `a` that lies inside loopback, or nullptr. Ranges nest, so the most
  // specific range of each family is the one to ask.
  static const Entry* find_loopback(std::span<const CidrTable* const> tables, const IpAddress& a,
                                    const std::optional<IpAddress>& inner) {
    if (const Entry* hit = find_exact(tables, a); hit && hit->inside_loopback) return hit;
    if (!inner) return nullptr;
    const Entry* hit = find_exact(tables, *inner);
    return hit && hit->inside_loopback ? hit : nullptr;
  }

 private:
  using ByLength = std::map<unsigned, StringMap<Entry>, std::greater<>>;

  static std::string key(const IpAddress& a) {
    return std::string(reinterpret_cast<const char*>(a.bytes.data()), a.size());
  }

  // The longest prefix of this table holding `a`, with its length.
  std::pair<const Entry*, unsigned> find_one(const IpAddress& a) const {
    const ByLength& by_length = a.is_v4() ? v4_ : v6_;
    for (const auto& [prefix, table] : by_length) {
      const auto it = table.find(key(masked(a, prefix)));
      if (it != table.end()) return {&it->second, prefix};
    }
    return {nullptr, 0};
  }

  // The longest prefix over all tables; on a tie the earlier table's (a merged table keeps
  // the first entry added for a range).
  static const Entry* find_exact(std::span<const CidrTable* const> tables, const IpAddress& a) {
    const Entry* best = nullptr;
    unsigned best_prefix = 0;
    for (const CidrTable* table : tables) {
      if (table == nullptr) continue;
      const auto [hit, prefix] = table->find_one(a);
      if (hit != nullptr && (best == nullptr || prefix > best_prefix)) {
        best = hit;
        best_prefix = prefix;
      }
    }
    return best;
  }

  ByLength v4_;
  ByLength v6_;
};

// An allow_host_services entry after compilation.
struct HostService {
  Endpoint service;
  std::string rule;
};

// One RuleLists compiled: a profile's (shared by every sandbox of the profile) or a sandbox's
// own. Immutable once built.
struct CompiledLists {
  explicit CompiledLists(const RuleLists& lists) : request_rules(lists) {
    for (const auto& r : lists.allow) add_rule(allow, r);
    for (const auto& r : lists.deny) add_rule(deny, r);
    for (const auto& c : lists.allow_cidrs) allow_cidrs.add(c);
    for (const auto& c : lists.deny_cidrs) deny_cidrs.add(c);
    for (const auto& r : lists.opaque) add_rule(opaque, r);
    for (const auto& h : lists.allow_host_services) {
      host_services.push_back({h.service, h.origin + ":" + endpoint_text(h.service)});
    }
    for (const auto& a : lists.inspect_addresses) inspect_addresses.push_back(a.service);
  }

  NameTable allow;
  NameTable deny;
  CidrTable allow_cidrs;
  CidrTable deny_cidrs;
  NameTable opaque;
  std::vector<HostService> host_services;   // few: scanned in order
  std::vector<Endpoint> inspect_addresses;  // few: scanned
  detail::CompiledRequestRules request_rules;
};

// The pointers to one member of each layer of a sandbox, in the order the layers are read.
template <class T>
struct Layers {
  std::array<const T*, 2> items{};
  std::size_t size = 0;
  std::span<const T* const> span() const { return {items.data(), size}; }
};

// A sandbox compiled: its profile's lists (shared) and its own.
struct CompiledSandbox {
  explicit CompiledSandbox(const SandboxSpec& spec) : ports(spec.ports), own(spec) {
    std::sort(ports.begin(), ports.end());
    allow_all_hosts = spec.allow_all_hosts;
    hold_unlisted = spec.hold_unlisted;
  }

  std::vector<std::uint16_t> ports;  // sorted
  bool allow_all_hosts = false;
  bool hold_unlisted = false;
  std::shared_ptr<const CompiledLists> profile;  // null: no profile
  CompiledLists own;

  bool port_allowed(std::uint16_t port) const {
    return std::binary_search(ports.begin(), ports.end(), port);
  }

  // The profile's member first, then the sandbox's own.
  template <class T>
  Layers<T> layers(T CompiledLists::*member) const {
    Layers<T> out;
    if (profile) out.items[out.size++] = &((*profile).*member);
    out.items[out.size++] = &(own.*member);
    return out;
  }
};

Decision make(bool allowed, Reason reason, std::string rule = {},
              AddressClass cls = AddressClass::global) {
  Decision d;
  d.allowed = allowed;
  d.reason = reason;
  d.rule = std::move(rule);
  d.address_class = cls;
  return d;
}

}  // namespace

std::optional<IpAddress> translated_ipv4(const IpAddress& a) {
  if (a.is_v4()) return std::nullopt;
  static constexpr std::array<std::uint8_t, 12> kMapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr std::array<std::uint8_t, 12> kNat64{0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  static constexpr std::array<std::uint8_t, 6> kNat64Local{0, 0x64, 0xff, 0x9b, 0, 0x01};
  const bool mapped = std::equal(kMapped.begin(), kMapped.end(), a.bytes.begin());
  const bool nat64 = std::equal(kNat64.begin(), kNat64.end(), a.bytes.begin()) ||
                     std::equal(kNat64Local.begin(), kNat64Local.end(), a.bytes.begin());
  return mapped || nat64 ? embedded_ipv4(a) : std::nullopt;
}

struct Policy::Compiled {
  // Shared with the policies made from this one (Policy(previous, ...)): a reload copies the
  // shards' pointers, and only the shards its changes touch.
  common::ShardedStringMap<std::shared_ptr<const CompiledSandbox>> sandboxes;
  std::vector<Endpoint> self;
  std::vector<Cidr> host_ranges;
  // Each profile compiled once, by the address of its lists; the entry holds the lists so the
  // address is never reused for others while it stands.
  std::map<const RuleLists*,
           std::pair<std::shared_ptr<const RuleLists>, std::shared_ptr<const CompiledLists>>>
      profiles;

  // An address of the host: on one of its interfaces now, or in a host range (the pool).
  bool of_host(const IpAddress& a, const AddressSet& live) const {
    if (live.contains(a)) return true;
    return std::any_of(host_ranges.begin(), host_ranges.end(),
                       [&](const Cidr& c) { return c.contains(a); });
  }

  void add(const SandboxSpec& spec) {
    auto sb = std::make_shared<CompiledSandbox>(spec);
    if (spec.profile) {
      auto& slot = profiles[spec.profile.get()];
      if (!slot.second) slot = {spec.profile, std::make_shared<const CompiledLists>(*spec.profile)};
      sb->profile = slot.second;
    }
    sandboxes.insert_or_assign(spec.id, std::move(sb));
  }

  const CompiledSandbox* find(std::string_view id) const {
    const auto* found = sandboxes.find(id);
    return found == nullptr ? nullptr : found->get();
  }
};

std::string endpoint_text(const Endpoint& e) {
  const std::string address = e.address.to_string();
  return (e.address.is_v4() ? address : "[" + address + "]") + ":" + std::to_string(e.port);
}

std::string_view mode_name(EntryMode m) {
  switch (m) {
    case EntryMode::http:
      return "http";
    case EntryMode::connect:
      return "connect";
    case EntryMode::tls:
      return "tls";
    case EntryMode::tcp:
      return "tcp";
    case EntryMode::dns:
      return "dns";
  }
  return "unknown";
}

Decision placeholder_denial(std::string_view credential, GitRequest git) {
  Decision d;
  d.reason = Reason::placeholder_misuse;
  if (!credential.empty()) d.rule = "credentials." + std::string(credential);
  d.git = std::move(git);
  return d;
}

std::string_view reason_name(Reason r) {
  switch (r) {
    case Reason::allowed_by_rule:
      return "allowed_by_rule";
    case Reason::allowed_by_cidr:
      return "allowed_by_cidr";
    case Reason::allowed_all_hosts:
      return "allowed_all_hosts";
    case Reason::allowed_host_service:
      return "allowed_host_service";
    case Reason::unknown_sandbox:
      return "unknown_sandbox";
    case Reason::invalid_host:
      return "invalid_host";
    case Reason::no_matching_rule:
      return "no_matching_rule";
    case Reason::denied_by_rule:
      return "denied_by_rule";
    case Reason::port_not_allowed:
      return "port_not_allowed";
    case Reason::ip_literal_not_allowed:
      return "ip_literal_not_allowed";
    case Reason::special_address:
      return "special_address";
    case Reason::always_denied_address:
      return "always_denied_address";
    case Reason::proxy_loop:
      return "proxy_loop";
    case Reason::host_address:
      return "host_address";
    case Reason::sni_mismatch:
      return "sni_mismatch";
    case Reason::sni_missing:
      return "sni_missing";
    case Reason::tls_malformed:
      return "tls_malformed";
    case Reason::nested_proxy:
      return "nested_proxy";
    case Reason::unnamed_destination:
      return "unnamed_destination";
    case Reason::misdirected_request:
      return "misdirected_request";
    case Reason::placeholder_misuse:
      return "placeholder_misuse";
    case Reason::stale_dns_answer:
      return "stale_dns_answer";
    case Reason::host_mismatch:
      return "host_mismatch";
    case Reason::http_malformed:
      return "http_malformed";
    case Reason::unrecognized_protocol:
      return "unrecognized_protocol";
    case Reason::denied_by_http_rule:
      return "denied_by_http_rule";
    case Reason::no_matching_http_rule:
      return "no_matching_http_rule";
    case Reason::ambiguous_path:
      return "ambiguous_path";
    case Reason::git_not_allowed:
      return "git_not_allowed";
    case Reason::allowed_by_operator:
      return "allowed_by_operator";
    case Reason::denied_by_operator:
      return "denied_by_operator";
    case Reason::hold_expired:
      return "hold_expired";
  }
  return "unknown";
}

bool RuleLists::empty() const {
  return allow.empty() && deny.empty() && allow_cidrs.empty() && deny_cidrs.empty() &&
         opaque.empty() && allow_host_services.empty() && inspect.empty() &&
         inspect_addresses.empty() && http_rules.empty() && git_rules.empty();
}

SandboxSpec merged(const SandboxSpec& spec) {
  SandboxSpec out = spec;
  out.profile = nullptr;
  if (!spec.profile) return out;
  const RuleLists& p = *spec.profile;
  const auto front = [](auto& to, const auto& from) {
    to.insert(to.begin(), from.begin(), from.end());
  };
  front(out.allow, p.allow);
  front(out.deny, p.deny);
  front(out.allow_cidrs, p.allow_cidrs);
  front(out.deny_cidrs, p.deny_cidrs);
  front(out.opaque, p.opaque);
  front(out.allow_host_services, p.allow_host_services);
  front(out.inspect, p.inspect);
  front(out.inspect_addresses, p.inspect_addresses);
  front(out.http_rules, p.http_rules);
  front(out.git_rules, p.git_rules);
  return out;
}

Policy::Policy(std::vector<SandboxSpec> sandboxes, std::vector<Endpoint> self_endpoints,
               std::vector<Cidr> host_ranges) {
  auto compiled = std::make_unique<Compiled>();
  compiled->self = std::move(self_endpoints);
  compiled->host_ranges = std::move(host_ranges);
  for (const SandboxSpec& spec : sandboxes) compiled->add(spec);
  impl_ = std::move(compiled);
}

Policy::Policy(const Policy& previous, const std::vector<std::string>& removed,
               std::vector<SandboxSpec> added) {
  auto compiled = std::make_unique<Compiled>();
  compiled->self = previous.impl_->self;
  compiled->host_ranges = previous.impl_->host_ranges;
  compiled->profiles = previous.impl_->profiles;
  compiled->sandboxes = previous.impl_->sandboxes;
  for (const std::string& id : removed) compiled->sandboxes.erase(id);
  for (const SandboxSpec& spec : added) compiled->add(spec);
  impl_ = std::move(compiled);
}

Policy::~Policy() = default;

bool Policy::has_sandbox(std::string_view id) const {
  return impl_->sandboxes.contains(id);
}
std::size_t Policy::sandbox_count() const {
  return impl_->sandboxes.size();
}

bool Policy::inspects(std::string_view sandbox, const Host& host, std::uint16_t port) const {
  if (!host.is_valid()) return false;
  const CompiledSandbox* sb = impl_->find(sandbox);
  if (sb == nullptr) return false;
  if (host.is_address()) {
    const auto layers = sb->layers(&CompiledLists::inspect_addresses);
    return std::any_of(layers.span().begin(), layers.span().end(), [&](const auto* addresses) {
      return std::find(addresses->begin(), addresses->end(), Endpoint{host.address, port}) !=
             addresses->end();
    });
  }
  return detail::CompiledRequestRules::inspects(sb->layers(&CompiledLists::request_rules).span(),
                                                sb->ports, host.name, port);
}

std::optional<Decision> Policy::decide_request_rules(
    std::string_view sandbox, const Host& host, std::uint16_t port, std::string_view method,
    std::string_view target, std::span<const std::string_view> method_overrides) const {
  if (!host.is_name()) return std::nullopt;
  const CompiledSandbox* sb = impl_->find(sandbox);
  if (sb == nullptr) return std::nullopt;
  return detail::CompiledRequestRules::decide(sb->layers(&CompiledLists::request_rules).span(),
                                              sb->ports, host.name, port, method, target,
                                              method_overrides);
}

Decision Policy::decide(const Query& q) const {
  return decide(q.sandbox, normalize_host(q.host), q.port, q.mode);
}

Decision Policy::decide(std::string_view sandbox, const Host& host, std::uint16_t port,
                        EntryMode mode, bool granted) const {
  Decision d = decide_destination(sandbox, host, port, mode);
  if (d.held && granted) d = make(true, Reason::allowed_by_operator, "holds");
  // A stream with no name of its own on a web port is HTTP or TLS that the sniffer could not
  // read, or a protocol that hides behind the port: relayed only to a host named for it.
  if (d.allowed && mode == EntryMode::tcp && (port == 80 || port == 443)) {
    const CompiledSandbox& sb = *impl_->find(sandbox);
    const bool opaque =
        host.is_name() &&
        NameTable::find_in(sb.layers(&CompiledLists::opaque).span(), host.name,
                           [&](const NameRule& r) { return r.port == port; }) != nullptr;
    if (!opaque) return make(false, Reason::unrecognized_protocol, std::move(d.rule));
  }
  return d;
}

Decision Policy::decide_inner_name(std::string_view sandbox, const Host& tunnel, std::uint16_t port,
                                   const std::string* inner, EntryMode mode) const {
  const Reason mismatch = mode == EntryMode::tls ? Reason::sni_mismatch : Reason::host_mismatch;
  if (inner == nullptr) {
    if (mode == EntryMode::tls && !tunnel.is_address()) return make(false, Reason::sni_missing);
    return make(true, Reason::allowed_by_rule);
  }
  const Host named = normalize_host(*inner);
  if (named.is_name() && tunnel.is_name() && named.name == tunnel.name) {
    return make(true, Reason::allowed_by_rule);
  }
  if (named.is_address() && tunnel.is_address() && named.address == tunnel.address) {
    return make(true, Reason::allowed_by_rule);
  }
  // Another host the sandbox may reach, unless its requests are decided one by one: a
  // spliced tunnel would carry them past the method, path and git rules.
  if (named.is_valid() && !inspects(sandbox, named, port)) {
    Decision d = decide(sandbox, named, port, mode);
    if (d.allowed) return d;
  }
  return make(false, mismatch);
}

Decision Policy::decide_destination(std::string_view sandbox, const Host& host, std::uint16_t port,
                                    EntryMode mode) const {
  const CompiledSandbox* found = impl_->find(sandbox);
  if (found == nullptr) return make(false, Reason::unknown_sandbox);
  const CompiledSandbox& sb = *found;
  // A DNS question names no port: the name may be resolved when some port of it is allowed,
  // and a deny rule stops it only when it covers every port.
  const bool any_port = mode == EntryMode::dns && port == 0;
  const auto port_ok = [&](std::uint16_t rule_port) {
    if (any_port) return rule_port != 0 || !sb.ports.empty();
    return rule_port == 0 ? sb.port_allowed(port) : rule_port == port;
  };

  if (host.is_address()) {
    // The host's live addresses are not known here; dial_checked applies them to the literal.
    static const AddressSet kNoLiveAddresses;
    Decision d = check_address(sandbox, host.address, port, kNoLiveAddresses);
    if (!d.allowed) return d;
    if (d.reason == Reason::allowed_host_service) return d;  // its port is exact
    if (d.reason != Reason::allowed_by_cidr) {
      return make(false, Reason::ip_literal_not_allowed, {}, d.address_class);
    }
    if (!port_ok(0)) {
      return make(false, Reason::port_not_allowed, std::move(d.rule), d.address_class);
    }
    return d;
  }
  if (!host.is_name()) return make(false, Reason::invalid_host);

  // Deny beats allow. A deny rule without a port covers every port.
  if (const NameRule* rule = NameTable::find_in(
          sb.layers(&CompiledLists::deny).span(), host.name,
          [&](const NameRule& r) { return r.port == 0 || (!any_port && r.port == port); })) {
    return make(false, Reason::denied_by_rule, rule->name);
  }
  const NameRule* name_match = nullptr;
  const NameRule* allowed = NameTable::find_in(sb.layers(&CompiledLists::allow).span(), host.name,
                                               [&](const NameRule& r) {
                                                 if (!name_match) name_match = &r;
                                                 return port_ok(r.port);
                                               });
  if (allowed) return make(true, Reason::allowed_by_rule, allowed->name);
  if (sb.allow_all_hosts) {
    if (port_ok(0)) return make(true, Reason::allowed_all_hosts, "allow_all_hosts");
    return make(false, Reason::port_not_allowed, "allow_all_hosts");
  }
  if (name_match) return make(false, Reason::port_not_allowed, name_match->name);
  Decision unlisted = make(false, Reason::no_matching_rule);
  unlisted.held = sb.hold_unlisted;
  return unlisted;
}

Decision Policy::check_address(std::string_view sandbox, const IpAddress& a, std::uint16_t port,
                               const AddressSet& host_addresses) const {
  const CompiledSandbox* found = impl_->find(sandbox);
  if (found == nullptr) return make(false, Reason::unknown_sandbox);
  const CompiledSandbox& sb = *found;
  const auto allow_cidrs = sb.layers(&CompiledLists::allow_cidrs);
  const AddressClass cls = classify(a);
  const bool loopback = cls == AddressClass::loopback;
  // The IPv4 address behind every IPv4-in-IPv6 form is the host's just as much.
  const std::optional<IpAddress> inner = embedded_ipv4(a);
  const bool of_host = !loopback && (impl_->of_host(a, host_addresses) ||
                                     (inner && impl_->of_host(*inner, host_addresses)));

  for (const Endpoint& self : impl_->self) {
    if (self.port != port) continue;
    if (self.address == a || (inner && self.address == *inner)) {
      return make(false, Reason::proxy_loop, {}, cls);
    }
    // A listener on 0.0.0.0 or :: answers on every address of the host, loopback included.
    if ((of_host || loopback) && classify(self.address) == AddressClass::unspecified) {
      return make(false, Reason::proxy_loop, {}, cls);
    }
  }
  if (always_denied(cls)) return make(false, Reason::always_denied_address, {}, cls);
  // Deny ranges see through every IPv4-in-IPv6 form; allow ranges only through translations.
  if (const CidrTable::Entry* hit =
          CidrTable::find(sb.layers(&CompiledLists::deny_cidrs).span(), a, inner)) {
    return make(false, Reason::denied_by_rule, hit->rule, cls);
  }
  const std::optional<IpAddress> translated = translated_ipv4(a);
  const auto host_services = sb.layers(&CompiledLists::host_services);  // named: outlives the loop
  for (const auto* services : host_services.span()) {
    for (const HostService& h : *services) {
      if (h.service.port == port &&
          (h.service.address == a || (translated && h.service.address == *translated))) {
        return make(true, Reason::allowed_host_service, h.rule, cls);
      }
    }
  }
  // The host's own addresses: no range opens them, however wide (THREATS 28).
  if (of_host) return make(false, Reason::host_address, {}, cls);
  if (loopback) {
    if (const CidrTable::Entry* hit = CidrTable::find_loopback(allow_cidrs.span(), a, translated)) {
      return make(true, Reason::allowed_by_cidr, hit->rule, cls);
    }
    return make(false, Reason::special_address, {}, cls);
  }
  if (const CidrTable::Entry* hit = CidrTable::find(allow_cidrs.span(), a, translated)) {
    return make(true, Reason::allowed_by_cidr, hit->rule, cls);
  }
  if (is_special(cls)) return make(false, Reason::special_address, {}, cls);
  return make(true, Reason::allowed_by_rule, {}, cls);
}

}  // namespace sandgate::policy
