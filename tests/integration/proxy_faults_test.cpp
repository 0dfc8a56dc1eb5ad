// Faults injected around a running daemon (issue 15 items 4-6): a full disk under the audit
// log (a small tmpfs in a mount namespace of the daemon's own), a log reader that stops
// reading (its stdout a pipe nobody reads), and running out of descriptors (prlimit on the
// daemon's process only). Nothing here touches the machine's own disks, mounts or limits.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/metrics_text.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kToken = "tok-faults-Qm4r";

std::string tables(std::uint16_t origin_port, const std::string& limits = {}) {
  return "[limits]\n" + limits + R"(

[dns.hosts]
"origin.test" = ["127.0.0.1"]

[profiles.local]
allow = ["origin.test:)" +
         std::to_string(origin_port) + R"("]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.sb1]
profile = "local"
token = ")" +
         kToken + "\"\n";
}

// One refused request to host NAME.denied.test (403, one audit line with that
// destination.address).
bool denied_request(const SandgateProcess& daemon, const std::string& name) {
  RawClient c(daemon.explicit_port());
  if (!c.send(proxy_get(name + ".denied.test", "/", "sb1", kToken))) return false;
  const auto r = c.read_response();
  return r && r->status == 403;
}

double metric(const SandgateProcess& daemon, std::string_view name,
              const std::map<std::string, std::string>& labels = {}) {
  return metric_value(daemon.metrics_text(), name, labels).value_or(-1);
}

// Whether the daemon's stderr has a JSON event line named `event`; the first one in *line.
bool has_event(const SandgateProcess& daemon, const std::string& event,
               boost::json::object* line = nullptr) {
  const std::string text = daemon.stderr_text();
  std::size_t pos = 0;
  for (std::size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const auto o = parse_object(text.substr(pos, nl - pos));
    if (o && json_string(*o, "event") == event) {
      if (line) *line = *o;
      return true;
    }
  }
  return false;
}

// Whether every TCP socket the process holds is a listening one: no client or admin
// connection is open any more, so its descriptor count is at rest.
bool only_listening_sockets(pid_t pid) {
  std::set<std::string> inodes;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.starts_with("socket:[")) inodes.insert(target.substr(8, target.size() - 9));
  }
  for (const char* table : {"tcp", "tcp6"}) {
    std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/net/" + table));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retrans, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >> inode;
      if (inodes.count(inode) != 0 && state != "0A") return false;  // 0A = LISTEN
    }
  }
  return true;
}

// The smallest RLIMIT_NOFILE under which the process can open exactly `free` more
// descriptors (a new descriptor takes the lowest free number, which must be below the limit).
std::size_t limit_leaving(pid_t pid, std::size_t free) {
  std::set<std::size_t> open;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    open.insert(std::stoul(e.path().filename().string()));
  }
  std::size_t limit = 0;
  for (std::size_t left = free;; ++limit) {
    if (open.count(limit) == 0) {
      if (left == 0) return limit;
      --left;
    }
  }
}

// UBSan's vptr check (the asan-ubsan preset) probes memory with pipe(2); out of descriptors
// that fails, and it reports (and aborts on) a bad vptr that is not there.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_IF_SANITIZED() \
  GTEST_SKIP() << "UBSan's vptr check needs free descriptors (pipe(2)); run without sanitizers"
#else
#define SKIP_IF_SANITIZED() \
  do {                      \
  } while (0)
#endif

