#include "policy/stream.hpp"

#include <optional>

namespace sandgate::policy {

namespace {

StreamVerdict refused(Reason reason, EntryMode mode, std::string shown, Host host = {}) {
  StreamVerdict v;
  v.decision.reason = reason;
  v.mode = mode;
  v.dial = std::move(host);
  v.shown = std::move(shown);
  return v;
}

StreamVerdict decided(Decision d, EntryMode mode, const Host& host, bool gated) {
  StreamVerdict v;
  v.action = d.allowed ? StreamAction::tunnel : StreamAction::refuse;
  v.decision = std::move(d);
  v.mode = mode;
  v.dial = host;
  v.shown = host.display();
  v.gated = gated;
  return v;
}

Host literal_of(const IpAddress& address) {
  Host h;
  h.kind = Host::Kind::address;
  h.address = address;
  return h;
}

// An allowed stream to an inspected host is intercepted, not tunnelled.
StreamVerdict inspected(const Policy& policy, const std::string& sandbox, std::uint16_t port,
                        StreamVerdict v) {
  if (v.action != StreamAction::tunnel || !policy.inspects(sandbox, v.dial, port)) return v;
  v.action = StreamAction::intercept;
  v.gated = false;
  return v;
}

// A refusal that stands even where the policy now allows the name (stale_dns_answer).
Decision refusal_of(Decision d) {
  if (!d.allowed) return d;
  Decision stale;
  stale.reason = Reason::stale_dns_answer;
  return stale;
}

// A stream to the DNS sink (StreamFacts::sink): never dialled. HTTP is served so that each
// request gets its refusal; TLS naming a host is intercepted for the same; anything else is
// refused on the newest name the sandbox's DNS sank (else the address).
StreamVerdict sunk(const Policy& policy, const StreamFacts& f, const std::string& sandbox,
                   EntryMode mode, const Host& literal) {
  StreamVerdict v;
  v.sunk = true;
  v.mode = mode;
  if (f.opening == Opening::http || f.opening == Opening::proxy_request) {
    v.decision.allowed = true;
    v.action = StreamAction::serve_http;
    v.mode = EntryMode::http;
    return v;
  }
  const Host sni = f.opening == Opening::tls && f.sni ? normalize_host(*f.sni) : Host{};
  if (sni.is_name()) {
    v.dial = sni;
    v.action = StreamAction::intercept;
  } else {
    v.dial = f.dns_names.empty() ? literal : normalize_host(f.dns_names.front());
  }
  v.shown = v.dial.display();
  v.decision = refusal_of(policy.decide(sandbox, v.dial, f.port, mode, f.granted));
  return v;
}

}  // namespace

StreamVerdict decide_stream(const Policy& policy, const StreamFacts& f) {
  if (f.mode == EntryMode::connect) {
    const Host& host = *f.authority;
    const std::string sandbox = f.sandbox ? *f.sandbox : std::string();
    return inspected(policy, sandbox, f.port,
                     decided(policy.decide(sandbox, host, f.port, EntryMode::connect, f.granted),
                             EntryMode::connect, host, true));
  }

  const Host literal = literal_of(f.original);
  const std::string literal_shown = literal.display();
  const bool tls = f.opening == Opening::tls || f.opening == Opening::tls_malformed;
  const EntryMode mode = tls ? EntryMode::tls : EntryMode::tcp;
  if (f.sandbox == nullptr) return refused(Reason::unknown_sandbox, EntryMode::tcp, literal_shown);
  const std::string& sandbox = *f.sandbox;
  if (f.sink) return sunk(policy, f, sandbox, mode, literal);
  switch (f.opening) {
    case Opening::http:
    case Opening::proxy_request: {
      StreamVerdict v;
      v.decision.allowed = true;
      v.action = StreamAction::serve_http;
      v.mode = EntryMode::http;
      return v;
    }
    case Opening::tls_malformed:
      return refused(Reason::tls_malformed, mode, literal_shown);
    case Opening::undecidable:
      return refused(Reason::unrecognized_protocol, mode, literal_shown);
    case Opening::tls:
      if (f.sni != nullptr) {
        const Host host = normalize_host(*f.sni);
        StreamVerdict v =
            decided(policy.decide(sandbox, host, f.port, mode, f.granted), mode, host, false);
        if (!host.is_valid()) v.shown = *f.sni;
        return inspected(policy, sandbox, f.port, std::move(v));
      }
      break;
    case Opening::silent:
    case Opening::other:
      break;
  }

  // No name in the bytes: the sandbox's DNS answers for the address, newest first.
  const bool gated = f.opening == Opening::silent;
  std::optional<StreamVerdict> first_denial;
  for (const std::string& name : f.dns_names) {
    const Host host = normalize_host(name);
    StreamVerdict v =
        decided(policy.decide(sandbox, host, f.port, mode, f.granted), mode, host, gated);
    if (v.action == StreamAction::tunnel) {
      // Bytes other than TLS to an inspected host could carry requests past its rules (git
      // over ssh). On 80 and 443 an `opaque` entry named this host and port (decide refused
      // them otherwise), and that exact exception stands.
      if (f.opening != Opening::other) return inspected(policy, sandbox, f.port, std::move(v));
      const bool web_port = f.port == 80 || f.port == 443;
      if (!web_port && policy.inspects(sandbox, host, f.port)) {
        v.action = StreamAction::refuse;
        v.decision = Decision{};
        v.decision.reason = Reason::unrecognized_protocol;
        v.gated = false;
      }
      return v;
    }
    if (!first_denial) first_denial = std::move(v);
  }
  StreamVerdict v =
      decided(policy.decide(sandbox, literal, f.port, mode, f.granted), mode, literal, gated);
  if (v.action == StreamAction::tunnel || first_denial) {
    return v.action == StreamAction::tunnel ? v : *first_denial;
  }
  // Nothing names it. Metadata, loop and protocol refusals keep their stronger reasons.
  const Reason r = v.decision.reason;
  if (r != Reason::always_denied_address && r != Reason::proxy_loop &&
      r != Reason::unrecognized_protocol) {
    v.decision.reason = Reason::unnamed_destination;
  }
  return v;
}

}  // namespace sandgate::policy
