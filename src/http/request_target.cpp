#include "http/request_target.hpp"

#include <algorithm>

#include "common/ascii.hpp"

namespace sandgate::http {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// RFC 3986 unreserved / sub-delims / ":" / "@" / "/" / "?" / "%", plus the characters
// WHATWG-URL clients leave unescaped in paths and queries (see the header).
constexpr ByteSet kTargetChar([](char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kAllowed = "-._~!$&'()*+,;=:@/?%[]{}|^`";
  return kAllowed.find(c) != std::string_view::npos;
});

bool has_valid_escapes(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return false;
    i += 2;
  }
  return true;
}

Result<RequestTarget> fail(Errc e) {
  return make_error_code(e);
}

}  // namespace

bool same_authority(const Authority& a, const Authority& b, std::uint16_t default_port) {
  return a.ip_literal == b.ip_literal && iequals_ascii(a.host, b.host) &&
         a.port.value_or(default_port) == b.port.value_or(default_port);
}

Result<RequestTarget> parse_request_target(std::string_view target, bool is_connect,
                                           bool is_options) {
  if (target.empty()) return fail(Errc::malformed_request);
  // A fragment is never sent (RFC 9110 §7.1); one here means the client and some upstream
  // could disagree about where the path ends.
  if (target.find('#') != std::string_view::npos) return fail(Errc::malformed_request);
  if (!kTargetChar.all_of(target) || !has_valid_escapes(target)) {
    return fail(Errc::malformed_request);
  }

  RequestTarget out;
  if (is_connect) {
    const auto authority = parse_authority(target);
    if (!authority || !authority->port) return fail(Errc::unsupported_target);
    out.form = TargetForm::authority;
    out.authority = *authority;
    return out;
  }
  if (target == "*") {
    if (!is_options) return fail(Errc::unsupported_target);
    out.form = TargetForm::asterisk;
    out.path_and_query = target;
    return out;
  }
  if (target.front() == '/') {
    out.form = TargetForm::origin;
    out.path_and_query = target;
    return out;
  }

  // Absolute form, through the same parser as `sandgate decide`. Only http: an https://
  // target would ask the proxy to originate TLS on the client's behalf, which clients do
  // through CONNECT instead. Anything without a scheme is no absolute form either.
  const auto url = policy::parse_target(target);
  if (!url || url->scheme.empty() || !iequals_ascii(url->scheme, "http")) {
    return fail(Errc::unsupported_target);
  }
  out.form = TargetForm::absolute;
  out.authority = Authority{url->host, url->written_port, url->ip_literal};
  out.path_and_query = url->rest;
  return out;
}

}  // namespace sandgate::http
