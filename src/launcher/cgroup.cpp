#include "launcher/cgroup.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "launcher/sandbox.hpp"

namespace sandgate::launcher {
namespace {

constexpr const char* kV2Parent = "sandgate-launch";
constexpr auto kRemoveBound = std::chrono::seconds(5);

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// write(2) of `value` to a cgroup file; "" or the error.
std::string write_value(const std::string& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return "opening " + path + ": " + std::strerror(errno);
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int error = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return "writing \"" + value + "\" to " + path + ": " + std::strerror(error);
  }
  return "";
}

bool fs_type_is(const std::string& path, long magic) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && static_cast<long>(st.f_type) == magic;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<long> procs_of(const std::string& dir) {
  std::vector<long> pids;
  std::istringstream in(read_text(dir + "/cgroup.procs"));
  for (long pid = 0; in >> pid;) pids.push_back(pid);
  return pids;
}

std::string controllers_wanted(const CgroupLimits& limits) {
  std::string out;
  if (limits.memory_bytes) out += "+memory";
  if (limits.pids) out += std::string(out.empty() ? "" : " ") + "+pids";
  return out;
}

}  // namespace

std::optional<std::string> own_cgroup_path(std::string_view text, std::string_view controller) {
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view list = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (controller.empty()) {
      if (list.empty() && line.substr(0, first) == "0") return std::string(path);
      continue;
    }
    while (!list.empty()) {
      const std::size_t comma = std::min(list.find(','), list.size());
      if (list.substr(0, comma) == controller) return std::string(path);
      list.remove_prefix(std::min(comma + 1, list.size()));
    }
  }
  return std::nullopt;
}

std::uint64_t flat_keyed_value(std::string_view text, std::string_view key) {
  std::istringstream in{std::string(text)};
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return 0;
}

CgroupPlan plan_cgroup(std::string_view id, const CgroupLimits& limits, const std::string& root) {
  CgroupPlan plan;
  const std::string name = "sg-" + std::string(id);
  if (fs_type_is(root, CGROUP2_SUPER_MAGIC)) {
    plan.v2 = true;
    const std::string available = read_text(root + "/cgroup.controllers");
    for (const auto& [wanted, controller] : {std::pair{limits.memory_bytes.has_value(), "memory"},
                                             std::pair{limits.pids.has_value(), "pids"}}) {
      if (wanted && available.find(controller) == std::string::npos) {
        throw LaunchError(1, std::string("the cgroup v2 hierarchy at ") + root + " has no " +
                                 controller + " controller (" + root +
                                 "/cgroup.controllers); the host cannot enforce --" +
                                 (std::string_view(controller) == "memory" ? "memory" : "pids"));
      }
    }
    plan.parents_to_enable = {root, root + "/" + kV2Parent};
    plan.dirs = {root + "/" + kV2Parent + "/" + name};
    return plan;
  }
  const std::string self = read_text("/proc/self/cgroup");
  for (const auto& [wanted, controller, flag] :
       {std::tuple{limits.memory_bytes.has_value(), "memory", "--memory"},
        std::tuple{limits.pids.has_value(), "pids", "--pids"}}) {
    if (!wanted) continue;
    const std::string mount = root + "/" + controller;
    if (!fs_type_is(mount, CGROUP_SUPER_MAGIC)) {
      throw LaunchError(1, std::string("no cgroup hierarchy for ") + flag + ": " + root +
                               " is not cgroup2 and " + mount +
                               " is not a cgroup v1 mount; mount one, or run without " + flag);
    }
    const std::string own = own_cgroup_path(self, controller).value_or("/");
    plan.dirs.push_back(mount + (own == "/" ? "" : own) + "/" + name);
  }
  return plan;
}

