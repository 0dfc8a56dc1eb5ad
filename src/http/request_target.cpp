#include "http/request_target.hpp"

#include <algorithm>

#include "common/ascii.hpp"

namespace sandgate::http {

namespace {

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_host_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
}

// RFC 3986 unreserved / sub-delims / ":" / "@" / "/" / "?" / "%", plus the characters
// WHATWG-URL clients leave unescaped in paths and queries (see the header).
bool is_target_char(char c) {
  if (is_alpha(c) || is_digit(c)) return true;
  constexpr std::string_view kAllowed = "-._~!$&'()*+,;=:@/?%[]{}|^`";
  return kAllowed.find(c) != std::string_view::npos;
}

bool has_valid_escapes(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return false;
    i += 2;
  }
  return true;
}

std::optional<std::uint16_t> parse_port(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
    return std::nullopt;
  }
  unsigned value = 0;
  for (const char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

Result<RequestTarget> fail(Errc e) {
  return make_error_code(e);
}

}  // namespace

std::optional<Authority> parse_authority(std::string_view text) {
  Authority out;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = text.substr(1, close - 1);
    out.ip_literal = true;
    rest = text.substr(close + 1);
    const bool v6_chars = std::all_of(out.host.begin(), out.host.end(),
                                      [](char c) { return is_hex(c) || c == ':' || c == '.'; });
    if (out.host.size() < 2 || !v6_chars || out.host.find(':') == std::string_view::npos) {
      return std::nullopt;
    }
  } else {
    const std::size_t colon = text.find(':');
    out.host = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
    if (out.host.empty() || !std::all_of(out.host.begin(), out.host.end(), is_host_char)) {
      return std::nullopt;
    }
  }
  if (rest.empty()) return out;
  if (rest.front() != ':') return std::nullopt;
  out.port = parse_port(rest.substr(1));
  if (!out.port) return std::nullopt;
  return out;
}

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
  if (!std::all_of(target.begin(), target.end(), is_target_char) || !has_valid_escapes(target)) {
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

  // Absolute form. Only http: an https:// target would ask the proxy to originate TLS on the
  // client's behalf, which clients do through CONNECT instead.
  constexpr std::string_view kHttp = "http://";
  if (target.size() < kHttp.size() || !iequals_ascii(target.substr(0, kHttp.size()), kHttp)) {
    return fail(Errc::unsupported_target);
  }
  const std::string_view rest = target.substr(kHttp.size());
  const std::size_t authority_end = rest.find_first_of("/?");
  const std::string_view authority_text = rest.substr(0, authority_end);
  if (authority_text.find('@') != std::string_view::npos) return fail(Errc::unsupported_target);
  const auto authority = parse_authority(authority_text);
  if (!authority) return fail(Errc::unsupported_target);
  out.form = TargetForm::absolute;
  out.authority = *authority;
  out.path_and_query =
      authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  return out;
}

}  // namespace sandgate::http
