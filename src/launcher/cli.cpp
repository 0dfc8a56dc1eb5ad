#include "launcher/cli.hpp"

#include <map>
#include <utility>

#include "launcher/quantity.hpp"

namespace sandgate::launcher {
namespace {

// Which options each verb takes.
struct VerbSpec {
  Verb verb;
  bool sandbox;  // --sandbox required
  bool policy;   // --profile, --allow, --netns
  bool command;  // "-- CMD..." required
};

const std::map<std::string_view, VerbSpec>& verbs() {
  static const std::map<std::string_view, VerbSpec> table = {
      {"run", {Verb::run, true, true, true}},      {"up", {Verb::up, true, true, false}},
      {"exec", {Verb::exec, true, false, true}},   {"down", {Verb::down, true, false, false}},
      {"list", {Verb::list, false, false, false}}, {"gc", {Verb::gc, false, false, false}},
      {"env", {Verb::env, true, false, false}},    {"help", {Verb::help, false, false, false}},
  };
  return table;
}

std::optional<Options> fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return std::nullopt;
}

}  // namespace

std::optional<Options> parse_args(const std::vector<std::string_view>& args, std::string* error) {
  Options options;
  std::size_t i = 0;
  auto value = [&]() -> std::optional<std::string> {
    if (i + 1 >= args.size()) return std::nullopt;
    return std::string(args[++i]);
  };
  // Global options before the verb.
  for (; i < args.size() && args[i].starts_with("--"); ++i) {
    if (args[i] == "--config") {
      auto v = value();
      if (!v) return fail(error, "--config needs a value");
      options.config_path = *v;
    } else if (args[i] == "--help" || args[i] == "-h") {
      options.verb = Verb::help;
      return options;
    } else {
      return fail(error, "unknown option " + std::string(args[i]) + " before the command");
    }
  }
  if (i == args.size()) return fail(error, "missing command (run, up, exec, down, list, gc, env)");
  const auto found = verbs().find(args[i]);
  if (found == verbs().end()) return fail(error, "unknown command " + std::string(args[i]));
  const VerbSpec spec = found->second;
  options.verb = spec.verb;
  bool has_separator = false;
  for (++i; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {  // `run -h`: that command's usage
      options.verb = Verb::help;
      options.help_command = std::string(found->first);
      return options;
    }
    if (arg == "--") {
      if (!spec.command) return fail(error, std::string(found->first) + " takes no command");
      has_separator = true;
      options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    const bool run_only = spec.verb == Verb::run;
    const bool takes_value =
        arg == "--sandbox" || arg == "--config" || (spec.command && arg == "--user") ||
        (spec.policy && (arg == "--profile" || arg == "--allow" || arg == "--netns")) ||
        (run_only &&
         (arg == "--timeout" || arg == "--kill-after" || arg == "--memory" || arg == "--pids" ||
          arg == "--json-file" || arg == "--json-fd" || arg == "--approve-with"));
    if (takes_value && run_only &&
        (arg == "--timeout" || arg == "--kill-after" || arg == "--memory" || arg == "--pids" ||
         arg == "--json-fd")) {
      auto v = value();
      if (!v || v->empty()) return fail(error, std::string(arg) + " needs a value");
      std::string why;
      if (arg == "--timeout" || arg == "--kill-after") {
        const auto d = parse_duration(*v, &why);
        if (!d) return fail(error, std::string(arg) + ": " + why);
        if (arg == "--timeout" && d->count() == 0) return fail(error, "--timeout must be > 0");
        if (arg == "--timeout") {
          options.timeout = *d;
        } else {
          options.kill_after = *d;
        }
      } else if (arg == "--memory") {
        options.memory = parse_size(*v, &why);
        if (!options.memory) return fail(error, "--memory: " + why);
        if (*options.memory < Options::kMinMemory) {
          return fail(error, "--memory " + *v + " is below 1M; sizes take K, M, G (512M)");
        }
      } else if (arg == "--pids") {
        options.pids = parse_count(*v, &why);
        if (!options.pids) return fail(error, "--pids: " + why);
      } else {
        const auto fd = parse_count(*v, &why);
        if (!fd || *fd < 3 || *fd > 1024) {
          return fail(error, "--json-fd needs a descriptor from 3 to 1024 the caller opened");
        }
        options.json_fd = static_cast<int>(*fd);
        options.json = true;
      }
    } else if (takes_value) {
      auto v = value();
      if (!v || v->empty()) return fail(error, std::string(arg) + " needs a value");
      if (arg == "--sandbox") options.sandbox = *v;
      if (arg == "--config") options.config_path = *v;
      if (arg == "--profile") options.profile = *v;
      if (arg == "--allow") options.allow.push_back(*v);
      if (arg == "--netns") options.netns_path = *v;
      if (arg == "--user") options.user = *v;
      if (arg == "--approve-with") options.approve_with = *v;
      if (arg == "--json-file") {
        options.json_file = *v;
        options.json = true;
      }
    } else if (arg == "--share-run" && spec.command) {
      options.share_run = true;
    } else if (arg == "--quiet" && spec.command) {
      options.quiet = true;
    } else if (arg == "--json" && (spec.verb == Verb::list || spec.verb == Verb::run)) {
      options.json = true;
    } else {
      return fail(error,
                  "unknown option " + std::string(arg) + " for " + std::string(found->first));
    }
  }
  if (spec.sandbox && options.sandbox.empty()) {
    return fail(error, std::string(found->first) + " needs --sandbox ID");
  }
  if (spec.command && (!has_separator || options.command.empty())) {
    return fail(error, std::string(found->first) + " needs a command after --");
  }
  if (!options.json_file.empty() && options.json_fd >= 0) {
    return fail(error, "--json-file and --json-fd exclude each other");
  }
  return options;
}

namespace {

// Each command's usage lines, in the order `help` prints them.
constexpr std::pair<std::string_view, std::string_view> kUsage[] = {
    {"run",
     "  run  --sandbox ID [--profile NAME] [--allow PATTERN]... [--netns PATH] [--user USER]\n"
     "       [--share-run] [--timeout DURATION [--kill-after DURATION]] [--memory BYTES]\n"
     "       [--pids N] [--json | --json-file PATH | --json-fd N] [--quiet]\n"
     "       [--approve-with SHELL-COMMAND] -- CMD ARGS...\n"
     "       --approve-with: each destination held for the sandbox runs SHELL-COMMAND (sh -c,\n"
     "       outside the sandbox, SANDGATE_HOLD_ID SANDGATE_SANDBOX SANDGATE_HOST SANDGATE_PORT\n"
     "       SANDGATE_MODE SANDGATE_METHOD SANDGATE_PATH set); its exit status answers: 0 allow\n"
     "       once, 3 allow for the sandbox's life, other (or killed at the hold's deadline)\n"
     "       deny, with its first stdout line as the message. Needs listeners.admin_token_file.\n"},
    {"up", "  up   --sandbox ID [--profile NAME] [--allow PATTERN]... [--netns PATH]\n"},
    {"exec", "  exec --sandbox ID [--user USER] [--share-run] [--quiet] -- CMD ARGS...\n"},
    {"down", "  down --sandbox ID\n"},
    {"list", "  list [--json]\n"},
    {"gc", "  gc\n"},
    {"env",
     "  env  --sandbox ID   print the CA bundle and placeholder variables of sandbox ID\n"
     "                      for a client outside a launched sandbox (explicit proxy)\n"},
};

}  // namespace

std::string usage_text(std::string_view command) {
  std::string out = "usage: sandgate-launch [--config PATH] COMMAND\n";
  for (const auto& [name, lines] : kUsage) {
    if (command.empty() || command == name) out += lines;
  }
  out +=
      "Default config: /etc/sandgate/sandgate.toml. Needs root (CAP_NET_ADMIN, "
      "CAP_SYS_ADMIN).\n";
  return out;
}

}  // namespace sandgate::launcher
