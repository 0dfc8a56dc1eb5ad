// sandgate: the egress proxy daemon and its operator commands. Parses arguments only.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "app/audit_command.hpp"
#include "app/ca_command.hpp"
#include "app/check_command.hpp"
#include "app/decide_command.hpp"
#include "app/holds_command.hpp"
#include "common/version.hpp"
#include "config/config.hpp"
#include "proxy/server.hpp"

namespace {

// Each command's usage, in the order `sandgate --help` prints them; `sandgate CMD --help`
// prints its own.
struct CommandUsage {
  std::string_view command;  // the first argument that selects it
  std::string_view text;
};
constexpr CommandUsage kCommands[] = {
    {"--config", "sandgate --config FILE             run the daemon\n"},
    {"--check-config",
     "sandgate --check-config FILE [--user NAME]\n"
     "                                   validate a config and what start reads, as\n"
     "                                   NAME would (exit 0 ok, 2 errors)\n"},
    {"decide",
     "sandgate decide --config FILE --sandbox ID [--method M] [--path P]\n"
     "                [--admin ADDRESS:PORT] TARGET\n"
     "                                   print one policy decision as JSON, for a\n"
     "                                   destination or (--method, --path, or a\n"
     "                                   URL's path with them) one request\n"
     "                                   (exit 0 allow, 3 deny, 2 error)\n"},
    {"holds",
     "sandgate holds --config FILE [--admin ADDRESS:PORT] [--json]\n"
     "sandgate holds --config FILE allow ID [--sandbox-wide [--ttl SECONDS]]\n"
     "sandgate holds --config FILE deny ID [--message TEXT]\n"
     "sandgate holds --config FILE revoke SANDBOX [HOST:PORT]\n"
     "sandgate holds --config FILE watch [--sandbox ID] [--json]\n"
     "                                   list the destinations a running daemon\n"
     "                                   holds for an answer, answer one, end a\n"
     "                                   sandbox's grants, or follow the holds\n"
     "                                   as they begin and end\n"
     "                                   (exit 0 done, 1 refused, 2 usage)\n"},
    {"ca",
     "sandgate ca init DIR [--force]     create the interception CA in DIR\n"
     "                                   (exit 0 created, 1 refused or failed)\n"},
    {"audit",
     "sandgate audit [--sandbox ID]... [--code CODE]... [--host PATTERN]...\n"
     "               [--since TIME] [--until TIME] [--denied-only]\n"
     "               [--format table|json|html] [--top N] [--config FILE]\n"
     "               [--max-groups N] [--max-line-bytes N] [FILE|-]...\n"
     "                                   report on audit logs (plain or .gz; stdin\n"
     "                                   when no FILE); exit 0, 1 unreadable input\n"
     "sandgate audit verify [--public-key PEM] [--head FILE] FILE...\n"
     "                                   check the log's hash chain and checkpoints\n"
     "                                   (rotated files first); exit 0 intact,\n"
     "                                   1 tampered, 2 error\n"
     "sandgate audit keygen PATH         create a checkpoint signing key (0600)\n"
     "                                   and print its public key\n"},
    {"--version", "sandgate --version\n"},
};

// "usage: " before the first line of the first command, its width of spaces before the rest.
std::string usage_text(std::string_view only = {}) {
  std::string out;
  for (const CommandUsage& c : kCommands) {
    if (!only.empty() && c.command != only) continue;
    for (std::string_view rest = c.text; !rest.empty();) {
      const std::size_t end = rest.find('\n') + 1;
      out += out.empty() ? "usage: " : "       ";
      out += rest.substr(0, end);
      rest.remove_prefix(end);
    }
  }
  return out;
}

bool asks_for_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin() + 1, args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

int usage_error(const std::string& message) {
  std::cerr << "sandgate: " << message << "\n" << usage_text();
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
    std::cout << usage_text();
    return 0;
  }
  if (asks_for_help(args) && !usage_text(args[0]).empty()) {
    std::cout << usage_text(args[0]);
    return 0;
  }
  if (args[0] == "--check-config") {
    std::optional<std::string> user;
    std::string file;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--user" && i + 1 < args.size() && !user) {
        user = args[++i];
      } else if (file.empty() && !args[i].starts_with("--")) {
        file = args[i];
      } else {
        return usage_error("--check-config: unexpected argument \"" + args[i] + "\"");
      }
    }
    if (file.empty()) return usage_error("--check-config takes a FILE");
    return sandgate::app::run_check_config(file, user);
  }
  if (args[0] == "decide") {
    std::string config_path, sandbox, target, admin;
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
      } else if (args[i] == "--admin" && i + 1 < args.size()) {
        admin = args[++i];
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
    return sandgate::app::run_decide(*cfg, sandbox, target, request, admin);
  }
  if (args[0] == "holds") {
    std::string config_path;
    std::vector<std::string> rest;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--config" && i + 1 < args.size() && config_path.empty()) {
        config_path = args[++i];
      } else {
        rest.push_back(args[i]);
      }
    }
    if (config_path.empty()) return usage_error("holds needs --config FILE");
    const auto cfg = load(config_path);
    if (!cfg) return 2;
    return sandgate::app::run_holds(*cfg, rest);
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
  if (args[0] == "audit" && args.size() >= 2 && args[1] == "verify") {
    return sandgate::app::run_audit_verify({args.begin() + 2, args.end()});
  }
  if (args[0] == "audit" && args.size() >= 2 && args[1] == "keygen") {
    return sandgate::app::run_audit_keygen({args.begin() + 2, args.end()});
  }
  if (args[0] == "audit") {
    std::string error;
    const auto options = sandgate::app::parse_audit_args({args.begin() + 1, args.end()}, error);
    if (!options) return usage_error(error);
    // Standard input on a terminal is a person who forgot the file, not a pipe.
    const bool stdin_by_default = std::find(args.begin() + 1, args.end(), "-") == args.end() &&
                                  options->inputs == std::vector<std::string>{"-"};
    if (stdin_by_default && ::isatty(0) == 1) {
      std::cerr << "sandgate audit: no FILE given and standard input is a terminal\n"
                << usage_text("audit");
      return 2;
    }
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
