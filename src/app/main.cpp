// sandgate: the egress proxy daemon and its operator commands. Parses arguments only.
#include <iostream>
#include <string>
#include <vector>

#include "app/audit_command.hpp"
#include "app/ca_command.hpp"
#include "app/decide_command.hpp"
#include "common/version.hpp"
#include "config/config.hpp"
#include "proxy/server.hpp"
#include "secrets/secret_file.hpp"
#include "tls/authority.hpp"

namespace {

constexpr const char* kUsage =
    "usage: sandgate --config FILE             run the daemon\n"
    "       sandgate --check-config FILE       validate a config and exit (0 ok, 2 errors)\n"
    "       sandgate decide --config FILE --sandbox ID [--method M] [--path P] TARGET\n"
    "                                          print one policy decision as JSON, for a\n"
    "                                          destination or (--method, --path, or a\n"
    "                                          URL's path with them) one request\n"
    "                                          (exit 0 allow, 3 deny, 2 error)\n"
    "       sandgate ca init DIR [--force]     create the interception CA in DIR\n"
    "                                          (exit 0 created, 1 refused or failed)\n"
    "       sandgate audit [--sandbox ID]... [--code CODE]... [--host PATTERN]...\n"
    "                      [--since TIME] [--until TIME] [--denied-only]\n"
    "                      [--format table|json|html] [--top N] [--config FILE]\n"
    "                      [--max-groups N] [--max-line-bytes N] [FILE|-]...\n"
    "                                          report on audit logs (plain or .gz; stdin\n"
    "                                          when no FILE); exit 0, 1 unreadable input\n"
    "       sandgate --version\n";

int usage_error(const std::string& message) {
  std::cerr << "sandgate: " << message << "\n" << kUsage;
  return 2;
}

// Loads a config, printing every error; nullopt on failure.
std::optional<sandgate::config::Config> load(const std::string& path) {
  try {
    return sandgate::config::load_config(path);
  } catch (const sandgate::config::ConfigErrors& e) {
    for (const auto& error : e.errors()) std::cerr << error.to_string() << "\n";
    std::cerr << path << ": " << e.errors().size() << " error(s)\n";
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("no command given");
  if (args[0] == "--version") {
    std::cout << "sandgate " << sandgate::kVersion << "\n";
    return 0;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "--check-config") {
    if (args.size() != 2) return usage_error("--check-config takes one FILE");
    const auto cfg = load(args[1]);
    if (!cfg) return 2;
    if (cfg->interception.enabled()) {
      // The CA as the daemon will load it: readable, the key 0600 and this user's, a CA.
      try {
        sandgate::tls::Authority::load(cfg->interception.ca_cert, cfg->interception.ca_key);
      } catch (const sandgate::tls::CaError& e) {
        std::cerr << args[1] << ": interception: " << e.what() << "\n";
        return 2;
      }
    }
    // Each credential's files as its provider will read them: present, this user's, 0600, and
    // a github_app key that parses as an RSA private key.
    bool credentials_ok = true;
    for (const auto& spec : cfg->credentials) {
      for (const std::string& problem : sandgate::secrets::check_credential(spec)) {
        std::cerr << args[1] << ": " << problem << "\n";
        credentials_ok = false;
      }
    }
    if (!credentials_ok) return 2;
    std::cout << args[1] << ": ok (" << cfg->sandboxes.size() << " sandboxes)\n";
    return 0;
  }
  if (args[0] == "decide") {
    std::string config_path, sandbox, target;
    sandgate::app::DecideRequest request;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--config" && i + 1 < args.size()) {
        config_path = args[++i];
      } else if (args[i] == "--sandbox" && i + 1 < args.size()) {
        sandbox = args[++i];
      } else if (args[i] == "--method" && i + 1 < args.size() && !request.method) {
        request.method = args[++i];
      } else if (args[i] == "--path" && i + 1 < args.size() && !request.path) {
        request.path = args[++i];
      } else if (target.empty() && !args[i].starts_with("--")) {
        target = args[i];
      } else {
        return usage_error("decide: unexpected argument \"" + args[i] + "\"");
      }
    }
    if (config_path.empty() || sandbox.empty() || target.empty()) {
      return usage_error("decide needs --config FILE, --sandbox ID and a TARGET");
    }
    const auto cfg = load(config_path);
    if (!cfg) return 2;
    return sandgate::app::run_decide(*cfg, sandbox, target, request);
  }
  if (args[0] == "ca") {
    if (args.size() < 2 || args[1] != "init") return usage_error("ca: expected \"ca init DIR\"");
    std::string dir;
    bool force = false;
    for (std::size_t i = 2; i < args.size(); ++i) {
      if (args[i] == "--force") {
        force = true;
      } else if (dir.empty() && !args[i].starts_with("--")) {
        dir = args[i];
      } else {
        return usage_error("ca init: unexpected argument \"" + args[i] + "\"");
      }
    }
    if (dir.empty()) return usage_error("ca init needs a DIR");
    return sandgate::app::run_ca_init(dir, force);
  }
  if (args[0] == "audit") {
    std::string error;
    const auto options = sandgate::app::parse_audit_args({args.begin() + 1, args.end()}, error);
    if (!options) return usage_error(error);
    return sandgate::app::run_audit(*options);
  }
  if (args[0] == "--config") {
    if (args.size() != 2) return usage_error("--config takes one FILE");
    auto cfg = load(args[1]);
    if (!cfg) return 2;
    return sandgate::proxy::run_server(
        std::make_shared<const sandgate::config::Config>(std::move(*cfg)));
  }
  return usage_error("unknown argument \"" + args[0] + "\"");
}
