#pragma once

// Thin wrappers over the tools and system calls the launcher uses: `ip`, `nft`, `nsenter`,
// capabilities, and writing sysctls inside another network namespace.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::launcher {

// How a tool finished: its exit status (128 + signal when killed, 127 when it could not be
// started) and what it wrote to stdout and stderr (trailing newlines trimmed from err).
struct ToolResult {
  int status = -1;
  std::string err;
  std::string out;
  bool ok() const { return status == 0; }
};

// Runs argv with `input` on stdin; argv[0] is a tool name resolved with find_tool (never through
// $PATH: the launcher runs as root, and whoever sets its PATH would choose what root runs).
ToolResult run_tool(const std::vector<std::string>& argv, std::string_view input = {});

// The trusted directories tools are taken from, in order.
inline constexpr const char* kToolDirs[] = {"/usr/sbin", "/usr/bin", "/sbin", "/bin"};
inline constexpr const char* kToolDirsText = "/usr/sbin:/usr/bin:/sbin:/bin";

// The absolute path of executable `name` in the first of `dirs` that has it, or nullopt. A name
// with a '/' is never looked up.
std::optional<std::string> find_tool(std::string_view name, const std::vector<std::string>& dirs);
// The same over kToolDirs.
std::optional<std::string> find_tool(std::string_view name);
// find_tool(name), or `name` unchanged when it is not there (exec then fails with ENOENT:
// check_privileges_and_tools reports missing tools first).
std::string tool_path(std::string_view name);

// What the current network namespace has, from `ip -j` and `nft -j` (not /sys/class/net,
// which shows the namespace /sys was mounted in): link names, inet table names, and the
// addresses on any interface. Empty when the tool fails.
std::set<std::string> current_links();
std::set<std::string> current_inet_tables();
std::vector<policy::IpAddress> current_addresses();

// How the command enters its sandbox (in the forked child, as root, before exec).
struct EnterPlan {
  std::string netns_path;   // setns(CLONE_NEWNET) into this
  bool owned_netns = true;  // the launcher's own namespace: /sys is remounted for it
  std::string resolv_conf;  // shown as /etc/resolv.conf ("" for none: the host's stays)
  bool private_run = true;  // an empty tmpfs on /run (--share-run: false)
  // Bind-mounted (read-only) over kSystemRootsFile where that exists ("" for none), so a
  // program that reads the system's roots itself (after `env -i`, `su -`, `sudo`, or one that
  // knows none of the CA variables) trusts what SSL_CERT_FILE names too.
  std::string ca_bundle;
};

// The system's CA bundle (Debian's ca-certificates), which the launcher's bundle starts from.
inline constexpr const char* kSystemRootsFile = "/etc/ssl/certs/ca-certificates.crt";

// Enters the network namespace, then a mount namespace of the command's own (every mount
// private, so nothing propagates back to the host): as `ip netns exec` does, sysfs of the
// sandbox's namespace on /sys (owned namespaces) and resolv_conf bind-mounted over
// /etc/resolv.conf, ca_bundle over kSystemRootsFile; with private_run an empty tmpfs on /run, which
// hides the host's Unix sockets there (nscd, systemd-resolved's varlink, D-Bus, /run/user/*). When
// /etc/resolv.conf is a symlink into /run (systemd-resolved, resolvconf), the file it names is
// written into the private /run with the text the command should see (resolv_conf, or the host's).
// Returns an error message, or "" on success. Only for a forked child that execs next.
std::string enter_sandbox(const EnterPlan& plan);

// The file execvp would run for `name` with this PATH value (unset: "/bin:/usr/bin"): `name`
// itself when it has a '/', else the first PATH entry with an executable regular file of that
// name. nullopt when there is none.
std::optional<std::string> find_command(std::string_view name,
                                        const std::optional<std::string>& path);

// Whether this process holds the capability in its effective set (CAP_NET_ADMIN = 12,
// CAP_SYS_ADMIN = 21).
bool has_capability(int cap);

// Writes `value` to each /proc/sys file in `paths` as seen from the network namespace at
// `netns_path` (setns there and back). Returns an error message, or "" on success.
std::string write_sysctls_in(const std::string& netns_path, const std::vector<std::string>& paths,
                             std::string_view value);

// Reads each /proc/sys file in `paths` as seen from the network namespace at `netns_path`
// into *values (trailing newline trimmed). Returns an error message, or "" on success.
std::string read_sysctls_in(const std::string& netns_path, const std::vector<std::string>& paths,
                            std::vector<std::string>* values);

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

// One pass of `sig` to every process in the namespace (as kill_processes_in_netns picks them)
// or in session `sid`, or to those of them `only` picks; sig 0 only counts them. Returns how
// many it signalled.
int signal_processes_in_netns(const std::string& netns_path, int sig,
                              const std::function<bool(pid_t)>& only = nullptr);
int signal_session(long sid, int sig, const std::function<bool(pid_t)>& only = nullptr);

}  // namespace sandgate::launcher

namespace sandgate::launcher {

// The signals that stop a launcher (SIGINT, SIGTERM, SIGHUP). run and up block them so a
// signal never interrupts a half-built sandbox; they are polled instead.
void block_stop_signals();
// A blocked stop signal waiting for this process (consumed), or 0.
int take_pending_stop_signal();

}  // namespace sandgate::launcher
