#include "launcher/system.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sandgate::launcher {
namespace json = boost::json;

ToolResult run_tool(const std::vector<std::string>& argv, std::string_view input) {
  int in_pipe[2];
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return {127, std::strerror(errno), {}};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return {127, std::strerror(errno), {}};  // the launcher exits soon; no fd bookkeeping
  }
  const std::string program = tool_path(argv[0]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(program.c_str(), args.data());
    const std::string message = std::string(argv[0]) + ": " + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ToolResult result;
  if (pid < 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return {127, std::strerror(errno), {}};
  }
  // Tool input is small (a ruleset, a batch of ip commands) and fits the pipe buffer, so
  // writing it all before reading cannot deadlock.
  const auto old = ::signal(SIGPIPE, SIG_IGN);
  for (std::size_t done = 0; done < input.size();) {
    const ssize_t n = ::write(in_pipe[1], input.data() + done, input.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(in_pipe[1]);
  ::signal(SIGPIPE, old);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  for (int open_fds = 2; open_fds > 0;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!result.err.empty() && (result.err.back() == '\n' || result.err.back() == ' ')) {
    result.err.pop_back();
  }
  return result;
}

std::optional<std::string> find_tool(std::string_view name, const std::vector<std::string>& dirs) {
  if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/" + std::string(name);
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) {
      return candidate;
    }
  }
  return std::nullopt;
}

std::optional<std::string> find_tool(std::string_view name) {
  return find_tool(name, std::vector<std::string>(std::begin(kToolDirs), std::end(kToolDirs)));
}

std::string tool_path(std::string_view name) {
  return find_tool(name).value_or(std::string(name));
}

bool has_capability(int cap) {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  const auto index = static_cast<unsigned>(cap) / 32;
  const auto bit = 1U << (static_cast<unsigned>(cap) % 32);
  return (data[index].effective & bit) != 0;
}

std::string write_sysctls_in(const std::string& netns_path, const std::vector<std::string>& paths,
                             std::string_view value) {
  const int self = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string error;
  if (self < 0 || target < 0) {
    error = "cannot open network namespace " + netns_path + ": " + std::strerror(errno);
  } else if (::setns(target, CLONE_NEWNET) != 0) {
    error = "cannot enter network namespace " + netns_path + ": " + std::strerror(errno);
  } else {
    for (const std::string& path : paths) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      const bool ok =
          fd >= 0 && ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
      if (!ok && error.empty()) error = "cannot write " + path + ": " + std::strerror(errno);
      if (fd >= 0) ::close(fd);
    }
    if (::setns(self, CLONE_NEWNET) != 0) std::abort();  // never run on in the wrong namespace
  }
  if (self >= 0) ::close(self);
  if (target >= 0) ::close(target);
  return error;
}

std::string read_sysctls_in(const std::string& netns_path, const std::vector<std::string>& paths,
                            std::vector<std::string>* values) {
  const int self = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string error;
  values->clear();
  if (self < 0 || target < 0) {
    error = "cannot open network namespace " + netns_path + ": " + std::strerror(errno);
  } else if (::setns(target, CLONE_NEWNET) != 0) {
    error = "cannot enter network namespace " + netns_path + ": " + std::strerror(errno);
  } else {
    for (const std::string& path : paths) {
      std::ifstream in(path);
      std::string value;
      if (!std::getline(in, value) && error.empty()) error = "cannot read " + path;
      values->push_back(value);
    }
    if (::setns(self, CLONE_NEWNET) != 0) std::abort();  // never run on in the wrong namespace
  }
  if (self >= 0) ::close(self);
  if (target >= 0) ::close(target);
  return error;
}

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

namespace {

constexpr int kKillRounds = 50;

// Every pid in /proc (numeric entries), this process excluded.
std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(name.c_str(), nullptr, 10);
    if (pid > 0 && pid != ::getpid()) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

// Kills what `select` picks until a round finds nothing. Returns the number of kills.
template <class Select>
int kill_until_none(Select select) {
  int killed = 0;
  for (int round = 0; round < kKillRounds; ++round) {
    int found = 0;
    for (const pid_t pid : all_pids()) {
      if (select(pid) && ::kill(pid, SIGKILL) == 0) ++found;
    }
    killed += found;
    if (found == 0) break;
  }
  return killed;
}

// Session id from /proc/PID/stat (field 6, after the parenthesised name), or -1.
long session_of(pid_t pid) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  const std::string_view stat(buf, static_cast<std::size_t>(n));
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string_view::npos) return -1;
  // ") S ppid pgrp session"
  std::string rest(stat.substr(close_paren + 1));
  long ppid = 0;
  long pgrp = 0;
  long session = -1;
  char state = 0;
  if (std::sscanf(rest.c_str(), " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) != 4) return -1;
  return session;
}

}  // namespace

