#pragma once

// A cgroup per sandbox for `run --memory` and `--pids`: created (with its limits) by the
// launcher before the command starts, joined by the forked child before it execs the command,
// read for OOM kills after it ends, and removed at teardown (destroy_sandbox, from the dirs the
// state file records, so gc removes what a crashed launcher left).
//
// cgroup v2 (/sys/fs/cgroup is cgroup2): <root>/sandgate-launch/sg-<id>, with the memory and
// pids controllers enabled in the root's and sandgate-launch's cgroup.subtree_control (v2's
// "no internal processes" rule keeps it out of the launcher's own cgroup, which holds the
// launcher). cgroup v1 (a tmpfs with one mount per controller): sg-<id> under the launcher's
// own cgroup of the memory and pids hierarchies (/proc/self/cgroup), so whatever limits the
// launcher runs under hold for the sandbox too.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// What to limit; an absent value is not limited (and its controller not used).
struct CgroupLimits {
  std::optional<std::uint64_t> memory_bytes;
  std::optional<std::uint64_t> pids;
  bool any() const { return memory_bytes.has_value() || pids.has_value(); }
};

// Where a sandbox's cgroup goes: one directory (v2), or one per controller used (v1).
struct CgroupPlan {
  bool v2 = false;
  std::vector<std::string> parents_to_enable;  // v2: write "+memory +pids" to subtree_control
  std::vector<std::string> dirs;               // the sandbox's cgroup directories
};

// Plans the cgroup of sandbox `id` on the hierarchy mounted at `root`, reading the launcher's
// own cgroup from `self_cgroup` (/proc/self/cgroup's text). Throws LaunchError (exit 1) when
// the host has no usable hierarchy for a limit asked for.
CgroupPlan plan_cgroup(std::string_view id, const CgroupLimits& limits,
                       const std::string& root = "/sys/fs/cgroup");

// The path of `controller`'s cgroup in /proc/self/cgroup text ("4:memory:/a/b" -> "/a/b"; for
// "" the v2 line "0::/x"). nullopt when the controller is not listed.
std::optional<std::string> own_cgroup_path(std::string_view proc_self_cgroup,
                                           std::string_view controller);

// The value of `key` in a flat-keyed cgroup file ("oom_kill 3\n..." -> 3), 0 when absent.
std::uint64_t flat_keyed_value(std::string_view text, std::string_view key);

// Creates the plan's directories and writes the limits (v2: memory.max, memory.swap.max = 0,
// pids.max; v1: memory.limit_in_bytes, memory.memsw.limit_in_bytes where swap accounting is
// on, pids.max). Throws LaunchError (exit 1) after removing what it made.
void create_cgroup(const CgroupPlan& plan, const CgroupLimits& limits);

// In the forked child, before exec: moves the calling process into each directory ("0" into
// cgroup.procs). Returns an error message, or "" on success.
std::string join_cgroup(const std::vector<std::string>& dirs);

// What the kernel counted in the cgroup: OOM kills (memory.events in v2, memory.oom_control in
// v1) and forks refused at pids.max (pids.events "max").
struct CgroupEvents {
  std::uint64_t oom_kills = 0;
  std::uint64_t pids_max = 0;
};
CgroupEvents read_cgroup_events(const std::vector<std::string>& dirs);

// Sends `sig` to every process in the directories (one pass), or to those `only` picks.
// Returns how many it signalled.
int signal_cgroup(const std::vector<std::string>& dirs, int sig,
                  const std::function<bool(pid_t)>& only = nullptr);
// Whether any process is left in them.
bool cgroup_populated(const std::vector<std::string>& dirs);

// SIGKILLs what is left in each directory and removes it, waiting (bounded) for the killed to
// exit. Directories already gone are fine. Returns one message per directory it could not
// remove.
std::vector<std::string> remove_cgroup(const std::vector<std::string>& dirs);

}  // namespace sandgate::launcher
