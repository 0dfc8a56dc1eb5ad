#include "app/check_command.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <vector>

#include "config/config.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"
#include "secrets/placeholder.hpp"
#include "secrets/secret_file.hpp"
#include "telemetry/audit_chain.hpp"
#include "tls/authority.hpp"

namespace sandgate::app {

namespace {

namespace fs = std::filesystem;

struct Findings {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
};

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// What the daemon reads at start, read here as `owner` will read it.
void check_files(const config::Config& cfg, uid_t owner, Findings& out) {
  if (cfg.interception.enabled()) {
    try {
      tls::Authority::load(cfg.interception.ca_cert, cfg.interception.ca_key,
                           std::chrono::system_clock::now(), owner);
    } catch (const tls::CaError& e) {
      out.errors.push_back(std::string("interception: ") + e.what());
    }
  }
  for (const auto& spec : cfg.credentials) {
    for (std::string& problem : secrets::check_credential(spec, owner)) {
      out.errors.push_back(std::move(problem));
    }
  }
  if (!cfg.credentials.empty()) {
    if (std::string problem = secrets::PlaceholderKey::problem(cfg.placeholder_key_file, owner);
        !problem.empty()) {
      out.errors.push_back("credentials.placeholder_key_file: " + problem);
    }
  }
  if (cfg.logging.audit_chain && !cfg.logging.audit_signing_key.empty()) {
    if (std::string problem = telemetry::signing_key_problem(cfg.logging.audit_signing_key, owner);
        !problem.empty()) {
      out.errors.push_back("log.audit_signing_key: " + problem);
    }
  }
  if (!cfg.launcher.ca_file.empty()) {
    try {
      tls::read_certificates(cfg.launcher.ca_file);
    } catch (const tls::CaError& e) {
      out.errors.push_back(std::string("launcher.ca_file: ") + e.what());
    }
  }
  if (cfg.sandboxes_dir_named && !fs::exists(cfg.sandboxes_dir)) {
    const std::string parent = fs::path(cfg.sandboxes_dir).parent_path().string();
    if (is_directory(parent)) {
      out.notes.push_back("sandboxes_dir " + cfg.sandboxes_dir +
                          " does not exist; the daemon makes it at start (mode 0750)");
    } else {
      out.errors.push_back("sandboxes_dir " + cfg.sandboxes_dir + ": its directory " + parent +
                           " does not exist");
    }
  }
}

// The warnings about one sandbox, decided by `policy` (which holds it): no allow list, inject
// rules on hosts it may not reach. `who` names it in the warnings; `reach`: what the warning
// says cannot reach ("the sandbox", "its sandboxes").
void check_sandbox(const config::Config& cfg, const policy::Policy& policy,
                   const config::Sandbox& sandbox, const std::string& who, std::string_view reach,
                   std::string_view nothing_allowed, Findings& out) {
  const policy::SandboxSpec spec = policy::merged(sandbox.spec);
  if (spec.allow.empty() && spec.allow_cidrs.empty() && spec.allow_host_services.empty() &&
      !spec.allow_all_hosts) {
    out.warnings.push_back(who + " has no allow list: " + std::string(nothing_allowed));
    return;
  }
  std::vector<const secrets::InjectRule*> rules;
  if (const auto it = cfg.profile_inject.find(sandbox.profile); it != cfg.profile_inject.end()) {
    for (const auto& rule : it->second) rules.push_back(&rule);
  }
  for (const auto& rule : sandbox.inject) rules.push_back(&rule);
  for (const secrets::InjectRule* rule : rules) {
    for (const policy::HostPattern& pattern : rule->hosts) {
      if (pattern.wildcard) continue;  // which names it meets is not known here
      const std::uint16_t port =
          pattern.port.value_or(spec.ports.empty() ? std::uint16_t{443} : spec.ports.back());
      const policy::Host host = policy::normalize_host(pattern.domain);
      const policy::Decision d =
          policy.decide(sandbox.spec.id, host, port, policy::EntryMode::http);
      if (d.allowed) continue;
      out.warnings.push_back(who + ": " + rule->origin + " names " + pattern.domain + ":" +
                             std::to_string(port) + ", which " + std::string(reach) +
                             " may not reach (" + std::string(policy::reason_name(d.reason)) +
                             "): credential " + rule->credential + " is never sent there");
    }
  }
}

// What loads but cannot be what the operator meant: each sandbox of the config, and each
// profile as a sandbox launched with it alone (no --allow) would be. Sandboxes the launcher
// wrote are its own.
void check_rules(const config::Config& cfg, Findings& out) {
  const auto policy = cfg.build_policy({});
  for (const config::Sandbox& sandbox : cfg.sandboxes) {
    if (sandbox.launcher_made) continue;
    const std::string who = "sandbox " + sandbox.spec.id +
                            (sandbox.profile.empty() ? "" : " (profile " + sandbox.profile + ")");
    check_sandbox(cfg, *policy, sandbox, who, "the sandbox", "every destination is refused", out);
  }
  for (const std::string& profile : cfg.profile_names()) {
    std::optional<config::Sandbox> launched = cfg.launched_with(profile);
    if (!launched) continue;
    config::Config alone = cfg;  // the same daemon-wide rules, this one sandbox
    alone.sandboxes = config::SandboxList::from_sorted({*launched});
    check_sandbox(cfg, *alone.build_policy({}), *launched, "profile " + profile,
                  "a sandbox launched with it",
                  "a sandbox launched with it alone refuses every destination (unless "
                  "sandgate-launch --allow adds some)",
                  out);
  }
}

}  // namespace

int run_check_config(const std::string& path, const std::optional<std::string>& user) {
  uid_t owner = ::geteuid();
  if (user) {
    const passwd* pw = ::getpwnam(user->c_str());
    if (pw == nullptr) {
      std::cerr << "sandgate: --check-config: no user \"" << *user << "\" on this host\n";
      return 2;
    }
    owner = pw->pw_uid;
  }
  config::Config cfg;
  try {
    cfg = config::load_config(path);
  } catch (const config::ConfigErrors& e) {
    for (const auto& error : e.errors()) std::cerr << error.to_string() << "\n";
    std::cerr << path << ": " << e.errors().size() << " error(s)\n";
    return 2;
  }
  Findings found;
  check_files(cfg, owner, found);
  check_rules(cfg, found);
  for (const std::string& e : found.errors) std::cerr << path << ": " << e << "\n";
  for (const std::string& w : found.warnings) std::cerr << path << ": warning: " << w << "\n";
  for (const std::string& n : found.notes) std::cerr << path << ": note: " << n << "\n";
  if (!found.errors.empty()) {
    std::cerr << path << ": " << found.errors.size() << " error(s)\n";
    return 2;
  }
  std::cout << path << ": ok (" << cfg.sandboxes.size() << " sandboxes)\n";
  return 0;
}

}  // namespace sandgate::app
