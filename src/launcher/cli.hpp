#pragma once

// Command-line parsing for sandgate-launch (pure: no I/O).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

enum class Verb { run, up, exec, down, list, gc, env, help };

// One parsed command line.
struct Options {
  std::string config_path = "/etc/sandgate/sandgate.toml";
  Verb verb = Verb::help;
  std::string sandbox;
  std::optional<std::string> profile;
  std::vector<std::string> allow;
  std::string netns_path;            // --netns: attach this namespace instead of creating one
  std::vector<std::string> command;  // after "--" (run, exec)
  std::string user;                  // --user (run, exec): run the command as this user
  bool share_run = false;            // --share-run (run, exec): the host's /run, not a private one
  bool json = false;                 // list --json; run --json, --json-file, --json-fd
  std::string help_command;          // help: `COMMAND -h` asked for that command's usage
  bool quiet = false;                // --quiet (run, exec): no summary of refusals on stderr
  // run only (docs/launcher.md, "Limits and outcomes"):
  std::optional<std::chrono::milliseconds> timeout;         // --timeout: TERM at the deadline
  std::chrono::milliseconds kill_after{kDefaultKillAfter};  // --kill-after: then KILL
  std::optional<std::uint64_t> memory;                      // --memory: bytes, the sandbox's cgroup
  std::optional<std::uint64_t> pids;                        // --pids: tasks in the sandbox's cgroup
  std::string json_file;                                    // --json-file: the status object here
  int json_fd = -1;  // --json-fd: here (-1 with json: stdout, when no json_file either)
  // --approve-with: answers the sandbox's held destinations with this shell command's exit
  // status while the command runs (approver.hpp).
  std::string approve_with;

  static constexpr std::chrono::milliseconds kDefaultKillAfter{5000};
  static constexpr std::uint64_t kMinMemory = 1024 * 1024;
};

// Parses argv[1..]. Returns nullopt with a one-line reason in *error on a usage error.
std::optional<Options> parse_args(const std::vector<std::string_view>& args, std::string* error);

// The usage text printed by `help` and after a usage error; only `command`'s lines when given
// (`sandgate-launch run -h`).
std::string usage_text(std::string_view command = {});

}  // namespace sandgate::launcher
