#include "launcher/environment.hpp"

#include <algorithm>
#include <cctype>

namespace sandgate::launcher {
namespace {

bool is_proxy_variable(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return upper == "HTTP_PROXY" || upper == "HTTPS_PROXY" || upper == "ALL_PROXY" ||
         upper == "NO_PROXY";
}

std::string_view name_of(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

bool is_ca_variable(std::string_view name) {
  return std::find(std::begin(kCaVariables), std::end(kCaVariables), name) !=
         std::end(kCaVariables);
}

}  // namespace

std::vector<std::string> sandbox_environment(const std::vector<std::string>& parent,
                                             const std::string& ca_bundle) {
  std::vector<std::string> env;
  for (const std::string& entry : parent) {
    const std::string_view name = name_of(entry);
    if (is_proxy_variable(name) || is_ca_variable(name)) continue;
    env.push_back(entry);
  }
  for (const std::string_view name : kCaVariables) {
    env.push_back(std::string(name) + "=" + ca_bundle);
  }
  return env;
}

std::vector<std::string> with_credential_variables(std::vector<std::string> env,
                                                   const std::vector<std::string>& declared,
                                                   const std::vector<std::string>& placeholders) {
  std::erase_if(env, [&](const std::string& entry) {
    const std::string_view name = name_of(entry);
    return std::find(declared.begin(), declared.end(), name) != declared.end() ||
           std::any_of(placeholders.begin(), placeholders.end(),
                       [&](const std::string& p) { return name_of(p) == name; });
  });
  env.insert(env.end(), placeholders.begin(), placeholders.end());
  return env;
}

}  // namespace sandgate::launcher
