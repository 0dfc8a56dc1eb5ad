#include "proxy/responses.hpp"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <boost/json.hpp>
#include <cstdio>

namespace sandgate::proxy {

std::string_view default_message(Errc code) {
  switch (code) {
    case Errc::network_denied:
      return "the sandbox's network policy does not allow this destination";
    case Errc::proxy_auth_required:
      return "Proxy-Authorization with Basic sandbox-id:token is required";
    case Errc::too_many_connections:
      return "connection limit reached";
    case Errc::header_timeout:
      return "the request head was not received in time";
    case Errc::host_mismatch:
      return "the Host header does not match the request target";
    case Errc::unsupported_target:
      return "only absolute-form http:// requests and CONNECT are accepted here";
    case Errc::upstream_dns_failed:
      return "the destination name could not be resolved";
    case Errc::upstream_connect_failed:
      return "the destination refused or reset the connection";
    case Errc::upstream_timeout:
      return "the destination did not answer in time";
    case Errc::upstream_protocol_error:
      return "the destination sent an invalid HTTP response";
    case Errc::local_resources_exhausted:
      return "sandgate is out of descriptors or memory; retry later";
    default:
      return "the request was rejected";
  }
}

namespace {

// `text` with every byte that is not printable ASCII (controls, CR, LF, DEL, UTF-8) as '?'.
std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return out;
}

// The rightmost `budget` bytes of `text`, after "..." when it had to be cut (a name's right
// end says who owns it).
std::string keep_right(std::string text, std::size_t budget) {
  if (text.size() <= budget) return text;
  constexpr std::string_view kCut = "...";
  if (budget <= kCut.size()) return std::string(kCut.substr(0, budget));
  return std::string(kCut) + text.substr(text.size() - (budget - kCut.size()));
}

}  // namespace

std::string reason_phrase(const ErrorInfo& info) {
  // Bounds for the parts that come from outside; the code and reason names are sandgate's own.
  constexpr std::size_t kMaxSandbox = 40;
  constexpr std::size_t kMaxReason = 32;
  const bool can_retry = info.retryable.value_or(retryable(info.code));
  std::string tail;
  if (!info.sandbox.empty())
    tail += " for sandbox " + keep_right(printable(info.sandbox), kMaxSandbox);
  tail += " (";
  if ((info.code == Errc::network_denied || info.code == Errc::proxy_auth_required) &&
      !info.reason.empty()) {
    tail += printable(info.reason.substr(0, kMaxReason)) + "; ";
  }
  tail += can_retry ? "retryable)" : "not retryable)";
  std::string phrase(code_name(info.code));
  if (!info.host.empty()) {
    std::string destination = printable(info.host);
    const std::string port = info.port != 0 ? ":" + std::to_string(info.port) : "";
    const std::size_t used = phrase.size() + 1 + port.size() + tail.size();
    const std::size_t budget = kMaxReasonPhraseBytes > used ? kMaxReasonPhraseBytes - used : 0;
    destination = keep_right(std::move(destination), budget);
    if (!destination.empty()) phrase += " " + destination + port;
  }
  phrase += tail;
  phrase.resize(std::min(phrase.size(), kMaxReasonPhraseBytes));
  return phrase;
}

Reply git_refusal_reply(std::string_view service, const ErrorInfo& info) {
  std::string message = "sandgate: " + std::string(code_name(info.code));
  message += ": " + std::string(info.host) + " is refused to sandbox " + std::string(info.sandbox);
  if (!info.reason.empty()) message += " (" + std::string(info.reason);
  if (!info.rule.empty()) message += ", rule " + std::string(info.rule);
  if (!info.reason.empty()) message += ")";
  message +=
      info.retryable.value_or(retryable(info.code)) ? "; retry later" : "; retrying will not help";
  if (!info.suggestion.empty()) message += "; to allow it: " + std::string(info.suggestion);
  // One pkt-line: four hex digits of length (themselves included), then the payload.
  // ASCII in one line, bounded: nothing a config or a request holds can break the framing.
  constexpr std::size_t kMaxMessage = 1000;
  message.resize(std::min(message.size(), kMaxMessage));
  for (char& c : message) {
    if (c == '\n') {
      c = ' ';  // a suggested [[...]] block, shown on the one line git prints
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      c = '?';
    }
  }
  const std::string payload = "ERR " + message + "\n";
  char length[5];
  std::snprintf(length, sizeof length, "%04zx", payload.size() + 4);
  Reply r;
  r.status = 200;
  r.fields = {{"Content-Type", "application/x-" + std::string(service) + "-advertisement"},
              {"Cache-Control", "no-cache"},
              {"X-Sandgate-Error", std::string(code_name(info.code))},
              {"Connection", "close"}};
  r.body = std::string(length) + payload;
  return r;
}

Reply error_reply(const ErrorInfo& info) {
  boost::json::object body;
  body["code"] = code_name(info.code);
  body["message"] = info.message.empty() ? default_message(info.code) : info.message;
  body["retryable"] = info.retryable.value_or(retryable(info.code));
  if (!info.sandbox.empty()) body["sandbox"] = info.sandbox;
  if (!info.host.empty()) body["host"] = info.host;
  if (info.port != 0) body["port"] = info.port;
  if (info.code == Errc::proxy_auth_required && !info.reason.empty()) {
    body["reason"] = info.reason;
  }
  if (info.code == Errc::network_denied) {
    body["reason"] = info.reason;
    body["rule"] = info.rule;
    if (!info.suggestion.empty()) body["suggestion"] = info.suggestion;
  }
  Reply r;
  r.status = http_status(info.code);
  r.reason = reason_phrase(info);
  r.fields = {{"X-Sandgate-Error", std::string(code_name(info.code))},
              {"Content-Type", "application/json"},
              {"Cache-Control", "no-store"}};
  if (info.code == Errc::proxy_auth_required) {
    r.fields.emplace_back("Proxy-Authenticate", "Basic realm=\"sandgate\"");
  }
  r.fields.emplace_back("Connection", "close");
  r.body = boost::json::serialize(body);
  r.body += '\n';
  return r;
}

std::string http1_text(const Reply& reply) {
  std::string out;
  out.reserve(256 + reply.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(reply.status);
  out += ' ';
  if (reply.reason.empty()) {
    out +=
        boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(reply.status));
  } else {
    out += reply.reason;
  }
  out += "\r\n";
  for (const auto& [name, value] : reply.fields) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "Content-Length: ";
  out += std::to_string(reply.body.size());
  out += "\r\n\r\n";
  out += reply.body;
  return out;
}

std::string error_response(const ErrorInfo& info) {
  return http1_text(error_reply(info));
}

std::string_view tls_access_denied_alert() {
  // ContentType alert(21), TLS 1.2 record version, length 2, fatal(2), access_denied(49).
  static constexpr char kAlert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};
  return {kAlert, sizeof kAlert};
}

}  // namespace sandgate::proxy