namespace {

// Whether process `pid` is in the network namespace `target` (stat of its file).
bool in_netns(pid_t pid, const struct stat& target) {
  struct stat ns {};
  return ::stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &ns) == 0 &&
         ns.st_dev == target.st_dev && ns.st_ino == target.st_ino;
}

// `sig` to every process `select` picks and `only` (when given) lets through.
template <class Select>
int signal_once(Select select, int sig, const std::function<bool(pid_t)>& only) {
  int signalled = 0;
  for (const pid_t pid : all_pids()) {
    if (select(pid) && (!only || only(pid)) && ::kill(pid, sig) == 0) ++signalled;
  }
  return signalled;
}

}  // namespace

int kill_processes_in_netns(const std::string& netns_path) {
  struct stat target {};
  if (::stat(netns_path.c_str(), &target) != 0) return 0;
  return kill_until_none([&target](pid_t pid) { return in_netns(pid, target); });
}

int kill_session(long sid) {
  if (sid <= 1) return 0;
  return kill_until_none([sid](pid_t pid) { return session_of(pid) == sid; });
}

int signal_processes_in_netns(const std::string& netns_path, int sig,
                              const std::function<bool(pid_t)>& only) {
  struct stat target {};
  if (::stat(netns_path.c_str(), &target) != 0) return 0;
  return signal_once([&target](pid_t pid) { return in_netns(pid, target); }, sig, only);
}

int signal_session(long sid, int sig, const std::function<bool(pid_t)>& only) {
  if (sid <= 1) return 0;
  return signal_once([sid](pid_t pid) { return session_of(pid) == sid; }, sig, only);
}

}  // namespace sandgate::launcher

namespace sandgate::launcher {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signals();
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

int take_pending_stop_signal() {
  sigset_t pending;
  sigemptyset(&pending);
  if (::sigpending(&pending) != 0) return 0;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (sigismember(&pending, sig) == 1) {
      const sigset_t one = [sig] {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        return s;
      }();
      int got = 0;
      ::sigwait(&one, &got);
      return got;
    }
  }
  return 0;
}

namespace {
// What a tool printed as JSON (`ip -j`, `nft -j`); null when it failed or printed no JSON.
json::value tool_json(const std::vector<std::string>& argv) {
  const ToolResult listed = run_tool(argv);
  boost::system::error_code ec;
  json::value doc = json::parse(listed.out, ec);
  if (!listed.ok() || ec) return nullptr;
  return doc;
}
}  // namespace

std::set<std::string> current_links() {
  std::set<std::string> out;
  const json::value doc = tool_json({"ip", "-j", "link", "show"});
  if (!doc.is_array()) return out;
  for (const auto& link : doc.as_array()) {
    const auto* name = link.is_object() ? link.as_object().if_contains("ifname") : nullptr;
    if (name != nullptr && name->is_string()) out.emplace(name->as_string());
  }
  return out;
}

std::set<std::string> current_inet_tables() {
  std::set<std::string> out;
  const json::value doc = tool_json({"nft", "-j", "list", "tables", "inet"});
  if (!doc.is_object()) return out;
  const auto* items = doc.as_object().if_contains("nftables");
  if (items == nullptr || !items->is_array()) return out;
  for (const auto& item : items->as_array()) {
    const auto* table = item.is_object() ? item.as_object().if_contains("table") : nullptr;
    if (table == nullptr || !table->is_object()) continue;
    const auto* name = table->as_object().if_contains("name");
    if (name != nullptr && name->is_string()) out.emplace(name->as_string());
  }
  return out;
}

