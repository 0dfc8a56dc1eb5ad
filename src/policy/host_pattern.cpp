#include "policy/host_pattern.hpp"

#include <charconv>

#include "policy/host.hpp"

namespace sandgate::policy {

std::string HostPattern::to_string() const {
  std::string text = wildcard ? "*." + domain : domain;
  if (port) text += ":" + std::to_string(*port);
  return text;
}

std::optional<HostPattern> parse_host_pattern(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<HostPattern> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty host pattern");
  if (text.front() == '[' || text.find(':') != text.rfind(':')) {
    return fail("IP addresses are not host patterns; use allow_cidrs");
  }

  HostPattern pattern;
  std::string_view host = text;
  if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    const std::string_view port = text.substr(colon + 1);
    unsigned value = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || ptr != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return fail("invalid port \"" + std::string(port) + "\" (expected 1-65535)");
    }
    pattern.port = static_cast<std::uint16_t>(value);
    host = text.substr(0, colon);
  }

  if (host.starts_with("*.")) {
    pattern.wildcard = true;
    host.remove_prefix(2);
  }
  if (host.find('*') != std::string_view::npos) {
    return fail("'*' is only allowed as the whole first label, as in \"*.example.com\"");
  }

  const Host normalised = normalize_host(host);
  if (normalised.is_address() || looks_like_ipv4(host)) {
    return fail("IP addresses are not host patterns; use allow_cidrs");
  }
  if (!normalised.is_name()) {
    return fail("invalid host name \"" + std::string(host) +
                "\": " + std::string(normalised.invalid_reason));
  }
  pattern.domain = normalised.name;
  return pattern;
}

}  // namespace sandgate::policy
