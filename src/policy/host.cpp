#include "policy/host.hpp"

#include <algorithm>
#include <charconv>

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

std::optional<std::uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || ptr != s.data() + s.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
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
    host.name.assign(raw.substr(0, std::min<std::size_t>(raw.size(), 300)));
    host.invalid_reason = problem;
    return host;
  }
  host.name.resize(name.size());
  host.kind = Host::Kind::name;
  return host;
}

std::optional<Target> parse_target(std::string_view text) {
  Target target;
  std::optional<std::uint16_t> default_port;
  if (const auto scheme_end = text.find("://"); scheme_end != std::string_view::npos) {
    std::string scheme;
    for (char c : text.substr(0, scheme_end)) scheme.push_back(lower(c));
    if (scheme == "http") {
      default_port = 80;
    } else if (scheme == "https") {
      default_port = 443;
    } else {
      return std::nullopt;
    }
    text.remove_prefix(scheme_end + 3);
    text = text.substr(0, text.find_first_of("/?#"));
    if (text.find('@') != std::string_view::npos) return std::nullopt;
  }
  if (text.empty()) return std::nullopt;

  std::string_view host = text;
  std::string_view port;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    // More than one colon without brackets: a bare IPv6 literal, no port.
    if (text.find(':') != colon) {
      if (!parse_ip_literal(text)) return std::nullopt;
    } else {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      if (port.empty()) return std::nullopt;
    }
  }
  if (host.empty()) return std::nullopt;
  target.host.assign(host);
  if (!port.empty()) {
    target.port = parse_port(port);
    if (!target.port) return std::nullopt;
  } else {
    target.port = default_port;
  }
  return target;
}

}  // namespace sandgate::policy
