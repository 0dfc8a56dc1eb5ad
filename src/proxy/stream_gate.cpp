#include "proxy/stream_gate.hpp"

#include "http/request_head.hpp"
#include "proxy/first_bytes.hpp"
#include "proxy/responses.hpp"
#include "proxy/session.hpp"

namespace sandgate::proxy {

StreamGate::StreamGate(const Session& s, policy::Host tunnel, std::uint16_t port)
    : s_(s), tunnel_(std::move(tunnel)), port_(port) {}

FirstBytesGate::Verdict StreamGate::check(std::span<const std::uint8_t> data) {
  const FirstBytes first = classify_first_bytes(data);
  const policy::Policy& policy = *s_.snap->policy;
  switch (first.kind) {
    case StreamStart::need_more:
      return Verdict::need_more;
    case StreamStart::other:
      return Verdict::pass;
    case StreamStart::tls: {
      if (first.hello.sni) sni_ = *first.hello.sni;
      policy::Decision d = policy.decide_inner_name(s_.sandbox, tunnel_, port_,
                                                    first.hello.sni ? &*first.hello.sni : nullptr,
                                                    policy::EntryMode::tls);
      return d.allowed ? Verdict::pass : refuse(std::move(d), true);
    }
    case StreamStart::http: {
      const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
      return check_http(text.substr(first.skipped));
    }
    case StreamStart::tls_malformed: {
      policy::Decision d;
      d.reason = policy::Reason::tls_malformed;
      return refuse(std::move(d), true);
    }
    case StreamStart::proxy_request:
    case StreamStart::undecidable:
      break;
  }
  policy::Decision d;
  d.reason = first.kind == StreamStart::proxy_request ? policy::Reason::nested_proxy
                                                      : policy::Reason::unrecognized_protocol;
  return refuse(std::move(d), false);
}

// The request's Host is decided once its whole head is here; a head the strict parser
// refuses is not relayed either (a lenient server behind the tunnel might read another Host
// out of it).
FirstBytesGate::Verdict StreamGate::check_http(std::string_view text) {
  const config::Limits& limits = s_.limits();
  const http::HeadLimits head_limits{limits.max_request_line_bytes, limits.max_header_bytes};
  policy::Decision malformed;
  malformed.reason = policy::Reason::http_malformed;
  const auto end = http::find_head_end(text, head_limits);
  if (!end) return refuse(std::move(malformed), false);
  if (*end == 0) return Verdict::need_more;  // find_head_end fails past max_header_bytes
  const auto head = http::parse_request_head(text.substr(0, *end), head_limits);
  if (!head) return refuse(std::move(malformed), false);
  const std::string* host = head->host.empty() ? nullptr : &head->host;
  policy::Decision d =
      s_.snap->policy->decide_inner_name(s_.sandbox, tunnel_, port_, host, policy::EntryMode::http);
  return d.allowed ? Verdict::pass : refuse(std::move(d), false, head->host);
}

FirstBytesGate::Verdict StreamGate::refuse(policy::Decision d, bool tls,
                                           std::string_view inner_host) {
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
  denial_ = std::move(d);
  return Verdict::refuse;
}

}  // namespace sandgate::proxy
