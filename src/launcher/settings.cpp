#include "launcher/settings.hpp"

#include <filesystem>

namespace sandgate::launcher {
namespace {

// The port of the first 0.0.0.0 address in `list`; throws naming listeners.<key>.
std::uint16_t wildcard_port(const std::vector<config::ListenAddress>& list, const char* key,
                            const std::string& path) {
  const std::string where = std::string("listeners.") + key;
  if (list.empty()) {
    throw LaunchError(2, where + " is not configured in " + path + "; add " + key +
                             " = [\"0.0.0.0:PORT\"] under [listeners]");
  }
  for (const config::ListenAddress& a : list) {
    if (a.address.is_v4() && a.address.v4_value() == 0) {
      if (a.port == 0) {
        throw LaunchError(2, where + " " + a.text + " in " + path +
                                 " needs a fixed port for the launcher's nftables redirect");
      }
      return a.port;
    }
  }
  throw LaunchError(2, where + " in " + path +
                           " has no 0.0.0.0:PORT address; nft redirect delivers to the host-side "
                           "veth address, so add " +
                           key + " = [\"0.0.0.0:PORT\"]");
}

}  // namespace

Settings settings_from_config(const config::Config& config, bool for_create) {
  Settings s;
  s.config_path = config.path;
  s.state_dir = config.launcher.state_dir;
  s.sandboxes_dir = config.sandboxes_dir;
  s.pool = config.launcher.pool;
  s.ca_file = config.launcher.ca_file;
  // Programs in the sandbox must trust the leaves sandgate mints for inspected hosts.
  s.interception_ca = config.interception.ca_cert;
  s.ready_timeout = config.launcher.ready_timeout;
  s.admin_token_file = config.listeners.admin_token_file;
  s.hold_timeout = config.limits.hold_timeout;
  for (const config::Sandbox& sb : config.sandboxes) s.defined_ids.insert(sb.spec.id);
  for (std::string& name : config.profile_names()) s.profiles.insert(std::move(name));
  if (config.listeners.admin) {
    s.admin_host = config.listeners.admin->dial_host();
    s.admin_port = config.listeners.admin->port;
  }
  if (!for_create) return s;
  s.transparent_port = wildcard_port(config.listeners.transparent, "transparent", config.path);
  s.dns_port = wildcard_port(config.listeners.dns, "dns", config.path);
  if (!config.listeners.admin || s.admin_port == 0) {
    throw LaunchError(2, "listeners.admin is not configured with a fixed port in " + config.path +
                             "; the launcher asks it whether the daemon activated a sandbox, so "
                             "add admin = \"127.0.0.1:PORT\" under [listeners]");
  }
  if (s.sandboxes_dir.empty()) {
    throw LaunchError(2, "sandboxes_dir is not set in " + config.path +
                             "; the launcher registers sandboxes there");
  }
  return s;
}

Settings load_settings(const std::string& given_path, bool for_create) {
  // Absolute, so every path taken from it (sandboxes_dir, state_dir, ca_file, each drop-in in
  // a state file) is too: a later `down` or `gc` from another directory finds the same files.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(given_path, ec);
  const std::string config_path = ec ? given_path : absolute.lexically_normal().string();
  config::Config config;
  try {
    config = config::load_config(config_path);
  } catch (const config::ConfigErrors& e) {
    throw LaunchError(
        2, "config: " + e.errors().front().to_string() +
               (e.errors().size() > 1 ? " (and more; run sandgate --check-config)" : ""));
  } catch (const std::exception& e) {
    throw LaunchError(2, "config: " + std::string(e.what()));
  }
  return settings_from_config(config, for_create);
}

}  // namespace sandgate::launcher