void create_cgroup(const CgroupPlan& plan, const CgroupLimits& limits) {
  auto fail = [&](const std::string& why) {
    remove_cgroup(plan.dirs);
    throw LaunchError(1, "creating the sandbox's cgroup failed: " + why);
  };
  if (plan.v2) {
    const std::string wanted = controllers_wanted(limits);
    for (const std::string& parent : plan.parents_to_enable) {
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
        fail("mkdir " + parent + ": " + std::strerror(errno));
      }
      const std::string enabled = read_text(parent + "/cgroup.subtree_control");
      bool missing = false;
      for (const char* c : {"memory", "pids"}) {
        if (wanted.find(c) != std::string::npos && enabled.find(c) == std::string::npos) {
          missing = true;
        }
      }
      if (!missing) continue;
      const std::string error = write_value(parent + "/cgroup.subtree_control", wanted);
      if (!error.empty()) fail(error + " (a cgroup with processes of its own cannot delegate)");
    }
  }
  for (const std::string& dir : plan.dirs) {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno == EEXIST) {
        fail(dir + " exists (left by a crashed launcher?); run `sandgate-launch gc`");
      }
      fail("mkdir " + dir + ": " + std::strerror(errno));
    }
  }
  auto set = [&](const std::string& file, const std::string& value, bool optional) {
    for (const std::string& dir : plan.dirs) {
      const std::string path = dir + "/" + file;
      if (!exists(path)) {
        if (optional || plan.dirs.size() > 1) continue;  // v1: the other controller's dir
        fail(path + " does not exist");
      }
      const std::string error = write_value(path, value);
      if (!error.empty()) fail(error);
    }
  };
  if (limits.memory_bytes) {
    const std::string bytes = std::to_string(*limits.memory_bytes);
    if (plan.v2) {
      set("memory.max", bytes, false);
      set("memory.swap.max", "0", true);  // over the limit is an OOM kill, not swapping
    } else {
      set("memory.limit_in_bytes", bytes, false);
      set("memory.memsw.limit_in_bytes", bytes, true);  // only with swap accounting
    }
  }
  if (limits.pids) set("pids.max", std::to_string(*limits.pids), false);
}

std::string join_cgroup(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    const std::string error = write_value(dir + "/cgroup.procs", "0");
    if (!error.empty()) return "joining the sandbox's cgroup: " + error;
  }
  return "";
}

CgroupEvents read_cgroup_events(const std::vector<std::string>& dirs) {
  CgroupEvents events;
  for (const std::string& dir : dirs) {
    if (exists(dir + "/memory.events")) {
      events.oom_kills += flat_keyed_value(read_text(dir + "/memory.events"), "oom_kill");
    } else if (exists(dir + "/memory.oom_control")) {
      events.oom_kills += flat_keyed_value(read_text(dir + "/memory.oom_control"), "oom_kill");
    }
    if (exists(dir + "/pids.events")) {
      events.pids_max += flat_keyed_value(read_text(dir + "/pids.events"), "max");
    }
  }
  return events;
}

int signal_cgroup(const std::vector<std::string>& dirs, int sig,
                  const std::function<bool(pid_t)>& only) {
  int signalled = 0;
  for (const std::string& dir : dirs) {
    for (const long pid : procs_of(dir)) {
      if (pid <= 1 || pid == ::getpid() || (only && !only(static_cast<pid_t>(pid)))) continue;
      if (::kill(static_cast<pid_t>(pid), sig) == 0) ++signalled;
    }
  }
  return signalled;
}

bool cgroup_populated(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    if (!procs_of(dir).empty()) return true;
  }
  return false;
}

std::vector<std::string> remove_cgroup(const std::vector<std::string>& dirs) {
  std::vector<std::string> errors;
  for (const std::string& dir : dirs) {
    const auto deadline = std::chrono::steady_clock::now() + kRemoveBound;
    while (true) {
      if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) {
        errors.push_back("removing cgroup " + dir + ": " + std::strerror(errno));
        break;
      }
      signal_cgroup({dir}, SIGKILL);  // the killed leave it once they have exited
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return errors;
}

}  // namespace sandgate::launcher
