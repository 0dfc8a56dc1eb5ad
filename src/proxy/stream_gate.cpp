#include "proxy/stream_gate.hpp"

#include "http/request_head.hpp"
#include "proxy/first_bytes.hpp"
#include "proxy/responses.hpp"
#include "proxy/session.hpp"

namespace sandgate::proxy {

namespace {

using Kind = TunnelGate::Verdict::Kind;

// The HTTP/2 connection preface (RFC 9113 §3.4): after an h2c upgrade it is the new protocol.
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string_view as_text(std::span<const std::uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

StreamGate::StreamGate(const Session& s, policy::Host tunnel, std::uint16_t port)
    : s_(s), tunnel_(std::move(tunnel)), port_(port) {}

TunnelGate::Verdict StreamGate::check(std::span<const std::uint8_t> pending) {
  std::size_t seen = 0;  // of `pending`, let go in this call
  const auto let_go = [&] { return seen > 0 ? Verdict{Kind::forward, seen} : Verdict{}; };
  for (;;) {
    const auto rest = pending.subspan(seen);
    if (phase_ == Phase::body) {
      const auto used = body_->feed(as_text(rest));
      if (!used) return refuse(policy::Reason::http_malformed);
      seen += *used;
      if (!body_->done()) {
        // All of it was body, or a chunk header is cut off and held (within a head's bound).
        if (pending.size() - seen > s_.limits().max_header_bytes) {
          return refuse(policy::Reason::http_malformed);
        }
        return let_go();
      }
      body_.reset();
      phase_ = upgrade_ ? Phase::upgraded : Phase::head;
      continue;
    }
    if (rest.empty()) return let_go();
    const Step step = check_start(rest);
    if (step.verdict) return step.verdict->kind == Kind::hold ? let_go() : *step.verdict;
    seen += step.consumed;
  }
}

StreamGate::Step StreamGate::check_start(std::span<const std::uint8_t> rest) {
  const FirstBytes first = classify_first_bytes(rest);
  const policy::Policy& policy = *s_.snap->policy;
  const bool opening = phase_ == Phase::first;
  const bool may_switch = opening || phase_ == Phase::upgraded;
  switch (first.kind) {
    case StreamStart::need_more:
      return {Verdict{}};
    case StreamStart::http:
      if (phase_ == Phase::upgraded && as_text(rest).starts_with(kHttp2Preface)) {
        return {Verdict{Kind::pass}};
      }
      return check_head(as_text(rest), first.skipped);
    case StreamStart::proxy_request:
      return {refuse(policy::Reason::nested_proxy)};
    case StreamStart::tls: {
      if (!opening) break;
      if (first.hello.sni) sni_ = *first.hello.sni;
      policy::Decision d = policy.decide_inner_name(s_.sandbox, tunnel_, port_,
                                                    first.hello.sni ? &*first.hello.sni : nullptr,
                                                    policy::EntryMode::tls);
      return {d.allowed ? Verdict{Kind::pass} : refuse(std::move(d), true)};
    }
    case StreamStart::tls_malformed:
      if (!opening) break;
      return {refuse(policy::Reason::tls_malformed, true)};
    case StreamStart::other:
      if (!may_switch) break;
      return {Verdict{Kind::pass}};
    case StreamStart::undecidable:
      return {
          refuse(opening ? policy::Reason::unrecognized_protocol : policy::Reason::http_malformed)};
  }
  // After an HTTP/1 request that did not ask to upgrade, only another request may follow.
  if (phase_ == Phase::upgraded) return {Verdict{Kind::pass}};
  return {refuse(policy::Reason::http_malformed)};
}

// A request's Host is decided once its whole head is here; a head the strict parser refuses
// is not relayed either (a lenient server behind the tunnel might read another Host out of
// it).
StreamGate::Step StreamGate::check_head(std::string_view text, std::size_t skipped) {
  const config::Limits& limits = s_.limits();
  const http::HeadLimits head_limits{limits.max_request_line_bytes, limits.max_header_bytes};
  const std::string_view from_method = text.substr(skipped);
  const auto end = http::find_head_end(from_method, head_limits);
  if (!end) return {refuse(policy::Reason::http_malformed)};
  if (*end == 0) return {Verdict{}};  // find_head_end fails past max_header_bytes
  auto head = http::parse_request_head(from_method.substr(0, *end), head_limits);
  if (!head) return {refuse(policy::Reason::http_malformed)};
  const std::string* host = head->host.empty() ? nullptr : &head->host;
  policy::Decision d =
      s_.snap->policy->decide_inner_name(s_.sandbox, tunnel_, port_, host, policy::EntryMode::http);
  if (!d.allowed) return {refuse(std::move(d), false, head->host)};
  upgrade_ = head->upgrade;
  if (head->has_body) {
    body_.emplace(*head);
    phase_ = Phase::body;
  } else {
    phase_ = upgrade_ ? Phase::upgraded : Phase::head;
  }
  return {std::nullopt, skipped + *end};
}

TunnelGate::Verdict StreamGate::refuse(policy::Reason reason, bool tls) {
  policy::Decision d;
  d.reason = reason;
  return refuse(std::move(d), tls);
}

TunnelGate::Verdict StreamGate::refuse(policy::Decision d, bool tls, std::string_view inner_host) {
  if (tls) {
    refusal_ = tls_access_denied_alert();
  } else if (!inner_host.empty()) {
    ErrorInfo info;
    info.code = Errc::network_denied;
    info.sandbox = s_.sandbox;
    info.host = inner_host;
    info.port = port_;
    info.reason = policy::reason_name(d.reason);
    refusal_ = error_response(info);
  }
  denial_ = std::make_unique<policy::Decision>(std::move(d));
  return Verdict{Kind::refuse};
}

}  // namespace sandgate::proxy
