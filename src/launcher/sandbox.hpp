#pragma once

// Creating and destroying one launcher sandbox: netns, veth pair, addresses, nftables table,
// resolv.conf, drop-in registration. Creation rolls back everything it did when a step fails.

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/state.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::launcher {

// A failure that ends the command: one line for stderr (without the "sandgate-launch: " prefix)
// and the exit code (2 usage or config, 1 anything else). The launcher is a one-shot command,
// so every failure is "startup" in the STYLE.md sense; rollback is done by destructors on the way
// out.
class LaunchError : public std::runtime_error {
 public:
  LaunchError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// What the launcher takes from the daemon's config, checked (see settings_from_config).
struct Settings {
  std::string config_path;
  std::string state_dir;
  std::string sandboxes_dir;
  policy::Cidr pool;
  std::string ca_file;          // launcher.ca_file: extra roots for the sandbox ("" none)
  std::string interception_ca;  // interception.ca_cert: sandgate's CA ("" interception off)
  std::chrono::milliseconds ready_timeout{10'000};
  std::uint16_t transparent_port = 0;
  std::uint16_t dns_port = 0;
  std::string admin_host;  // IP literal to connect to
  std::uint16_t admin_port = 0;
  std::string admin_token_file;               // listeners.admin_token_file ("" none)
  std::chrono::milliseconds hold_timeout{0};  // limits.hold_timeout_ms
  std::set<std::string> profiles;             // profile names in the config
  std::set<std::string> defined_ids;  // sandbox ids the config (and its drop-ins) already define
};

// What to create.
struct SandboxRequest {
  std::string id;
  std::optional<std::string> profile;
  std::vector<std::string> allow;
  std::string netns_path;  // empty: create sg-<id>
  std::string mode;        // "run" or "up"
};

// <state_dir>/ca/ca-bundle.pem (0644 in a 0755 directory, readable by a --user command),
// rewritten by every create: the system roots, then interception.ca_cert and launcher.ca_file,
// each certificate once (make_ca_bundle).
std::string ca_bundle_path(const Settings& settings);
// Writes that bundle (LaunchError 2 when a certificate file the config names cannot be read).
void write_ca_bundle(const Settings& settings);

// Checks the request, then creates the sandbox and waits until the daemon reports it active.
// Throws LaunchError after undoing every step done so far. A SIGINT, SIGTERM or SIGHUP that is
// pending (the caller blocks them) while waiting for the daemon also aborts with rollback;
// LaunchError's exit code is then 128 + the signal.
SandboxState create_sandbox(const Settings& settings, const SandboxRequest& request);

// Removes everything the state names, tolerating parts that are already gone. Returns one
// message per step that failed (empty: all clean). Waits up to `settle` for the daemon to
// report the sandbox inactive after its drop-in is removed (skipped when zero).
std::vector<std::string> destroy_sandbox(const StateDir& dir, const SandboxState& state,
                                         const Settings& settings,
                                         std::chrono::milliseconds settle);

// Checks that this process may create sandboxes (CAP_NET_ADMIN, CAP_SYS_ADMIN) and that `ip`,
// `nft`, `nsenter` and `setpriv` are in kToolDirs (not $PATH). Throws LaunchError.
void check_privileges_and_tools();
// Only the capabilities (for `list`, which reads the root-only state files).
void check_privileges();

}  // namespace sandgate::launcher
