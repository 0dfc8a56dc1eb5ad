// Running under systemd: the daemon's sd_notify protocol against a notify socket of the
// test's own (READY, RELOADING/READY around SIGHUP, WATCHDOG pings, STOPPING), the unit file
// through `systemd-analyze verify` and its offline security score, the logrotate snippet
// through a real logrotate run, and the drop-in directory swapped the way the kubelet updates
// a mounted ConfigMap or Secret.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kSourceDir = SANDGATE_DEFAULT_SOURCE_DIR;

const std::string kTables = R"(
[profiles.default]
allow = ["allowed.test"]

[sandboxes.agent]
profile = "default"
token = "tok-systemd-Qe4v"
)";

// One datagram of the notify protocol, as assignments.
struct Notification {
  std::vector<std::pair<std::string, std::string>> fields;
  std::chrono::steady_clock::time_point at;
  bool has(const std::string& key, const std::string& value) const {
    for (const auto& [k, v] : fields) {
      if (k == key && v == value) return true;
    }
    return false;
  }
  std::string get(const std::string& key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return v;
    }
    return {};
  }
};

// The service manager's end: a unix datagram socket whose path goes in NOTIFY_SOCKET.
class NotifyListener {
 public:
  explicit NotifyListener(const TempDir& dir) : path_(dir.file("notify.sock")) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long");
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("cannot bind " + path_);
    }
  }
  ~NotifyListener() { ::close(fd_); }
  const std::string& path() const { return path_; }

  // The next datagram within `timeout`; nullopt when none came.
  std::optional<Notification> next(std::chrono::milliseconds timeout = 3000ms) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    Notification out;
    out.at = std::chrono::steady_clock::now();
    std::string text(buf, static_cast<std::size_t>(n));
    std::size_t pos = 0;
    while (pos <= text.size()) {
      const auto nl = std::min(text.find('\n', pos), text.size());
      const std::string line = text.substr(pos, nl - pos);
      if (const auto eq = line.find('='); eq != std::string::npos) {
        out.fields.emplace_back(line.substr(0, eq), line.substr(eq + 1));
      }
      pos = nl + 1;
    }
    return out;
  }

  // Skips datagrams until one has key=value; nullopt at the timeout.
  std::optional<Notification> wait_for(const std::string& key, const std::string& value,
                                       std::chrono::milliseconds timeout = 3000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return std::nullopt;
      auto n = next(left);
      if (!n) return std::nullopt;
      if (n->has(key, value)) return n;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

int readyz_status(std::uint16_t admin_port) {
  RawClient c(admin_port);
  c.send("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const auto r = c.read_response(3000ms);
  return r ? r->status : 0;
}

TEST(SystemdNotify, ReadyThenReloadingAndReadyOnSighupWatchdogPingsAndStopping) {
  TempDir sock_dir;
  NotifyListener notify(sock_dir);
  SandgateOptions options;
  options.tables = kTables;
  options.workers = 2;
  // As systemd starts it: NOTIFY_SOCKET, and WATCHDOG_USEC for WatchdogSec=600ms.
  options.wrapper = {"env", "NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=600000"};
  SandgateProcess daemon(options);

  // READY=1 comes once the listeners are bound (the ready line is out; /readyz says ready).
  const auto ready = notify.wait_for("READY", "1");
  ASSERT_TRUE(ready) << daemon.stderr_text();
  EXPECT_EQ(ready->get("STATUS"), "serving 1 sandboxes with 2 workers");
  EXPECT_EQ(readyz_status(daemon.admin_port()), 200);

  // Pings at half the timeout (300 ms), through both workers' loops; never a gap as long as
  // the timeout, after which systemd would kill the daemon (100 ms of slack for a loaded
  // machine).
  std::vector<std::chrono::steady_clock::time_point> pings;
  const auto until = std::chrono::steady_clock::now() + 2000ms;
  while (std::chrono::steady_clock::now() < until) {
    const auto n = notify.next(500ms);
    if (n && n->has("WATCHDOG", "1")) pings.push_back(n->at);
  }
  ASSERT_GE(pings.size(), 4u) << "WATCHDOG=1 pings in 2 s with WATCHDOG_USEC=600000";
  EXPECT_LE(pings.size(), 9u);
  for (std::size_t i = 1; i < pings.size(); ++i) {
    EXPECT_LT(pings[i] - pings[i - 1], 700ms) << "a gap as long as the watchdog timeout";
  }

  // SIGHUP: RELOADING=1 with MONOTONIC_USEC (for systemd 253+), then READY=1.
  const std::uint64_t before = monotonic_usec();
  ASSERT_TRUE(daemon.reload(kTables + R"(
[sandboxes.second]
profile = "default"
token = "tok-systemd-second-Zr8m"
)"));
  const auto reloading = notify.wait_for("RELOADING", "1");
  ASSERT_TRUE(reloading);
  const std::string usec = reloading->get("MONOTONIC_USEC");
  ASSERT_FALSE(usec.empty());
  EXPECT_GE(std::stoull(usec), before);
  EXPECT_LE(std::stoull(usec), monotonic_usec());
  const auto reloaded = notify.wait_for("READY", "1");
  ASSERT_TRUE(reloaded);
  EXPECT_EQ(reloaded->get("STATUS"), "serving 2 sandboxes with 2 workers");

  // A config that does not load: still RELOADING=1 then READY=1 (the old config serves on),
  // and the status says so.
  std::string error;
  EXPECT_FALSE(daemon.reload("[sandboxes.broken]\nprofile = \"missing\"\n", &error));
  ASSERT_TRUE(notify.wait_for("RELOADING", "1"));
  const auto failed = notify.wait_for("READY", "1");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->get("STATUS"),
            "reload failed, still serving the previous config: serving 2 sandboxes with 2 "
            "workers");

  // The pings go on after reloads.
  EXPECT_TRUE(notify.wait_for("WATCHDOG", "1", 1000ms));

  // SIGTERM: STOPPING=1, and no ping after it.
  ::kill(daemon.pid(), SIGTERM);
  const auto stopping = notify.wait_for("STOPPING", "1");
  ASSERT_TRUE(stopping);
  EXPECT_TRUE(stopping->get("STATUS").starts_with("stopping: ")) << stopping->get("STATUS");
  while (const auto n = notify.next(600ms)) {
    EXPECT_FALSE(n->has("WATCHDOG", "1")) << "a watchdog ping after STOPPING=1";
  }
  EXPECT_EQ(daemon.stop(), 0);
}

// The thread id of the daemon's thread named `name` (/proc/PID/task/*/comm); -1 if none.
pid_t thread_named(pid_t pid, const std::string& name) {
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string comm = read_file(task.path() / "comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == name) return static_cast<pid_t>(std::stol(task.path().filename().string()));
  }
  return -1;
}

// One thread of the daemon held still (ptrace stops only the thread it is attached to), as a
// worker stuck in a blocking call would be; released on destruction. It is stopped only while
// it waits in epoll_wait, holding none of its loop's locks: a thread stopped at any other
// instruction may hold its scheduler's mutex or the allocator's, which the daemon's other
// threads then block on, and no heartbeat could run (no real stuck worker stops there).
class StoppedThread {
 public:
  explicit StoppedThread(pid_t tid) : tid_(tid) {
    if (::ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) {
      throw std::runtime_error("cannot ptrace thread " + std::to_string(tid_));
    }
    for (int attempt = 0; attempt < 500; ++attempt) {
      int status = 0;
      if (::ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0 ||
          ::waitpid(tid_, &status, __WALL) != tid_) {
        break;
      }
      // The system call it was in (x86-64 epoll_wait, epoll_pwait, epoll_pwait2), or -1.
      const std::string call = read_file("/proc/" + std::to_string(tid_) + "/syscall");
      const std::string nr = call.substr(0, call.find(' '));
      if (nr == "232" || nr == "281" || nr == "441") return;
      ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    release();
    throw std::runtime_error("thread " + std::to_string(tid_) + " never stopped in epoll_wait");
  }
  ~StoppedThread() { release(); }
  void release() {
    if (tid_ > 0) ::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
    tid_ = -1;
  }

 private:
  pid_t tid_;
};

TEST(SystemdNotify, AStuckWorkerStopsTheWatchdogPingsUntilItAnswersAgain) {
  TempDir sock_dir;
  NotifyListener notify(sock_dir);
  SandgateOptions options;
  options.tables = kTables;
  options.workers = 2;
  options.wrapper = {"env", "NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=600000"};
  SandgateProcess daemon(options);
  ASSERT_TRUE(notify.wait_for("READY", "1"));
  ASSERT_TRUE(notify.wait_for("WATCHDOG", "1", 1000ms));
  // The worker names itself when it starts, which may come after READY on a busy machine.
  pid_t worker = -1;
  ASSERT_TRUE(eventually([&] { return (worker = thread_named(daemon.pid(), "sg-worker-1")) > 0; }))
      << "no thread named sg-worker-1";

  StoppedThread stuck(worker);
  // A round already answered may still ping once; after that, none for as long as systemd
  // would wait (600 ms) and more, and the status names the worker. Watched for at least
  // 1.5 s, and on until the status came (at most 6 s: a daemon under a sanitizer on a busy
  // machine may take longer to notice), with the worker stopped all along.
  int pings = 0;
  bool status_seen = false;
  const auto start = std::chrono::steady_clock::now();
  const auto watched = [&] {
    const auto now = std::chrono::steady_clock::now();
    return now >= start + 6s || (now >= start + 1500ms && status_seen);
  };
  while (!watched()) {
    const auto n = notify.next(300ms);
    if (!n) continue;
    if (n->has("WATCHDOG", "1")) ++pings;
    if (n->get("STATUS") == "worker 1 does not answer") status_seen = true;
  }
  EXPECT_LE(pings, 1) << "the pings went on while worker 1 was stopped";
  EXPECT_TRUE(status_seen);
  EXPECT_TRUE(eventually([&] {
    return daemon.stderr_text().find(R"({"event":"worker_stalled","worker":1})") !=
           std::string::npos;
  }));

  stuck.release();
  const auto recovered = notify.wait_for("STATUS", "serving 1 sandboxes with 2 workers", 2000ms);
  EXPECT_TRUE(recovered);
  EXPECT_TRUE(notify.wait_for("WATCHDOG", "1", 1000ms)) << "no ping after the worker answered";
  EXPECT_NE(daemon.stderr_text().find(R"({"event":"workers_recovered"})"), std::string::npos);
}

TEST(SystemdNotify, NoWatchdogPingsWithoutWatchdogUsecOrForAnotherPid) {
  for (const std::vector<std::string>& env :
       {std::vector<std::string>{},
        std::vector<std::string>{"WATCHDOG_USEC=200000", "WATCHDOG_PID=1"}}) {
    TempDir sock_dir;
    NotifyListener notify(sock_dir);
    SandgateOptions options;
    options.tables = kTables;
    options.wrapper = {"env", "NOTIFY_SOCKET=" + notify.path()};
    options.wrapper.insert(options.wrapper.end(), env.begin(), env.end());
    SandgateProcess daemon(options);
    ASSERT_TRUE(notify.wait_for("READY", "1"));
    while (const auto n = notify.next(800ms)) {
      EXPECT_FALSE(n->has("WATCHDOG", "1")) << "pinged with env " << ::testing::PrintToString(env);
    }
  }
}

TEST(SystemdNotify, WithoutNotifySocketTheDaemonRunsAsBefore) {
  SandgateOptions options;
  options.tables = kTables;
  options.wrapper = {"env", "-u", "NOTIFY_SOCKET", "WATCHDOG_USEC=200000"};
  SandgateProcess daemon(options);
  EXPECT_EQ(readyz_status(daemon.admin_port()), 200);
  EXPECT_TRUE(daemon.reload(kTables));
  EXPECT_EQ(daemon.stop(), 0);
}

// The packaged unit with its binary paths pointed at this build's sandgate.
std::string unit_for_this_build(const TempDir& dir) {
  std::string unit = read_file(kSourceDir + "/deploy/systemd/sandgate.service");
  EXPECT_FALSE(unit.empty());
  unit = std::regex_replace(unit, std::regex("/usr/local/bin/sandgate"), sandgate_binary());
  return dir.write("sandgate.service", unit);
}

TEST(SystemdUnit, PassesSystemdAnalyzeVerify) {
  TempDir dir;
  const std::string unit = unit_for_this_build(dir);
  // --man=no: the Documentation= page need not be installed. Warnings (an unknown or
  // misspelt directive, a bad value) count as failures: systemd would ignore those lines.
  const auto r = run_command({"systemd-analyze", "verify", "--man=no", unit}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "systemd-analyze verify warned";
  EXPECT_EQ(r.out, "");

  // And the check can fail: a misspelt directive is reported.
  std::string broken = read_file(unit);
  broken = std::regex_replace(broken, std::regex("LockPersonality=yes"), "LockPersonalty=yes");
  fs::create_directories(dir.path() / "broken");
  const std::string broken_unit = dir.write("broken/sandgate.service", broken);
  const auto b = run_command({"systemd-analyze", "verify", "--man=no", broken_unit}, 60s);
  EXPECT_NE(b.err.find("LockPersonalty"), std::string::npos) << b.err;
}

TEST(SystemdUnit, IsNotifyTypeUnprivilegedAndHardened) {
  TempDir dir;
  const std::string unit = unit_for_this_build(dir);
  const std::string text = read_file(unit);
  for (const char* line :
       {"Type=notify", "User=sandgate", "WatchdogSec=30s", "ExecReload=/bin/kill -HUP $MAINPID",
        "CapabilityBoundingSet=\n", "AmbientCapabilities=\n", "NoNewPrivileges=yes",
        "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "MemoryDenyWriteExecute=yes",
        "LockPersonality=yes", "SystemCallFilter=@system-service",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK", "LimitNOFILE=1048576",
        "LimitCORE=0", "StateDirectory=sandgate", "LogsDirectory=sandgate",
        "RuntimeDirectory=sandgate/sandboxes.d"}) {
    EXPECT_NE(text.find(std::string("\n") + line), std::string::npos) << line;
  }
  // systemd's own exposure score, offline (no running systemd needed): at most 2.0 of 10
  // ("OK"; --threshold is in tenths).
  const auto r = run_command(
      {"systemd-analyze", "security", "--offline=true", "--threshold=20", "--no-pager", unit}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Overall exposure level for sandgate.service"), std::string::npos) << r.out;
}

// The system calls in a systemd-analyze syscall-filter group, its nested groups expanded.
std::set<std::string> syscall_group(const std::string& group) {
  std::set<std::string> out;
  const auto r = run_command({"systemd-analyze", "syscall-filter", "--no-pager", group}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  bool header = true;  // the first line names the group itself
  while (std::getline(lines, line)) {
    const auto start = line.find_first_not_of(' ');
    if (start == std::string::npos || line[start] == '#') continue;
    const std::string name = line.substr(start);
    if (std::exchange(header, false)) continue;
    if (name.starts_with("@")) {
      const auto nested = syscall_group(name);
      out.insert(nested.begin(), nested.end());
    } else {
      out.insert(name);
    }
  }
  return out;
}

// The unit's SystemCallFilter= (@system-service, minus @privileged) allows every system call
// the daemon makes: start, listeners of every kind, a forwarded request, a spliced tunnel, a
// refusal, a scrape, a drop-in reload, SIGHUP, SIGUSR1 and SIGTERM, all traced with strace.
// (A call outside it would fail with EPERM under systemd, SystemCallErrorNumber=.)
TEST(SystemdUnit, TheSyscallFilterAllowsEverySyscallTheDaemonMakes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer runtime's own system calls are not the daemon's; the dev "
                  "build runs this check";
#endif
  TempDir dir;
  const std::string trace = dir.file("trace");
  HttpOrigin origin;
  origin.set_handler(
      [](const RecordedRequest&) { return OriginReply::with_length(200, pattern_bytes(2 << 20)); });
  const std::string dropins = dir.file("sandboxes.d");
  fs::create_directories(dropins);
  SandgateOptions options;
  options.workers = 2;
  options.audit_to_file = true;
  options.sandboxes_dir = dropins;
  options.listeners = "transparent = [\"127.0.0.1:0\"]\ndns = [\"127.0.0.1:0\"]";
  // -D: strace runs as a detached grandchild, so the daemon keeps the pid the test signals.
  options.wrapper = {"strace", "-D", "-f", "-q", "-o", trace};
  options.tables = R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]

[profiles.default]
allow = ["origin.test"]
ports = [)" + std::to_string(origin.port()) +
                   R"(]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.agent]
profile = "default"
token = "tok-systemd-Qe4v"
)";
  {
    SandgateProcess daemon(options);
    const std::string proxy = daemon.proxy_url("agent", "tok-systemd-Qe4v");
    const std::string url = "http://origin.test:" + std::to_string(origin.port()) + "/";
    EXPECT_EQ(run_curl({"-x", proxy, url}).http_code, 200);        // forwarded
    EXPECT_EQ(run_curl({"-p", "-x", proxy, url}).http_code, 200);  // CONNECT, spliced
    EXPECT_EQ(run_curl({"-x", proxy, "http://refused.test/"}).http_code, 403);
    EXPECT_FALSE(daemon.metrics_text().empty());
    std::ofstream(dropins + "/extra.toml") << "id = \"extra\"\nsources = [\"10.9.9.9\"]\n";
    EXPECT_TRUE(
        eventually([&] { return daemon.stderr_text().find("reloaded") != std::string::npos; }));
    EXPECT_TRUE(daemon.reload(options.tables));
    ::kill(daemon.pid(), SIGUSR1);
    EXPECT_EQ(run_curl({"-x", proxy, "http://refused.test/"}).http_code, 403);
    EXPECT_EQ(daemon.stop(5000ms), 0);
  }
  // strace writes its last lines as the daemon exits.
  ASSERT_TRUE(eventually(
      [&] { return read_file(trace).find("+++ exited with 0 +++") != std::string::npos; }, 5000ms));

  std::set<std::string> used;
  const std::regex call(R"(^\d+\s+([a-z0-9_]+)\()");
  std::istringstream lines(read_file(trace));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, call)) used.insert(m[1]);
  }
  ASSERT_GT(used.size(), 30u) << "strace saw too little";
  for (const char* expected : {"splice", "inotify_add_watch", "accept", "sendmsg"}) {
    EXPECT_TRUE(used.contains(expected)) << expected << " not traced: the run missed a path";
  }
  // The unit's filter lines: an allow list, then "~" lines that take calls out of it.
  std::set<std::string> allowed, removed;
  std::istringstream unit(read_file(kSourceDir + "/deploy/systemd/sandgate.service"));
  for (std::string line; std::getline(unit, line);) {
    if (!line.starts_with("SystemCallFilter=")) continue;
    std::string value = line.substr(std::string_view("SystemCallFilter=").size());
    const bool deny = value.starts_with("~");
    std::istringstream names(deny ? value.substr(1) : value);
    for (std::string name; names >> name;) {
      auto calls = name.starts_with("@") ? syscall_group(name) : std::set<std::string>{name};
      (deny ? removed : allowed).merge(calls);
    }
  }
  ASSERT_TRUE(allowed.contains("splice") && removed.contains("setuid"));
  for (const std::string& name : used) {
    // execve is the exec of the daemon itself (systemd installs the filter before it).
    if (name == "execve") continue;
    EXPECT_TRUE(allowed.contains(name)) << name << " is outside the unit's SystemCallFilter=";
    EXPECT_FALSE(removed.contains(name)) << name << " is taken out by SystemCallFilter=~";
  }
}

// The packaged config, with its absolute paths moved into `dir`, passes --check-config.
TEST(SystemdUnit, PackagedConfigChecks) {
  TempDir dir;
  std::string cfg = read_file(kSourceDir + "/deploy/systemd/sandgate.toml");
  ASSERT_FALSE(cfg.empty());
  for (const char* prefix : {"/run/sandgate", "/var/lib/sandgate", "/var/log/sandgate"}) {
    cfg = std::regex_replace(cfg, std::regex(prefix), dir.path().string() + prefix);
  }
  fs::create_directories(dir.path() / "run/sandgate/sandboxes.d");
  const std::string path = dir.write("sandgate.toml", cfg);
  const auto r = run_command({sandgate_binary(), "--check-config", path});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// The logrotate snippet as logrotate runs it: `logrotate -d` accepts it, and a real rotation
// (its paths in a temp dir, its postrotate signalling this daemon) loses no audit line: the
// daemon writes on into the new file after SIGUSR1.
TEST(Logrotate, SnippetRotatesTheAuditLogAndTheDaemonReopensIt) {
  SandgateOptions options;
  options.tables = kTables;
  options.audit_to_file = true;
  SandgateProcess daemon(options);
  const std::string audit = daemon.dir().file("audit.log");

  auto deny = [&](int n) {
    for (int i = 0; i < n; ++i) {
      run_curl({"-x", daemon.proxy_url("agent", "tok-systemd-Qe4v"), "http://refused.test/"});
    }
  };
  auto lines_in = [](const std::string& path) {
    const std::string text = read_file(path);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  };
  deny(3);
  ASSERT_TRUE(eventually([&] { return lines_in(audit) >= 3; }));

  std::string snippet = read_file(kSourceDir + "/deploy/logrotate/sandgate");
  ASSERT_FALSE(snippet.empty());
  // The user need not exist here, and systemd does not run: the rest is as shipped.
  snippet = std::regex_replace(snippet, std::regex("/var/log/sandgate/audit.log"), audit);
  snippet = std::regex_replace(snippet, std::regex("su sandgate sandgate"), "su root root");
  snippet = std::regex_replace(snippet, std::regex("create 0640 sandgate sandgate"),
                               "create 0640 root root");
  snippet = std::regex_replace(snippet, std::regex("systemctl kill [^\n]*"),
                               "/bin/kill -USR1 " + std::to_string(daemon.pid()));
  ASSERT_NE(snippet.find("/bin/kill -USR1"), std::string::npos);
  const std::string conf = daemon.dir().write("logrotate.conf", snippet);
  const std::string state = daemon.dir().file("logrotate.state");

  const auto dry = run_command({"logrotate", "-d", "-s", state, conf});
  EXPECT_EQ(dry.exit_code, 0) << dry.out << dry.err;
  EXPECT_EQ(dry.err.find("error"), std::string::npos) << dry.err;

  const auto real = run_command({"logrotate", "-f", "-s", state, conf});
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
  EXPECT_EQ(lines_in(audit + ".1"), 3) << "delaycompress: the first rotation stays plain";
  deny(2);
  EXPECT_TRUE(eventually([&] { return lines_in(audit) == 2; }))
      << "the daemon did not reopen the audit log after the postrotate SIGUSR1";
  EXPECT_EQ(lines_in(audit + ".1"), 3);

  // The second rotation compresses the first: audit.log.2.gz.
  const auto again = run_command({"logrotate", "-f", "-s", state, conf});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(fs::exists(audit + ".2.gz"));
  deny(1);
  EXPECT_TRUE(eventually([&] { return lines_in(audit) == 1; }));
}

// How the kubelet updates a mounted ConfigMap or Secret: the files are links through the
// "..data" link into a timestamped directory, and an update writes a new directory and
// renames a new "..data" over the old one. The daemon watching that directory as its
// sandboxes_dir reloads on the swap, with no signal.
TEST(KubernetesVolume, AtomicSwapOfTheDropInDirectoryReloads) {
  TempDir volume;
  const fs::path root = volume.path();
  auto publish = [&](const std::string& version, const std::string& content) {
    const fs::path dir = root / ("..2026_12_02_" + version);
    fs::create_directories(dir);
    std::ofstream(dir / "agent.toml") << content;
    fs::create_directory_symlink(dir.filename(), root / "..data_tmp");
    fs::rename(root / "..data_tmp", root / "..data");  // the atomic swap
    std::error_code ec;
    if (!fs::is_symlink(root / "agent.toml", ec)) {
      fs::create_symlink("..data/agent.toml", root / "agent.toml");
    }
  };
  publish("v1", "id = \"agent\"\nprofile = \"default\"\ntoken = \"tok-one-Pw2e\"\n");

  SandgateOptions options;
  options.tables = "[profiles.default]\nallow = [\"allowed.test\"]\n";
  options.sandboxes_dir = root.string();
  SandgateProcess daemon(options);
  auto status_with = [&](const std::string& token) {
    return run_curl({"-x", daemon.proxy_url("agent", token), "http://refused.test/"}).http_code;
  };
  EXPECT_EQ(status_with("tok-one-Pw2e"), 403);  // authenticated, then refused by policy
  EXPECT_EQ(status_with("tok-two-Hk5s"), 407);

  publish("v2", "id = \"agent\"\nprofile = \"default\"\ntoken = \"tok-two-Hk5s\"\n");
  EXPECT_TRUE(eventually([&] { return status_with("tok-two-Hk5s") == 403; }, 5000ms, 50ms))
      << daemon.stderr_text();
  EXPECT_EQ(status_with("tok-one-Pw2e"), 407);
}

// Only the drop-ins that changed are read on a reload, but a drop-in refused by one reload
// keeps the following ones failing until it is fixed, as when every reload read every file.
TEST(DropInReload, ARefusedDropInKeepsLaterReloadsFailingUntilItIsFixed) {
  TempDir dir;
  std::ofstream(dir.path() / "agent.toml") << "id = \"agent\"\ntoken = \"tok-agent-1\"\n";
  SandgateOptions options;
  options.tables = "[profiles.default]\nallow = [\"allowed.test\"]\n";
  options.sandboxes_dir = dir.path().string();
  SandgateProcess daemon(options);
  auto status_of = [&](const std::string& id, const std::string& token) {
    return run_curl({"-x", daemon.proxy_url(id, token), "http://refused.test/"}).http_code;
  };
  auto count = [&](const std::string& what) {
    const std::string text = daemon.stderr_text();
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(status_of("agent", "tok-agent-1"), 403);

  std::ofstream(dir.path() / "bad.toml") << "id = \"bad\"\nprofile = \"nope\"\n";
  ASSERT_TRUE(eventually([&] { return count("reload_failed") == 1; }, 5000ms, 20ms))
      << daemon.stderr_text();
  std::ofstream(dir.path() / "second.toml") << "id = \"second\"\ntoken = \"tok-second-2\"\n";
  ASSERT_TRUE(eventually([&] { return count("reload_failed") == 2; }, 5000ms, 20ms))
      << daemon.stderr_text();
  EXPECT_EQ(status_of("second", "tok-second-2"), 407);

  fs::remove(dir.path() / "bad.toml");
  EXPECT_TRUE(eventually([&] { return status_of("second", "tok-second-2") == 403; }, 5000ms, 50ms))
      << daemon.stderr_text();
  EXPECT_EQ(status_of("agent", "tok-agent-1"), 403);
}

}  // namespace
}  // namespace sandgate::test
