#pragma once

// Thin wrappers over the tools and system calls the launcher uses: `ip`, `nft`, `nsenter`,
// capabilities, and writing sysctls inside another network namespace.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// How a tool finished: its exit status (128 + signal when killed, 127 when it could not be
// started) and what it wrote to stdout and stderr (trailing newlines trimmed from err).
struct ToolResult {
  int status = -1;
  std::string err;
  std::string out;
  bool ok() const { return status == 0; }
};

// Runs argv (argv[0] looked up in PATH) with `input` on stdin.
ToolResult run_tool(const std::vector<std::string>& argv, std::string_view input = {});

// argv[0] resolved in $PATH, or nullopt.
std::optional<std::string> find_in_path(std::string_view name);

// Whether this process holds the capability in its effective set (CAP_NET_ADMIN = 12,
// CAP_SYS_ADMIN = 21).
bool has_capability(int cap);

// Writes `value` to each /proc/sys file in `paths` as seen from the network namespace at
// `netns_path` (setns there and back). Returns an error message, or "" on success.
std::string write_sysctls_in(const std::string& netns_path, const std::vector<std::string>& paths,
                             std::string_view value);

// Whether a process with this pid exists (kill(pid, 0)).
bool process_alive(long pid);

// SIGKILLs every process whose network namespace is the one at `netns_path` (same device and
// inode as /proc/PID/ns/net), again until none is left (a forking process cannot outrun it) or
// a bounded number of rounds. Returns how many it killed. Only for namespaces the launcher
// made: everything in them is the sandbox's.
int kill_processes_in_netns(const std::string& netns_path);

// SIGKILLs every process in session `sid` (the command's own session: setsid made it the
// leader). For an attached --netns, where other processes of the namespace are not ours.
int kill_session(long sid);

}  // namespace sandgate::launcher

namespace sandgate::launcher {

// The signals that stop a launcher (SIGINT, SIGTERM, SIGHUP). run and up block them so a
// signal never interrupts a half-built sandbox; they are polled instead.
void block_stop_signals();
// A blocked stop signal waiting for this process (consumed), or 0.
int take_pending_stop_signal();

}  // namespace sandgate::launcher