bool set_nofile(pid_t pid, std::size_t limit) {
  const std::string n = std::to_string(limit);
  const auto r = run_command({"prlimit", "--pid", std::to_string(pid), "--nofile=" + n + ":" + n},
                             std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0;
}

// "Max open files  SOFT  HARD  files" from /proc/PID/limits.
std::pair<std::string, std::string> nofile_limits(pid_t pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/limits");
  const auto at = text.find("Max open files");
  if (at == std::string::npos) return {};
  std::istringstream in(text.substr(at + std::string_view("Max open files").size()));
  std::string soft, hard;
  in >> soft >> hard;
  return {soft, hard};
}

// Item 4. The audit log lives on a 64 KiB tmpfs, half taken by a filler file, mounted in the
// daemon's own mount namespace. Refused requests fill it up; then the filler goes and more
// follow (each to a host of its own). Every line in the file must be whole JSON, the lines after
// space returned must all be there, and lines in the file + lines counted as failed = lines the
// daemon wrote.
TEST(ProxyFaults, FullDiskNeverTearsALineAndCountsExactlyTheLinesLost) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for unshare --mount and mount -t tmpfs";
  HttpOrigin origin;
  const TempDir mount_point;
  const std::string disk = mount_point.path().string();
  SandgateOptions options{tables(origin.port())};
  options.audit_path = disk + "/audit.log";
  options.wrapper = {"unshare",
                     "--mount",
                     "--propagation",
                     "private",
                     "sh",
                     "-c",
                     R"(mount -t tmpfs -o size=64k sandgate-faults-test "$1" &&
                        head -c 32768 /dev/zero > "$1/filler" && shift && exec "$@")",
                     "sh",
                     disk};
  SandgateProcess daemon(options);
  const std::string seen_disk = "/proc/" + std::to_string(daemon.pid()) + "/root" + disk;

  int sent = 0;
  while (sent < 2000 && metric(daemon, "sandgate_audit_log_write_failures_total") < 1) {
    ASSERT_TRUE(denied_request(daemon, "full-" + std::to_string(sent))) << "403s stopped";
    ++sent;
  }
  ASSERT_GE(metric(daemon, "sandgate_audit_log_write_failures_total"), 1) << sent << " lines";
  for (int i = 0; i < 5; ++i, ++sent) {  // while the disk stays full
    ASSERT_TRUE(denied_request(daemon, "full-" + std::to_string(sent)));
  }
  boost::json::object failing;
  EXPECT_TRUE(eventually([&] { return has_event(daemon, "audit_write_failing", &failing); }))
      << daemon.stderr_text();
  EXPECT_EQ(json_string(failing, "error"), "No space left on device");

  ASSERT_EQ(::unlink((seen_disk + "/filler").c_str()), 0);  // space returns
  constexpr int kAfter = 10;
  for (int i = 0; i < kAfter; ++i, ++sent) {
    ASSERT_TRUE(denied_request(daemon, "after-" + std::to_string(i)));
  }
  EXPECT_TRUE(eventually([&] { return has_event(daemon, "audit_write_recovered"); }))
      << daemon.stderr_text();

  // Wait until every line is accounted for: in the file or counted as lost.
  const auto accounted = [&] {
    return daemon.audit_lines().size() +
           static_cast<std::size_t>(metric(daemon, "sandgate_audit_log_write_failures_total"));
  };
  EXPECT_TRUE(eventually([&] { return accounted() >= static_cast<std::size_t>(sent); }));
  const std::string text = daemon.audit_text();
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "a fragment at the end of the file";
  const auto lines = daemon.audit_lines();  // a line that is not JSON fails the test
  const auto lost =
      static_cast<std::size_t>(metric(daemon, "sandgate_audit_log_write_failures_total"));
  EXPECT_EQ(lines.size() + lost, static_cast<std::size_t>(sent))
      << lines.size() << " lines in the file, " << lost << " counted as lost";
  std::set<std::string> hosts;
  for (const auto& line : lines) {
    const auto host = json_string(line, "destination.address").value_or("");
    EXPECT_TRUE(hosts.insert(host).second) << "twice: " << host;
  }
  for (int i = 0; i < kAfter; ++i) {
    const std::string host = "after-" + std::to_string(i) + ".denied.test";
    EXPECT_EQ(hosts.count(host), 1U) << "missing " << host;
  }
}

// Item 5. audit = "stdout" into a pipe the test never reads: refusals keep coming, and
// SIGTERM still ends the process within its documented bound (5 s + 1 s + 1 s); the lines
// the pipe did not take are counted, exactly, and none is left half in the pipe.
TEST(ProxyFaults, StalledStdoutReaderDoesNotHoldShutdown) {
  HttpOrigin origin;
  SandgateOptions options{tables(origin.port())};
  options.stdout_pipe = true;
  SandgateProcess daemon(options);
  // ~600-byte lines: a few hundred fill the 64 KiB pipe.
  constexpr int kRequests = 400;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(denied_request(daemon, "stalled-" + std::to_string(i))) << "403s stopped";
  }
  EXPECT_TRUE(eventually([&] { return has_event(daemon, "audit_write_stalled"); }))
      << daemon.stderr_text();

  EXPECT_EQ(daemon.stop(std::chrono::seconds(20)), 0) << "SIGTERM did not end the process:\n"
                                                      << daemon.stderr_text();
  boost::json::object lost;
  ASSERT_TRUE(has_event(daemon, "audit_lines_lost", &lost)) << daemon.stderr_text();
  ASSERT_TRUE(has_event(daemon, "stopped"));

  // What reached the pipe, read now that the daemon is gone: whole lines, and they plus the
  // lines counted as lost are every line.
  std::string piped;
  char buf[65536];
  for (ssize_t n; (n = ::read(daemon.stdout_pipe(), buf, sizeof buf)) > 0;) {
    piped.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_TRUE(piped.empty() || piped.back() == '\n') << "a line left half in the pipe";
  std::size_t whole = 0;
  std::size_t pos = 0;
  for (std::size_t nl; (nl = piped.find('\n', pos)) != std::string::npos; pos = nl + 1, ++whole) {
    EXPECT_TRUE(parse_object(piped.substr(pos, nl - pos))) << piped.substr(pos, nl - pos);
  }
  const auto* n = lost.if_contains("lines");
  ASSERT_TRUE(n && n->is_number());
  EXPECT_GT(n->to_number<std::uint64_t>(), 0U);
  EXPECT_EQ(whole + n->to_number<std::uint64_t>(), static_cast<std::uint64_t>(kRequests));
}

