#pragma once

// Launcher state on disk: one JSON file per sandbox under <state_dir>/sandboxes, and the lock
// that serialises slot allocation and gc (<state_dir>/lock, flock).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// What the launcher created for one sandbox; enough to tear it down without the config.
struct SandboxState {
  std::string id;
  unsigned slot = 0;
  std::string host_ip;
  std::string sandbox_ip;
  std::string netns;  // a name under /run/netns when owned_netns, else the --netns path
  bool owned_netns = true;
  std::string host_if;
  std::string table;
  std::string dropin;       // absolute path of the drop-in file
  std::string mode;         // "run" or "up"
  long pid = 0;             // the launcher that created it (run: still waiting for CMD)
  bool ready = false;       // setup finished; false means a launcher is (or was) mid-setup
  std::string dns_address;  // written into /etc/netns/<netns>/resolv.conf when owned
  // --netns: what setup changed in the attached namespace, put back at teardown. The values of
  // net.ipv6.conf.{all,default}.disable_ipv6 before ("" = nothing to restore), and whether lo
  // was down.
  std::string ipv6_all_before;
  std::string ipv6_default_before;
  bool lo_down_before = false;
  // run --memory / --pids: the sandbox's cgroup directories (cgroup.hpp), recorded before they
  // are made; teardown kills what is in them and removes them.
  std::vector<std::string> cgroups;

  // The namespace as a path (for nsenter and setns).
  std::string netns_path() const;
};

std::string to_json(const SandboxState& state);
// nullopt when the text is not a complete state object.
std::optional<SandboxState> state_from_json(std::string_view text);

// The state directory. Creates it (0700) on first use.
class StateDir {
 public:
  explicit StateDir(std::string path);

  const std::string& path() const { return path_; }
  std::string file_of(std::string_view id) const;  // <path>/sandboxes/<id>.json

  // Every readable state file, sorted by id. Unreadable ones are skipped.
  std::vector<SandboxState> all() const;
  std::optional<SandboxState> find(std::string_view id) const;
  // Atomic (temp file + rename). Throws std::runtime_error on failure.
  void write(const SandboxState& state) const;
  void remove(std::string_view id) const;

  // Marks: what this state directory created on the host, by kind ("netns", "links",
  // "tables", "dropins"), as empty files <path>/<kind>/<name>. A mark is made before the thing
  // is created and removed after it is deleted, so gc removes only what this state directory
  // made (names are host-wide, state directories are not). Throws std::runtime_error.
  void mark(std::string_view kind, std::string_view name) const;
  void unmark(std::string_view kind, std::string_view name) const;
  std::vector<std::string> marks(std::string_view kind) const;  // sorted

 private:
  std::string path_;
};

// An exclusive flock on <state_dir>/lock, held for the object's lifetime.
class StateLock {
 public:
  explicit StateLock(const StateDir& dir);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

// An exclusive flock on kHostLockPath, shared by every launcher on the machine whatever its
// state directory: held while a sandbox takes its slot and creates its link, nft table and
// addresses, so two configs never pick the same names or addresses at the same moment.
inline constexpr const char* kHostLockPath = "/run/sandgate-launch.lock";
class HostLock {
 public:
  HostLock();
  ~HostLock();
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;

 private:
  int fd_ = -1;
};

// Writes `content` to `path` through a temp file in the same directory and rename(2), so a
// reader sees the old file or the new one. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, std::string_view content, unsigned mode);

}  // namespace sandgate::launcher
