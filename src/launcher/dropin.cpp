#include "launcher/dropin.hpp"

#include <cstdio>

namespace sandgate::launcher {

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string dropin_text(std::string_view id, const std::optional<std::string>& profile,
                        std::string_view sandbox_ip, const std::vector<std::string>& allow) {
  std::string out(kDropinMarker);
  out += "; removed by `sandgate-launch down`\n";
  out += "id = " + toml_quote(id) + "\n";
  if (profile) out += "profile = " + toml_quote(*profile) + "\n";
  out += "sources = [" + toml_quote(sandbox_ip) + "]\n";
  out += "allow = [";
  for (std::size_t i = 0; i < allow.size(); ++i) {
    out += (i == 0 ? "" : ", ") + toml_quote(allow[i]);
  }
  out += "]\n";
  return out;
}

bool is_launcher_dropin(std::string_view text) {
  return text.starts_with(kDropinMarker);
}

}  // namespace sandgate::launcher