// Item 6, start: a soft limit below the hard one is raised to it, and limits that cannot fit
// are said on stderr (limits that fit are not).
TEST(ProxyFaults, SoftDescriptorLimitIsRaisedAndLimitsThatCannotFitAreSaid) {
  HttpOrigin origin;
  SandgateOptions defaults{tables(origin.port())};  // max_connections = 20000
  defaults.wrapper = {"prlimit", "--nofile=512:4096", "--"};
  SandgateProcess big(defaults);
  EXPECT_EQ(nofile_limits(big.pid()), std::make_pair(std::string("4096"), std::string("4096")));
  boost::json::object warning;
  ASSERT_TRUE(has_event(big, "descriptor_limit_low", &warning)) << big.stderr_text();
  EXPECT_EQ(json_at(warning, "limit")->to_number<std::uint64_t>(), 4096U);
  EXPECT_GE(json_at(warning, "needed")->to_number<std::uint64_t>(), 40000U);

  SandgateOptions small{tables(origin.port(),
                               "max_connections = 1000\n"
                               "max_unauthenticated_connections = 100\n")};
  small.wrapper = defaults.wrapper;
  SandgateProcess fits(small);
  EXPECT_EQ(nofile_limits(fits.pid()).first, "4096");
  EXPECT_FALSE(has_event(fits, "descriptor_limit_low")) << fits.stderr_text();
}

// Item 6, accept: out of descriptors, connections wait in the backlog; the failures are
// counted and said, /healthz and /metrics keep answering, and the listener takes the
// waiting connections once descriptors are free again.
TEST(ProxyFaults, OutOfDescriptorsAcceptIsCountedSaidAndTheAdminListenerStillAnswers) {
  SKIP_IF_SANITIZED();
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{tables(origin.port(), "header_timeout_ms = 30000\n")});
  ASSERT_TRUE(daemon.wait_no_connections());
  ASSERT_TRUE(eventually([&] { return only_listening_sockets(daemon.pid()); }));
  ASSERT_TRUE(set_nofile(daemon.pid(), limit_leaving(daemon.pid(), 2)));
  std::vector<std::unique_ptr<RawClient>> waiting;
  for (int i = 0; i < 6; ++i)
    waiting.push_back(std::make_unique<RawClient>(daemon.explicit_port()));

  for (int scrape = 0; scrape < 3; ++scrape) {  // the reserve is taken back after each
    EXPECT_TRUE(eventually(
        [&] {
          return metric(daemon, "sandgate_accept_failures_total", {{"reason", "descriptors"}}) >= 1;
        },
        3000ms, 50ms))
        << "scrape " << scrape << ": /metrics did not answer or did not count the failures";
    RawClient health(daemon.admin_port());
    ASSERT_TRUE(health.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const auto r = health.read_response();
    ASSERT_TRUE(r) << "/healthz did not answer";
    EXPECT_EQ(r->status, 200);
  }
  boost::json::object said;
  ASSERT_TRUE(eventually([&] { return has_event(daemon, "accept_failed", &said); }))
      << daemon.stderr_text();
  EXPECT_EQ(json_string(said, "reason"), "descriptors");
  EXPECT_EQ(json_string(said, "error"), "Too many open files");

  waiting.clear();  // descriptors come back: the listener recovers by itself
  EXPECT_TRUE(eventually([&] { return denied_request(daemon, "recovered"); }, 3000ms, 50ms));
}

// Item 6, dial: an upstream socket that cannot be opened for lack of descriptors is a local
// overload (503, retryable, LOCAL_RESOURCES_EXHAUSTED), not the destination refusing.
TEST(ProxyFaults, UpstreamSocketWithoutADescriptorIsLocalResourcesExhausted) {
  SKIP_IF_SANITIZED();
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{tables(origin.port())});
  ASSERT_TRUE(daemon.wait_no_connections());
  ASSERT_TRUE(eventually([&] { return only_listening_sockets(daemon.pid()); }));
  // One descriptor left: the client's socket takes it, the upstream socket finds none.
  ASSERT_TRUE(set_nofile(daemon.pid(), limit_leaving(daemon.pid(), 1)));
  RawClient c(daemon.explicit_port());
  ASSERT_TRUE(
      c.send(proxy_get("origin.test:" + std::to_string(origin.port()), "/no-fd", "sb1", kToken)));
  const auto r = c.read_response();
  ASSERT_TRUE(r) << daemon.stderr_text();
  EXPECT_TRUE(IsSandgateError(*r, 503, "LOCAL_RESOURCES_EXHAUSTED", true)) << r->body;
  const auto line = daemon.wait_audit_code("LOCAL_RESOURCES_EXHAUSTED");
  ASSERT_TRUE(line) << daemon.audit_text();
  EXPECT_EQ(json_string(*line, "labels.sandbox_id"), "sb1");
  EXPECT_EQ(json_string(*line, "labels.termination"), "resources_exhausted");
  EXPECT_EQ(json_string(*line, "labels.termination_phase"), "connect");
  c.close();
  EXPECT_TRUE(eventually([&] {
    return metric(daemon, "sandgate_errors_total",
                  {{"code", "LOCAL_RESOURCES_EXHAUSTED"}, {"side", "internal"}}) == 1;
  }));
}

}  // namespace
}  // namespace sandgate::test
