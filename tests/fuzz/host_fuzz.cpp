// libFuzzer target for host and IP-literal normalisation (policy::normalize_host,
// parse_ip_literal, parse_target, parse_host_pattern, parse_cidr). Besides "no crash, no
// sanitizer report" it checks that every normal form is a fixed point: normalising what
// normalisation produced gives it back, and canonical text parses again to the same value.
#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "policy/ip_address.hpp"

namespace {

namespace policy = sandgate::policy;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// An address's canonical text parses back to it, bracketed or not, and is strict CIDR text.
void check_address(const policy::IpAddress& a) {
  const std::string text = a.to_string();
  check(policy::parse_ip_literal(text) == a);
  if (!a.is_v4()) check(policy::parse_ip_literal("[" + text + "]") == a);
  const auto cidr = policy::parse_cidr(text);
  check(cidr && cidr->network == a && cidr->prefix == a.size() * 8 && cidr->contains(a));
  if (const auto inner = policy::embedded_ipv4(a)) check(inner->is_v4() && !a.is_v4());
}

void check_host(std::string_view raw) {
  const policy::Host h = policy::normalize_host(raw);
  switch (h.kind) {
    case policy::Host::Kind::address: {
      check_address(h.address);
      const policy::Host again = policy::normalize_host(h.display());
      check(again.is_address() && again.address == h.address);
      break;
    }
    case policy::Host::Kind::name: {
      check(!h.name.empty() && h.name.size() <= 253 && h.name.back() != '.');
      check(
          std::none_of(h.name.begin(), h.name.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
      check(!policy::looks_like_ipv4(h.name));
      const policy::Host again = policy::normalize_host(h.name);
      check(again.is_name() && again.name == h.name);
      check(policy::normalize_host(h.name + ".").name == h.name);
      break;
    }
    case policy::Host::Kind::invalid:
      check(!h.invalid_reason.empty());  // the raw input is kept whole (the audit log shortens)
      return;
  }
  // Case never changes what a valid host is.
  const policy::Host upper_host = policy::normalize_host(upper(raw));
  check(upper_host.kind == h.kind && upper_host.name == h.name && upper_host.address == h.address);
}

// A parsed target written back as "host[:port]" (brackets when the host needs them) parses to
// the same target.
void check_target(std::string_view text) {
  const auto t = policy::parse_target(text);
  if (!t) return;
  check(!t->host.empty() && (!t->port || *t->port != 0));
  const std::string host(t->host);
  std::string again_text = t->ip_literal ? "[" + host + "]" : host;
  if (t->port) again_text += ":" + std::to_string(*t->port);
  const auto again = policy::parse_target(again_text);
  check(again && again->host == t->host && again->port == t->port);
}

void check_pattern(std::string_view text) {
  const auto p = policy::parse_host_pattern(text);
  if (!p) return;
  check(!p->port || *p->port != 0);
  const policy::Host domain = policy::normalize_host(p->domain);
  check(domain.is_name() && domain.name == p->domain);
  check(policy::parse_host_pattern(p->to_string()) == p);
}

void check_cidr(std::string_view text) {
  const auto c = policy::parse_cidr(text);
  if (!c) return;
  check(c->prefix <= c->network.size() * 8 && c->contains(c->network));
  const auto again = policy::parse_cidr(c->to_string());
  check(again && *again == *c);
}

// parse_ip_literal reads IPv4 as inet_aton does (header comment). Compared where the two are
// meant to agree: digits, hex letters, 'x' and dots only, no trailing dot (browsers only) and no
// bare "0x" part (0 for WHATWG, an error for glibc).
void check_like_inet_aton(std::string_view in) {
  if (in.empty() || in.size() > 64 || in.back() == '.') return;
  if (!std::all_of(in.begin(), in.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
               c == 'x' || c == 'X' || c == '.';
      })) {
    return;
  }
  std::size_t start = 0;
  while (start <= in.size()) {
    const std::size_t dot = std::min(in.find('.', start), in.size());
    const std::string_view part = in.substr(start, dot - start);
    if (part == "0x" || part == "0X") return;
    start = dot + 1;
  }
  const std::string text(in);
  in_addr libc{};
  const bool libc_ok = inet_aton(text.c_str(), &libc) != 0;
  const auto ours = policy::parse_ip_literal(in);
  check(libc_ok == ours.has_value());
  if (ours) check(ours->is_v4() && ours->v4_value() == ntohl(libc.s_addr));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (const auto a = policy::parse_ip_literal(in)) {
    check_address(*a);
    // Every IPv4 spelling looks numeric, so it can never pass for a name.
    if (a->is_v4()) check(policy::looks_like_ipv4(in));
  }
  check_like_inet_aton(in);
  check_host(in);
  check_target(in);
  check_pattern(in);
  check_cidr(in);
  return 0;
}
