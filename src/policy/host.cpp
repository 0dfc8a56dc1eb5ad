#include "policy/host.hpp"

#include <algorithm>
#include <iterator>

namespace sandgate::policy {

namespace {

constexpr std::size_t kMaxNameLength = 253;
constexpr std::size_t kMaxLabelLength = 63;

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool is_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Checks an already-lowercased name without a trailing dot; returns a reason or nullptr.
const char* name_problem(std::string_view name) {
  if (name.empty()) return "empty host name";
  if (name.size() > kMaxNameLength) return "host name longer than 253 characters";
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t dot = std::min(name.find('.', start), name.size());
    const std::string_view label = name.substr(start, dot - start);
    if (label.empty()) return "empty label in host name";
    if (label.size() > kMaxLabelLength) return "label longer than 63 characters";
    if (label.front() == '-' || label.back() == '-') return "label starts or ends with '-'";
    if (!std::all_of(label.begin(), label.end(), is_label_char)) {
      return "invalid character in host name";
    }
    start = dot + 1;
  }
  return nullptr;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_host_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
}
bool is_v6_char(char c) {
  return is_hex(c) || c == ':' || c == '.';
}

// 1-65535 in plain decimal digits (no sign, no spaces); leading zeros allowed up to 5 digits.
std::optional<std::uint16_t> parse_port(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
    return std::nullopt;
  }
  unsigned value = 0;
  for (const char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool is_scheme(std::string_view s) {
  if (s.empty() || !is_alpha(s.front())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alpha(c) || is_digit(c) || c == '+' || c == '-' || c == '.';
  });
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

}  // namespace

std::string Host::display() const {
  if (kind == Kind::address) {
    return address.is_v4() ? address.to_string() : "[" + address.to_string() + "]";
  }
  return name;
}

Host normalize_host(std::string_view raw) {
  Host host;
  if (auto address = parse_ip_literal(raw)) {
    host.kind = Host::Kind::address;
    host.address = *address;
    return host;
  }
  host.name.reserve(raw.size());
  std::transform(raw.begin(), raw.end(), std::back_inserter(host.name), lower);
  std::string_view name = host.name;
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);

  const char* problem = name_problem(name);
  if (!problem && looks_like_ipv4(name)) problem = "numeric host that is not a valid IPv4 address";
  if (problem) {
    host.kind = Host::Kind::invalid;
    // Whole: whoever shows it shortens it keeping the labels on the right (shown_host).
    host.name.assign(raw);
    host.invalid_reason = problem;
    return host;
  }
  host.name.resize(name.size());
  host.kind = Host::Kind::name;
  return host;
}

std::optional<Authority> parse_authority(std::string_view text) {
  Authority out;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = text.substr(1, close - 1);
    out.ip_literal = true;
    rest = text.substr(close + 1);
    if (out.host.size() < 2 || !std::all_of(out.host.begin(), out.host.end(), is_v6_char) ||
        out.host.find(':') == std::string_view::npos) {
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

std::optional<Target> parse_target(std::string_view text) {
  Target target;
  std::optional<std::uint16_t> default_port;
  if (const auto scheme_end = text.find("://");
      scheme_end != std::string_view::npos && is_scheme(text.substr(0, scheme_end))) {
    target.scheme = text.substr(0, scheme_end);
    if (iequals(target.scheme, "http")) {
      default_port = 80;
    } else if (iequals(target.scheme, "https")) {
      default_port = 443;
    } else {
      return std::nullopt;
    }
    text.remove_prefix(scheme_end + 3);
    const std::size_t authority_end = text.find_first_of("/?#");
    if (authority_end != std::string_view::npos) {
      target.rest = text.substr(authority_end);
      text = text.substr(0, authority_end);
    }
  }
  // Userinfo has no place in a target ('@' is no host character either; refused by name).
  if (text.find('@') != std::string_view::npos) return std::nullopt;
  const auto authority = parse_authority(text);
  if (!authority) return std::nullopt;
  target.host = authority->host;
  target.ip_literal = authority->ip_literal;
  target.written_port = authority->port;
  target.port = authority->port ? authority->port : default_port;
  return target;
}

}  // namespace sandgate::policy
