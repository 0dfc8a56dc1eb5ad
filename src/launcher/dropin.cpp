#include "launcher/dropin.hpp"

#include "policy/suggestion.hpp"

namespace sandgate::launcher {

std::string dropin_text(std::string_view id, const std::optional<std::string>& profile,
                        std::string_view sandbox_ip, const std::vector<std::string>& allow) {
  std::string out(kDropinMarker);
  out += "; removed by `sandgate-launch down`\n";
  out += "id = " + policy::toml_string(id) + "\n";
  if (profile) out += "profile = " + policy::toml_string(*profile) + "\n";
  out += "sources = [" + policy::toml_string(sandbox_ip) + "]\n";
  out += "allow = [";
  for (std::size_t i = 0; i < allow.size(); ++i) {
    out += (i == 0 ? "" : ", ") + policy::toml_string(allow[i]);
  }
  out += "]\n";
  return out;
}

bool is_launcher_dropin(std::string_view text) {
  return text.starts_with(kDropinMarker);
}

}  // namespace sandgate::launcher