std::vector<policy::IpAddress> current_addresses() {
  std::vector<policy::IpAddress> out;
  const json::value doc = tool_json({"ip", "-j", "addr", "show"});
  if (!doc.is_array()) return out;
  for (const auto& link : doc.as_array()) {
    const auto* infos = link.is_object() ? link.as_object().if_contains("addr_info") : nullptr;
    if (infos == nullptr || !infos->is_array()) continue;
    for (const auto& info : infos->as_array()) {
      const auto* local = info.is_object() ? info.as_object().if_contains("local") : nullptr;
      if (local == nullptr || !local->is_string()) continue;
      if (auto a = policy::parse_ip_literal(std::string_view(local->as_string())))
        out.push_back(*a);
    }
  }
  return out;
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Writes `text` to `path` (mode 0644) in the private /run, creating its directories (0755).
std::string write_into_private_run(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return "creating " + path.parent_path().string() + ": " + ec.message();
  for (auto dir = path.parent_path(); dir != "/run" && dir != "/"; dir = dir.parent_path()) {
    ::chmod(dir.c_str(), 0755);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_text("writing " + path.string());
  ::fchmod(fd, 0644);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok ? "" : errno_text("writing " + path.string());
}

// Where `path` leads, following symlinks even when the last one dangles (a resolv.conf
// symlink into a /run that has no such file yet); weakly_canonical alone stops at a dangling
// link.
std::filesystem::path resolve_links(std::filesystem::path path) {
  constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
  for (int i = 0; i < kMaxLinks; ++i) {
    std::error_code ec;
    if (!std::filesystem::is_symlink(path, ec)) break;
    const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    if (ec) break;
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  std::error_code ec;
  const std::filesystem::path out = std::filesystem::weakly_canonical(path, ec);
  return ec ? path.lexically_normal() : out;
}

}  // namespace

std::string enter_sandbox(const EnterPlan& plan) {
  // Before /run changes: where /etc/resolv.conf leads, and what the command should read there.
  std::error_code ec;
  const std::filesystem::path resolv = resolve_links("/etc/resolv.conf");
  const bool resolv_in_run = resolv.string().starts_with("/run/");
  const std::string resolv_text =
      read_text(plan.resolv_conf.empty() ? "/etc/resolv.conf" : plan.resolv_conf);
  const std::filesystem::path shm = resolve_links("/dev/shm");
  const bool shm_in_run = shm.string().starts_with("/run/");
  // The default state_dir is /run/sandgate: the private /run would hide the bundle that
  // SSL_CERT_FILE names, so it is copied into it.
  const std::filesystem::path bundle =
      plan.ca_bundle.empty() ? std::filesystem::path() : resolve_links(plan.ca_bundle);
  const bool bundle_in_run = bundle.string().starts_with("/run/");
  const std::string bundle_text = bundle_in_run ? read_text(bundle) : std::string();

  const int fd = ::open(plan.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_text("opening " + plan.netns_path);
  const int entered = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (entered != 0) return errno_text("entering " + plan.netns_path);
  if (::unshare(CLONE_NEWNS) != 0) return errno_text("unshare(CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return errno_text("making mounts private");
  }
  if (!plan.ca_bundle.empty()) {
    // Read-only: a root command could otherwise rewrite the bundle every sandbox of this
    // state_dir shares. No system bundle (no ca-certificates): nothing to cover.
    if (::mount(plan.ca_bundle.c_str(), kSystemRootsFile, nullptr, MS_BIND, nullptr) == 0) {
      if (::mount(nullptr, kSystemRootsFile, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) !=
          0) {
        return errno_text(std::string("making ") + kSystemRootsFile + " read-only");
      }
    } else if (errno != ENOENT) {
      return errno_text("bind-mounting " + plan.ca_bundle + " on " + kSystemRootsFile);
    }
  }
  if (plan.owned_netns) {
    // As `ip netns exec`: /sys/class/net shows the sandbox's interfaces.
    unsigned long flags = 0;
    if (::umount2("/sys", MNT_DETACH) != 0) flags = MS_RDONLY;
    if (::mount("sysfs", "/sys", "sysfs", flags, nullptr) != 0) return errno_text("mounting /sys");
  }
  if (plan.private_run) {
    if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") != 0) {
      return errno_text("mounting a private /run");
    }
    // Fresh and empty, as on a booted host: /run/lock (/var/lock), and /dev/shm where it is
    // a symlink into /run.
    for (const std::string& dir : {std::string("/run/lock"), shm_in_run ? shm.string() : ""}) {
      if (dir.empty()) continue;
      std::filesystem::create_directories(dir, ec);
      ::chmod(dir.c_str(), 01777);
    }
  }
  if (plan.private_run && bundle_in_run) {
    const std::string error = write_into_private_run(bundle, bundle_text);
    if (!error.empty()) return error;
  }
  if (plan.private_run && resolv_in_run) {
    return write_into_private_run(resolv, resolv_text);
  }
  if (!plan.resolv_conf.empty()) {
    // Follows a symlink, as `ip netns exec` does. No /etc/resolv.conf at all: nothing to cover.
    if (::mount(plan.resolv_conf.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0 &&
        errno != ENOENT) {
      return errno_text("bind-mounting " + plan.resolv_conf + " on /etc/resolv.conf");
    }
  }
  return "";
}

std::optional<std::string> find_command(std::string_view name,
                                        const std::optional<std::string>& path) {
  if (name.empty()) return std::nullopt;
  auto runnable = [](const std::string& file) {
    struct stat st {};
    return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(file.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string_view::npos) {
    const std::string file(name);
    if (runnable(file)) return file;
    return std::nullopt;
  }
  const std::string dirs = path.value_or("/bin:/usr/bin");
  for (std::size_t at = 0; at <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = end == at ? "." : dirs.substr(at, end - at);  // empty entry: cwd
    const std::string file = dir + "/" + std::string(name);
    if (runnable(file)) return file;
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace sandgate::launcher
