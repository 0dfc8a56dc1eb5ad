// End to end: programs inside sandboxes made by the real sandgate-launch, with no proxy
// configuration, against the real daemon's transparent and DNS listeners, through real
// nftables rules, to a test "internet" (origin servers and dnsmasq on TEST-NET addresses in a
// network namespace of this test's own).
//
// The whole binary re-runs itself under `unshare --net` first (see main), so the daemon, the
// launcher's veths and nft tables, and the route to the test internet all live in a private
// namespace: nothing can reach the machine's real network, and two runs cannot clash.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_support.hpp"
#include "gtest/gtest.h"
#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/markdown.hpp"
#include "support/private_netns.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kInsideEnv = "SANDGATE_E2E_INSIDE";
constexpr const char* kOrigin = "203.0.113.10";   // origin.test, registry.test, inspected.test
constexpr const char* kBlocked = "203.0.113.20";  // blocked.test: no sandbox here may reach it
constexpr const char* kResolver = "203.0.113.53";
// Services the test binds on 0.0.0.0 in the daemon's (the host's) namespace.
constexpr std::uint16_t kHostService = 18080;
constexpr std::uint16_t kOtherHostService = 18081;

// A profile whose allow_cidrs covers the launcher's pool, so its sandboxes' own gateways;
// `extra` adds lines to it.
std::string hostnet_profile(const std::string& extra) {
  return "[profiles.hostnet]\nports = [" + std::to_string(kHostService) + ", " +
         std::to_string(kOtherHostService) + "]\nallow_cidrs = [\"10.0.0.0/8\"]\n" + extra;
}

// The test internet, the daemon and its config: set up once for the suite.
struct World {
  TempDir dir;
  std::string internet = "sgt" + std::to_string(::getpid()) + "i";
  std::string requests_log;
  std::string dns_log;
  std::unique_ptr<Background> servers;
  std::unique_ptr<Background> dnsmasq;
  std::unique_ptr<SandgateProcess> daemon;
  std::string tables;       // the config's tables but the hostnet profile, which comes last
  SandgateOptions options;  // the daemon's, for a restart

  World() {
    requests_log = dir.file("requests.log");
    dns_log = dir.file("dnsmasq.log");
    try {
      make_certificates();
      make_internet();
      start_daemon();
    } catch (...) {
      clean_up();  // a half-built world leaves nothing behind either
      throw;
    }
  }
  ~World() { clean_up(); }

  // Removes what sandboxes a killed launcher left (gc), then the test internet. Everything
  // else lives in this process's private namespace and goes with it.
  void clean_up() {
    if (daemon) {
      const std::string config = daemon->config_path();
      run_command({launch_binary(), "--config", config, "gc"}, 60s);
      // Sandboxes a failed test left up.
      std::istringstream listed(run_command({launch_binary(), "--config", config, "list"}).out);
      for (std::string line; std::getline(listed, line);) {
        const std::string sandbox = line.substr(0, line.find(' '));
        if (!sandbox.empty()) {
          run_command({launch_binary(), "--config", config, "down", "--sandbox", sandbox}, 60s);
        }
      }
      daemon.reset();
    }
    servers.reset();
    dnsmasq.reset();
    run_command({"ip", "netns", "del", internet});
  }

  // Stops the daemon and starts it again with the same config (listeners, token, drop-ins).
  void restart_daemon() {
    daemon.reset();
    daemon = std::make_unique<SandgateProcess>(options);
  }

  void make_certificates() {
    const std::string d = dir.path();
    // sandgate's interception CA, made by the real CLI; the origin's own CA is another one.
    must({sandgate_binary(), "ca", "init", d + "/sandgate-ca"});
    must({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
          "/CN=sandgate e2e test CA", "-keyout", d + "/ca.key", "-out", d + "/ca.pem"});
    must({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=origin.test", "-keyout",
          d + "/origin.key", "-out", d + "/origin.csr"});
    dir.write(
        "san.ext",
        "subjectAltName=DNS:origin.test,DNS:registry.test,DNS:blocked.test,DNS:inspected.test,"
        "IP:203.0.113.10,"
        "IP:203.0.113.20\n");
    must({"openssl", "x509", "-req", "-in", d + "/origin.csr", "-CA", d + "/ca.pem", "-CAkey",
          d + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", d + "/san.ext", "-out",
          d + "/origin.pem"});
  }

  void make_internet() {
    const std::string& n = internet;
    make_test_internet(n, {kOrigin, kBlocked, kResolver});
    // The rest of TEST-NET-3 goes there too (nothing answers on it).
    must({"ip", "route", "add", "203.0.113.0/24", "via", "192.0.2.2"});
    // slow.test's own server is on 198.51.100.1, where nothing answers: queries vanish.
    must({"ip", "-n", n, "route", "add", "198.51.100.0/24", "dev", "lo"});

    const std::string script = source_dir() + "/tests/integration/testdata/e2e/internet.py";
    const std::string o = kOrigin;
    const std::string b = kBlocked;
    servers = std::make_unique<Background>(
        std::vector<std::string>{"ip", "netns", "exec", n, "python3", script, requests_log,
                                 dir.file("origin.pem"), dir.file("origin.key"),
                                 "http:" + o + ":80", "https:" + o + ":443", "banner:" + o + ":22",
                                 "banner:" + o + ":2222", "udp:" + o + ":9999", "http:" + b + ":80",
                                 "https:" + b + ":443", "banner:" + b + ":22"},
        dir.file("servers.out"));
    dnsmasq = std::make_unique<Background>(
        std::vector<std::string>{"ip", "netns", "exec", n, "dnsmasq", "--keep-in-foreground",
                                 "--no-resolv", "--no-hosts", "--bind-interfaces",
                                 "--listen-address=" + std::string(kResolver), "--log-queries",
                                 "--log-facility=" + dns_log, "--user=root",
                                 "--pid-file=" + dir.file("dnsmasq.pid"),
                                 "--address=/origin.test/" + o, "--address=/registry.test/" + o,
                                 "--address=/inspected.test/" + o, "--address=/blocked.test/" + b,
                                 // slow.test's lookups must stay pending, not be failed by
                                 // dnsmasq's own limit on forwarded queries (150 by default).
                                 "--server=/slow.test/198.51.100.1", "--dns-forward-max=100000"},
        dir.file("dnsmasq.out"));
    // Both answer before the daemon needs them.
    CommandResult dig;
    for (int i = 0; i < 100; ++i) {
      const bool http = read_all(dir.file("servers.out")).find("ready") != std::string::npos;
      dig = run_command(
          {"dig", std::string("@") + kResolver, "origin.test", "+short", "+tries=1", "+time=1"},
          5s);
      if (http && dig.out.find(kOrigin) != std::string::npos) return;
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error(
        "the test internet did not come up: " + read_all(dir.file("servers.out")) +
        read_all(dir.file("dnsmasq.out")) + "; dig: " + dig.out + dig.err);
  }

  void start_daemon() {
    fs::create_directories(dir.file("sandboxes.d"));
    SandgateOptions o;
    o.workers = 2;
    o.audit_to_file = true;
    o.sandboxes_dir = dir.file("sandboxes.d");
    o.admin_listen = "127.0.0.1:9090";
    dir.write("admin.token", "e2e-admin-token-Hq4m\n");
    ::chmod(dir.file("admin.token").c_str(), 0600);
    o.listeners =
        "transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]\n"
        "admin_token_file = \"" +
        dir.file("admin.token") + "\"";
    tables =
        "[limits]\npeek_timeout_ms = 300\n\n"
        "[dns]\nservers = [\"" +
        std::string(kResolver) +
        "\"]\n\n"
        // The launcher adds interception.ca_cert to the sandboxes' bundle by itself:
        // launcher.ca_file below is only the origin's CA (for the spliced HTTPS tests).
        "[interception]\nca_cert = \"" +
        dir.file("sandgate-ca/ca.pem") + "\"\nca_key = \"" + dir.file("sandgate-ca/ca.key") +
        "\"\nupstream_ca_file = \"" + dir.file("ca.pem") +
        "\"\n\n"
        "[launcher]\nstate_dir = \"" +
        dir.file("state") + "\"\npool = \"10.201.0.0/24\"\nca_file = \"" + dir.file("ca.pem") +
        "\"\n\n"
        "[profiles.web]\n"
        "allow = [\"origin.test\", \"registry.test\", \"origin.test:22\", \"*.slow.test\"]\n"
        // TEST-NET is a special range: resolved addresses there need opening.
        "allow_cidrs = [\"203.0.113.10/32\"]\n\n"
        "[profiles.opaque]\n"
        "allow = [\"origin.test\"]\n"
        "allow_cidrs = [\"203.0.113.10/32\"]\n"
        "opaque = [\"origin.test:80\"]\n\n"
        "[profiles.inspect]\n"
        "allow = [\"inspected.test\", \"origin.test\"]\n"
        "inspect = [\"inspected.test\"]\n"
        "allow_cidrs = [\"203.0.113.10/32\"]\n\n"
        "[[profiles.inspect.http_rules]]\n"
        "hosts = [\"inspected.test\"]\n"
        "paths = [\"/admin/**\"]\n"
        "action = \"deny\"\n\n"
        // A host with rules refuses what none of them matches: everything else is allowed.
        "[[profiles.inspect.http_rules]]\n"
        "hosts = [\"inspected.test\"]\n"
        "action = \"allow\"\n\n"
        // Names no rule allows or denies wait for an operator's answer.
        "[profiles.asks]\n"
        "unlisted = \"hold\"\n"
        "allow = [\"registry.test\"]\n"
        "allow_cidrs = [\"203.0.113.10/32\"]\n\n"
        "[profiles.other]\n"
        "allow = [\"blocked.test\"]\n"
        "allow_cidrs = [\"203.0.113.20/32\"]\n\n";
    o.tables = tables + hostnet_profile("");
    options = o;
    daemon = std::make_unique<SandgateProcess>(o);
  }
};

World* world = nullptr;

class SandboxE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::getenv(kInsideEnv) == nullptr) return;
    world = new World();
  }
  static void TearDownTestSuite() {
    delete world;
    world = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(world, nullptr) << "run through main(): the suite needs its private namespace";
    audit_from_ = world->daemon->audit_lines().size();
    requests_from_ = read_all(world->requests_log).size();
    dns_from_ = read_all(world->dns_log).size();
  }

  static std::string id(const std::string& name) {
    return "e2e-" + std::to_string(::getpid()) + "-" + name;
  }

  static CommandResult launch(const std::vector<std::string>& args,
                              std::chrono::milliseconds timeout = 60s) {
    std::vector<std::string> argv{launch_binary(), "--config", world->daemon->config_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, timeout);
  }

  // `sandgate-launch run` with a shell script as CMD.
  static CommandResult run_in(const std::string& sandbox, const std::string& profile,
                              const std::string& script) {
    return launch(
        {"run", "--sandbox", id(sandbox), "--profile", profile, "--", "sh", "-c", script});
  }

  // What the test internet saw since this test began.
  std::string requests() const { return read_all(world->requests_log).substr(requests_from_); }
  std::string dns_queries() const { return read_all(world->dns_log).substr(dns_from_); }

  std::vector<boost::json::object> audit_since() const {
    auto lines = world->daemon->audit_lines();
    return {lines.begin() + static_cast<std::ptrdiff_t>(audit_from_), lines.end()};
  }
  // Audit lines since the test began with this event code (and reason, if given).
  std::vector<boost::json::object> audit(const std::string& code,
                                         const std::string& reason = {}) const {
    std::vector<boost::json::object> out;
    for (auto& line : audit_since()) {
      const auto& event = line.at("event").as_object();
      if (event.at("code").as_string() != code) continue;
      if (!reason.empty() &&
          (!event.contains("reason") || event.at("reason").as_string() != reason)) {
        continue;
      }
      out.push_back(line);
    }
    return out;
  }
  // The test internet's line for each request over TLS since the test began (internet.py:
  // the SNI the origin saw and the TLS version it negotiated).
  std::vector<std::string> tls_lines() const {
    std::vector<std::string> out;
    std::istringstream text(requests());
    for (std::string line; std::getline(text, line);) {
      if (line.rfind("TLS ", 0) == 0) out.push_back(line);
    }
    return out;
  }
  // The CA of the test internet's origins (not sandgate's).
  static std::string origin_ca() { return world->dir.file("ca.pem"); }
  static std::string domain_of(const boost::json::object& line) {
    const auto& d = line.at("destination").as_object();
    return d.contains("domain") ? std::string(d.at("domain").as_string()) : std::string();
  }

  std::size_t audit_from_ = 0;
  std::size_t requests_from_ = 0;
  std::size_t dns_from_ = 0;
};

TEST_F(SandboxE2e, AllowedHostWorksOverHttpAndHttpsWithNoProxyVariables) {
  const auto r =
      run_in("web", "web",
             "env | grep -i _proxy; "
             "curl -sS -m 10 http://origin.test/ && curl -sS -m 10 https://origin.test/");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from origin.test over http\nhello from origin.test over https\n");
  EXPECT_NE(requests().find("REQUEST 203.0.113.10:80 host=origin.test path=/"), std::string::npos);
  EXPECT_NE(requests().find("REQUEST 203.0.113.10:443 host=origin.test path=/"), std::string::npos);
  const auto closed = audit("http_request");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].at("labels").as_object().at("original_destination").as_string(),
            "203.0.113.10:80");
  EXPECT_EQ(audit("connection_closed").size(), 1u);  // the TLS tunnel
}

// Issue 37: a refused name resolves to the DNS sink, so each tool's own connection is refused
// in its own protocol and the agent reads why instead of "could not resolve host": curl
// prints the 403's body over HTTP and over HTTPS (the sandbox trusts sandgate's CA), git its
// ERR line, pip (-vv) and npm the 403 with its reason phrase; other TCP is reset. Nothing reaches
// the name's resolver or address, and the DNS listener's lines are the only ones.
// Held destinations from a launched sandbox (issue 39): curl's lookup of a name no rule names
// waits on the sandbox DNS until an operator answers with `sandgate holds`; allowed once, the
// lookup and the connection that follows it go through (the connection is not held again);
// denied, the lookup is refused. Control: a name the profile allows is never held.
TEST_F(SandboxE2e, AHeldNameWaitsForTheOperatorsAnswerAtTheSandboxDns) {
  const std::string config = world->daemon->config_path();
  // The holds of this sandbox listed now, as `sandgate holds --json` prints them.
  const auto pending = [&] {
    const auto r = run_command({sandgate_binary(), "holds", "--config", config, "--json"});
    std::vector<boost::json::object> out;
    if (r.exit_code != 0) return out;
    const boost::json::value listed = boost::json::parse(r.out);
    for (const auto& h : listed.at("holds").as_array()) {
      if (h.at("sandbox").as_string() == id("asks")) out.push_back(h.as_object());
    }
    return out;
  };
  // Answers the first hold of the sandbox once one is listed.
  const auto answer = [&](const std::vector<std::string>& how) {
    std::vector<boost::json::object> now;
    for (int i = 0; i < 100 && now.empty(); ++i) {
      now = pending();
      if (now.empty()) std::this_thread::sleep_for(50ms);
    }
    if (now.empty()) return std::string("no hold was listed");
    std::vector<std::string> argv{sandgate_binary(), "holds", "--config", config};
    argv.insert(argv.end(), how.begin(), how.end());
    argv.insert(argv.begin() + 5, std::to_string(now[0].at("id").as_int64()));
    const auto r = run_command(argv);
    return r.exit_code == 0 ? std::string(now[0].at("host").as_string()) : r.err;
  };
  auto sandbox = std::async(std::launch::async, [] {
    return run_in("asks", "asks",
                  "curl -sS -m 5 -o /dev/null -w 'allowed=%{http_code}\\n' http://registry.test/; "
                  "curl -sS -m 20 -o /dev/null -w 'held=%{http_code}\\n' http://origin.test/; "
                  "curl -sS -m 20 http://blocked.test/ 2>&1; echo denied=$?");
  });
  std::vector<std::string> allow{"allow"};
  EXPECT_EQ(answer(allow), "origin.test");
  std::vector<std::string> deny{"deny", "--message", "not from this sandbox"};
  EXPECT_EQ(answer(deny), "blocked.test");
  const auto r = sandbox.get();
  EXPECT_NE(r.out.find("allowed=200\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("held=200\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("Could not resolve host: blocked.test"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("denied=6\n"), std::string::npos) << r.out;
  EXPECT_EQ(audit("hold_answered").size(), 2u);
  // Held at the DNS only (each question that waited has its line: A and AAAA, a retry): the
  // connection after the lookup went through on the name's grant.
  const auto held = audit("destination_held");
  ASSERT_GE(held.size(), 2u);
  std::set<std::string> names;
  for (const auto& line : held) {
    EXPECT_EQ(line.at("network").as_object().at("protocol").as_string(), "dns")
        << boost::json::serialize(line);
    names.insert(domain_of(line));
  }
  EXPECT_EQ(names, (std::set<std::string>{"blocked.test", "origin.test"}));
  EXPECT_GE(audit("SANDBOX_NETWORK_DENIED", "denied_by_operator").size(), 1u);
  EXPECT_EQ(dns_queries().find("blocked.test"), std::string::npos) << dns_queries();
}

// run --approve-with (issue 39): the launcher answers its sandbox's holds with a command's exit
// status. The command runs outside the sandbox (the launcher's network namespace) with the hold
// in its environment: it allows origin.test (exit 0; held at the sandbox DNS) and denies
// blocked.test with a message (exit 1; an HTTP request held at the transparent listener), which
// curl shows in the refusal. Refused up front when the admin token cannot be read.
TEST_F(SandboxE2e, ApproveWithAnswersHeldDestinationsWithTheCommandsExitStatus) {
  const std::string token = world->dir.file("admin.token");
  const std::string calls = world->dir.file("approve-calls.log");
  const std::string approve =
      "echo \"$SANDGATE_HOLD_ID|$SANDGATE_SANDBOX|$SANDGATE_HOST|$SANDGATE_PORT|$SANDGATE_MODE|"
      "$SANDGATE_METHOD|$(readlink /proc/$$/ns/net)\" >> " +
      calls +
      "; case \"$SANDGATE_HOST\" in origin.test) exit 0;; *) echo 'not that one'; echo more; "
      "exit 1;; esac";
  const std::string script =
      "curl -sS -m 20 -o /dev/null -w 'allowed=%{http_code}\\n' http://origin.test/; "
      "curl -sS -m 20 --resolve blocked.test:80:203.0.113.10 http://blocked.test/x; "
      "echo; echo denied=$?";
  // Refused before anything is set up: the token file is too open to be read.
  ::chmod(token.c_str(), 0644);
  const auto refused = launch({"run", "--sandbox", id("approve"), "--profile", "asks",
                               "--approve-with", "exit 0", "--", "true"});
  ::chmod(token.c_str(), 0600);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--approve-with: "), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("admin token file"), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;

  const auto r = launch({"run", "--sandbox", id("approve"), "--profile", "asks", "--approve-with",
                         approve, "--", "sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("allowed=200\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("SANDBOX_NETWORK_DENIED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not that one"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("more"), std::string::npos) << r.out;  // the first line only
  EXPECT_NE(r.out.find("denied=0\n"), std::string::npos) << r.out;
  // One call per hold, each with its hold in the environment, in the launcher's namespace.
  const std::string netns = fs::read_symlink("/proc/self/ns/net").string();
  const std::string log = read_all(calls);
  EXPECT_NE(log.find("|" + id("approve") + "|origin.test|0|dns||" + netns + "\n"),
            std::string::npos)
      << log << " (netns " << netns << ")";
  EXPECT_NE(log.find("|" + id("approve") + "|blocked.test|80|"), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;
  const auto answered = audit("hold_answered");
  ASSERT_EQ(answered.size(), 2u);
  std::set<std::string> actions;
  for (const auto& line : answered)
    actions.insert(std::string(line.at("event").as_object().at("reason").as_string()));
  EXPECT_EQ(actions, (std::set<std::string>{"allow_once", "deny"}));
  const auto denied = audit("SANDBOX_NETWORK_DENIED", "denied_by_operator");
  ASSERT_GE(denied.size(), 1u);
  EXPECT_EQ(denied[0].at("labels").as_object().at("operator_message").as_string(), "not that one");
}

// A command still running at the hold's deadline (limits.hold_timeout_ms, 10 s here) is
// killed with its process group, and the hold ends as expired.
TEST_F(SandboxE2e, ApproveWithKillsACommandStillRunningAtTheHoldsDeadline) {
  const std::string calls = world->dir.file("approve-slow.log");
  const std::string approve =
      "echo started >> " + calls + "; S=61.25; sleep $S; echo late >> " + calls;
  const auto started = std::chrono::steady_clock::now();
  const auto r = launch({"run", "--sandbox", id("approve-slow"), "--profile", "asks",
                         "--approve-with", approve, "--", "sh", "-c",
                         "curl -sS -m 30 --resolve blocked.test:80:203.0.113.10 "
                         "http://blocked.test/slow; sleep 1; echo; "
                         // Killed at the deadline, not when the launcher ends (the
                         // launcher's own arguments say "sleep $S").
                         "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'sleep 61[.]25' | "
                         "sed 's/^/left=/'"});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"reason\":\"hold_expired\""), std::string::npos) << r.out;
  EXPECT_LT(took, 25s);
  EXPECT_NE(r.out.find("left=0\n"), std::string::npos) << r.out;
  EXPECT_EQ(read_all(calls), "started\n");
  EXPECT_TRUE(audit("hold_answered").empty());
  // Nothing of the command is left running.
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string cmdline = read_all(entry.path().string() + "/cmdline");
    EXPECT_EQ(cmdline.find("61.25"), std::string::npos) << entry.path();
  }
}

// An operator who answers first wins: the command still deciding is killed, and the launcher
// answers nothing (one hold_answered line, the operator's).
TEST_F(SandboxE2e, ApproveWithStopsTheCommandWhenAnOperatorAnswersFirst) {
  const std::string calls = world->dir.file("approve-first.log");
  const std::string approve = "echo started >> " + calls + "; S=62.5; sleep $S; exit 0";
  auto run = std::async(std::launch::async, [&] {
    return launch({"run", "--sandbox", id("approve-first"), "--profile", "asks", "--approve-with",
                   approve, "--", "sh", "-c",
                   "curl -sS -m 30 --resolve blocked.test:80:203.0.113.10 "
                   "http://blocked.test/first; sleep 1; echo; "
                   "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'sleep 62[.]5' | "
                   "sed 's/^/left=/'"});
  });
  ASSERT_TRUE(eventually([&] { return read_all(calls) == "started\n"; }, 20s, 50ms));
  const std::string config = world->daemon->config_path();
  const auto listed = run_command({sandgate_binary(), "holds", "--config", config, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const boost::json::value holds = boost::json::parse(listed.out);
  std::string hold;
  for (const auto& h : holds.at("holds").as_array()) {
    if (h.at("sandbox").as_string() == id("approve-first")) {
      hold = std::to_string(h.at("id").as_int64());
    }
  }
  ASSERT_FALSE(hold.empty()) << listed.out;
  const auto denied = run_command({sandgate_binary(), "holds", "--config", config, "deny", hold,
                                   "--message", "operator first"});
  EXPECT_EQ(denied.exit_code, 0) << denied.err;
  const auto r = run.get();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("operator first"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("left=0\n"), std::string::npos) << r.out;
  EXPECT_EQ(audit("hold_answered").size(), 1u);
}

// The launcher follows the daemon across a restart: the stream breaks (said once on stderr),
// it connects again, and a name held by the new daemon is answered.
TEST_F(SandboxE2e, ApproveWithFollowsTheDaemonAcrossARestart) {
  const std::string calls = world->dir.file("approve-restart.log");
  const std::string approve = "echo \"$SANDGATE_HOST\" >> " + calls + "; exit 0";
  auto run = std::async(std::launch::async, [&] {
    return launch({"run", "--sandbox", id("approve-restart"), "--profile", "asks", "--approve-with",
                   approve, "--", "sh", "-c",
                   "sleep 6; curl -sS -m 20 -o /dev/null -w 'after=%{http_code}\\n' "
                   "http://origin.test/"});
  });
  // Restarted once the daemon runs the sandbox (its drop-in stays for the new one).
  ASSERT_TRUE(eventually(
      [&] {
        return run_command(
                   {"curl", "-sf", "http://127.0.0.1:9090/sandboxes/" + id("approve-restart")})
                   .exit_code == 0;
      },
      20s, 100ms));
  std::this_thread::sleep_for(500ms);  // the approver starts with the command, right after
  world->restart_daemon();
  const auto r = run.get();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("after=200\n"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(read_all(calls), "origin.test\n");
  const std::string said = "--approve-with: the daemon's hold stream";
  const std::size_t first = r.err.find(said);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said, first + 1), std::string::npos) << "said more than once: " << r.err;
}

TEST_F(SandboxE2e, DeniedNameReachesTheToolAsItsOwnRefusalAndIsLoggedOnce) {
  const std::string work = world->dir.file("refused-work");
  fs::create_directories(work);
  const auto r = run_in(
      "deny", "web",
      "cd " + work + " && export HOME=" + work +
          "; curl -sS -m 10 http://blocked.test/; echo http=$?; "
          "curl -sS -m 10 https://blocked.test/; echo https=$?; "
          "git ls-remote https://blocked.test/acme/widget.git 2>&1; echo git=$?; "
          // pip says why an index refused it only with -vv (else: "No matching distribution").
          "/usr/bin/python3 -m pip download -vv --no-deps --no-cache-dir -d . --retries 0 "
          "--index-url https://blocked.test/simple/ sandgate-none 2>&1 | grep 'Could not fetch'; "
          "timeout 40 npm view --fetch-retries=0 --registry http://blocked.test/ "
          "sandgate-e2e-pkg version 2>&1; echo npm=$?; "
          "timeout 5 bash -c 'exec 3<>/dev/tcp/blocked.test/22 && cat <&3'; echo tcp=$?");
  const std::string& out = r.out;
  EXPECT_NE(out.find(R"({"code":"SANDBOX_NETWORK_DENIED")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("host":"blocked.test","port":80,)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("host":"blocked.test","port":443,)"), std::string::npos) << out;
  EXPECT_NE(out.find("\"reason\":\"no_matching_rule\""), std::string::npos) << out;
  EXPECT_NE(out.find("http=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("https=0\n"), std::string::npos) << out << r.err;
  EXPECT_NE(out.find("remote error: sandgate: SANDBOX_NETWORK_DENIED: blocked.test is refused"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("403 Client Error: SANDBOX_NETWORK_DENIED blocked.test:443"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("403 SANDBOX_NETWORK_DENIED blocked.test:80"), std::string::npos) << out;
  EXPECT_NE(out.find("tcp=1\n"), std::string::npos) << out;  // reset, not a hang (124)
  EXPECT_EQ(out.find("Could not resolve"), std::string::npos) << out;

  const auto denials = audit("SANDBOX_NETWORK_DENIED");
  ASSERT_GE(denials.size(), 1u);
  for (const auto& d : denials) {
    EXPECT_EQ(domain_of(d), "blocked.test");
    EXPECT_EQ(d.at("network").as_object().at("protocol").as_string(), "dns")
        << boost::json::serialize(d);
  }
  EXPECT_EQ(dns_queries().find("blocked.test"), std::string::npos) << dns_queries();
  EXPECT_EQ(requests().find(kBlocked), std::string::npos) << requests();
}

TEST_F(SandboxE2e, DeniedHostByAddressGetsTheDenialContract) {
  // The sandbox names blocked.test itself (no DNS): HTTP gets the 403 body, TLS an alert.
  const auto r = run_in("contract", "web",
                        "curl -sS -m 10 --resolve blocked.test:80:203.0.113.20 "
                        "-w '%{http_code}\\n' http://blocked.test/; "
                        "curl -sS -m 10 --resolve blocked.test:443:203.0.113.20 "
                        "https://blocked.test/; echo tls=$?");
  EXPECT_NE(r.out.find("\"code\":\"SANDBOX_NETWORK_DENIED\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("403\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tls=35"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("alert access denied"), std::string::npos) << r.err;
  EXPECT_EQ(audit("SANDBOX_NETWORK_DENIED").size(), 2u);
  EXPECT_EQ(requests().find(kBlocked), std::string::npos) << requests();
}

// THREATS 8: programs that ignore HTTP_PROXY or use hard-coded addresses.
TEST_F(SandboxE2e, Threat8NoProxyAndHardCodedAddressesAreRefused) {
  const auto r = run_in("noproxy", "web",
                        "curl -sS -m 10 --noproxy '*' -k https://203.0.113.20/; echo tls=$?; "
                        "curl -sS -m 10 --noproxy '*' -o /dev/null -w '%{http_code}\\n' "
                        "http://203.0.113.20/; "
                        "timeout 5 bash -c 'exec 3<>/dev/tcp/203.0.113.20/22 && cat <&3'; "
                        "echo tcp=$?");
  EXPECT_NE(r.out.find("tls=35"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("403\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SSH-2.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tcp=1"), std::string::npos) << r.out;  // reset, not a hang (124)
  EXPECT_EQ(requests().find(kBlocked), std::string::npos) << requests();
  EXPECT_GE(audit("SANDBOX_NETWORK_DENIED", "unnamed_destination").size(), 1u);
}

TEST_F(SandboxE2e, RawTcpIsAttributedThroughTheSandboxDnsAnswers) {
  // origin.test:22 is allowed; 2222 is not. No SNI, no Host: the name comes from DNS.
  const auto r =
      run_in("ssh", "web",
             "timeout 5 bash -c 'exec 3<>/dev/tcp/origin.test/22; head -n1 <&3'; "
             "timeout 5 bash -c 'exec 3<>/dev/tcp/origin.test/2222; head -n1 <&3'; echo other=$?");
  EXPECT_NE(r.out.find("SSH-2.0-sandgate-e2e"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("other=1"), std::string::npos) << r.out;
  EXPECT_EQ(requests().find("203.0.113.10:2222"), std::string::npos) << requests();
  const auto denied = audit("SANDBOX_NETWORK_DENIED", "port_not_allowed");
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_EQ(domain_of(denied[0]), "origin.test");
  EXPECT_EQ(denied[0].at("destination").as_object().at("port").as_int64(), 2222);
}

// testdata/e2e/send.py inside the sandbox: HOST PORT DELAY_MS PAYLOAD, one per line of
// `sends`; prints each reply and how it ended.
std::string send_script(const std::vector<std::string>& sends) {
  std::string script;
  for (const std::string& args : sends) {
    script += "python3 " + source_dir() + "/tests/integration/testdata/e2e/send.py " + args + "; ";
  }
  return script;
}

// THREATS 27: plain HTTP that the old sniffer missed (an empty line first, a lower-case
// method, a first byte after the peek timeout) is still HTTP: its Host is decided, so a
// forbidden virtual host on an allowed name's address is not served.
TEST_F(SandboxE2e, Threat27HttpTheSnifferMissedIsStillDecidedOnItsHost) {
  const std::string forged = "'GET / HTTP/1.1\\r\\nHost: blocked.test\\r\\n\\r\\n'";
  const auto r = run_in("vhost", "web",
                        send_script({"origin.test 80 0 '\\r\\nGET / HTTP/1.1\\r\\nHost: "
                                     "blocked.test\\r\\n\\r\\n'",
                                     "origin.test 80 0 'get / HTTP/1.1\\r\\nHost: "
                                     "blocked.test\\r\\n\\r\\n'",
                                     "origin.test 80 600 " + forged,
                                     "origin.test 80 0 '\\r\\nGET / HTTP/1.1\\r\\nHost: "
                                     "origin.test\\r\\n\\r\\n'"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("hello from blocked.test"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hello from origin.test over http"), std::string::npos) << r.out;
  EXPECT_EQ(requests().find("host=blocked.test"), std::string::npos) << requests();
  std::size_t refused = 0;
  for (const auto& line : audit("SANDBOX_NETWORK_DENIED", "no_matching_rule")) {
    refused += domain_of(line) == "blocked.test";
  }
  EXPECT_EQ(refused, 3u) << r.out;
  EXPECT_TRUE(audit("connection_closed").empty());  // nothing went through as a raw tunnel
}

// THREATS 4 and 27: a ClientHello that comes after the peek timeout is checked before a byte
// of it is relayed: on a server-first port (its banner arrives first) and on 443 alike.
TEST_F(SandboxE2e, Threat27LateClientHelloIsChecked) {
  const auto r = run_in("late-tls", "web",
                        send_script({"origin.test 22 banner hello:blocked.test",
                                     "origin.test 443 600 hello:blocked.test",
                                     "origin.test 443 600 hello:origin.test"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("reply=b'SSH-2.0-sandgate-e2e\\r\\n\\x15\\x03"), std::string::npos)
      << r.out;  // the banner, then the access_denied alert
  EXPECT_GE(audit("SANDBOX_NETWORK_DENIED", "sni_mismatch").size(), 1u);
  EXPECT_GE(audit("SANDBOX_NETWORK_DENIED", "no_matching_rule").size(), 1u);
  EXPECT_EQ(requests().find("CONNECT 203.0.113.20"), std::string::npos) << requests();
  // The late ClientHello for the allowed name goes through (the origin answers a ServerHello).
  EXPECT_NE(r.out.find("reply=b'\\x16\\x03"), std::string::npos) << r.out;
}

// THREATS 27: on ports 80 and 443 a stream that is neither HTTP nor TLS is refused, unless an
// `opaque` rule names that host and port.
TEST_F(SandboxE2e, Threat27OtherBytesOnWebPortsNeedAnOpaqueRule) {
  const std::string ssh = "origin.test 80 0 'SSH-2.0-client\\r\\n'";
  const auto refused = run_in("opaque-no", "web", send_script({ssh}));
  EXPECT_NE(refused.out.find("reply=b''\nend=reset"), std::string::npos) << refused.out;
  const auto denied = audit("SANDBOX_NETWORK_DENIED", "unrecognized_protocol");
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_EQ(domain_of(denied[0]), "origin.test");
  EXPECT_EQ(requests().find("CONNECT 203.0.113.10:80"), std::string::npos) << requests();

  const auto opened = run_in("opaque-yes", "opaque", send_script({ssh}));
  EXPECT_NE(opened.out.find("400"), std::string::npos) << opened.out;  // the origin's answer
  EXPECT_NE(requests().find("CONNECT 203.0.113.10:80"), std::string::npos) << requests();
  EXPECT_EQ(audit("connection_closed").size(), 1u);
}

// THREATS 29 with two launched sandboxes side by side: one floods the DNS listener with
// lookups under an allowed wildcard whose own server never answers (bounded: 4 s); the other's
// lookups, of a name it asked before and of new ones, are answered promptly all the while,
// and the flooder's excess is refused and audited once per burst, not once per query.
TEST_F(SandboxE2e, Threat29ADnsFloodDoesNotStarveTheNeighbour) {
  ASSERT_EQ(run_in("dns-b", "web", "dig +short +tries=1 +time=2 origin.test").exit_code, 0);
  const std::string flood_id = id("dns-flood");
  CommandResult flood;
  std::thread flooder([&] {
    flood = run_in("dns-flood", "web",
                   "python3 " + source_dir() +
                       "/tests/integration/testdata/e2e/dns_flood.py 203.0.113.53 slow.test 4 "
                       "3000");
  });
  // Wait until the flood is refused, so the neighbour's lookups happen during it.
  bool flooding = false;
  for (int i = 0; i < 300 && !flooding; ++i) {
    flooding = world->daemon->metrics_text().find("TOO_MANY_DNS_QUERIES") != std::string::npos;
    if (!flooding) std::this_thread::sleep_for(10ms);
  }
  const auto neighbour = run_in("dns-b", "web",
                                "for n in origin.test registry.test origin.test registry.test; do "
                                "dig +short +tries=1 +time=1 $n || echo failed; done");
  flooder.join();
  EXPECT_TRUE(flooding) << flood.out << flood.err;
  EXPECT_EQ(neighbour.exit_code, 0) << neighbour.err;
  EXPECT_EQ(neighbour.out, "203.0.113.10\n203.0.113.10\n203.0.113.10\n203.0.113.10\n")
      << neighbour.out;
  EXPECT_NE(flood.out.find("rcode5="), std::string::npos) << flood.out;  // REFUSED
  std::size_t lines = 0;
  for (const auto& line : audit("TOO_MANY_DNS_QUERIES")) {
    EXPECT_EQ(line.at("labels").as_object().at("sandbox_id").as_string(), flood_id);
    ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 4u);  // a first line and a summary per 5 s burst window
}

TEST_F(SandboxE2e, UdpPingAndSpoofedSourcesGoNowhere) {
  const auto r = run_in(
      "udp", "web",
      "printf x > /dev/udp/203.0.113.10/9999; "
      "ping -c1 -W2 203.0.113.10 >/dev/null 2>&1; echo ping=$?; "
      "dev=$(ip -o route show default | awk '{print $5}'); "
      "ip addr add 10.201.0.250/32 dev $dev; "
      "curl -sS -m 5 --interface 10.201.0.250 -o /dev/null http://origin.test/; echo spoof=$?");
  EXPECT_NE(r.out.find("ping=1"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("spoof=0"), std::string::npos) << r.out << r.err;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(requests().find("UDP"), std::string::npos) << requests();
  EXPECT_EQ(requests().find("REQUEST"), std::string::npos) << requests();
}

// THREATS 9: IPv6 is not a way around the IPv4 rules.
TEST_F(SandboxE2e, Threat9Ipv6EgressFails) {
  const auto r = run_in("v6", "web",
                        "curl -sS -m 5 -6 http://[2001:db8::10]/; echo v6=$?; "
                        "curl -sS -m 5 -6 http://origin.test/; echo name6=$?");
  EXPECT_EQ(r.out.find("v6=0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("name6=0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hello"), std::string::npos) << r.out;
}

// THREATS 10: a query for a denied name never leaves the host, whoever it is sent to.
TEST_F(SandboxE2e, Threat10DnsExfiltrationNeverReachesAResolver) {
  const auto r = run_in("exfil", "web",
                        "dig +tries=1 +time=3 @203.0.113.53 c2VjcmV0.attacker.example A; "
                        "dig +tries=1 +time=3 +tcp @1.1.1.1 c2VjcmV0.attacker.example TXT; "
                        "dig +tries=1 +time=3 @203.0.113.53 origin.test TXT");
  // The A query gets the sink's address (the tool's connection is refused there), the TXT
  // queries REFUSED; each with the EDE, none sent upstream.
  EXPECT_NE(r.out.find("status: REFUSED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("EDE: 15 (Blocked): (SANDBOX_NETWORK_DENIED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("A\t192.0.2.254"), std::string::npos) << r.out;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(dns_queries().find("attacker"), std::string::npos) << dns_queries();
  EXPECT_EQ(dns_queries().find("TXT"), std::string::npos) << dns_queries();
  EXPECT_GE(audit("SANDBOX_NETWORK_DENIED", "no_matching_rule").size(), 2u);
}

// THREATS 28: a sandbox whose allow_cidrs covers the pool cannot reach a service the host
// binds on 0.0.0.0 through its own gateway (the host side of its veth), on an allowed port;
// allow_host_services opens exactly the address and port it names.
TEST_F(SandboxE2e, Threat28TheGatewayIsNotAWayToTheHostsServices) {
  HttpOrigin service("0.0.0.0", kHostService);
  HttpOrigin other("0.0.0.0", kOtherHostService);
  ASSERT_EQ(launch({"up", "--sandbox", id("gw"), "--profile", "hostnet"}).exit_code, 0);
  const auto in_sandbox = [&](const std::string& script) {
    return launch({"exec", "--sandbox", id("gw"), "--", "sh", "-c", script});
  };
  std::string gateway = in_sandbox("ip -o route show default | awk '{print $3}'").out;
  while (!gateway.empty() && gateway.back() == '\n') gateway.pop_back();
  ASSERT_EQ(gateway.rfind("10.201.0.", 0), 0u) << gateway;
  const auto get = [&](std::uint16_t port) {
    return in_sandbox("curl -sS -m 10 -o /dev/null -w '%{http_code}' http://" + gateway + ":" +
                      std::to_string(port) + "/")
        .out;
  };

  EXPECT_EQ(get(kHostService), "403");
  EXPECT_EQ(get(kOtherHostService), "403");
  EXPECT_EQ(service.connection_count(), 0u);
  EXPECT_EQ(other.connection_count(), 0u);
  const auto denied = world->daemon->wait_audit(
      [](const boost::json::object& line) {
        const auto& event = line.at("event").as_object();
        return event.contains("reason") && event.at("reason").as_string() == "host_address";
      },
      5s, audit_from_);
  ASSERT_TRUE(denied.has_value()) << "no host_address denial in the audit log";
  EXPECT_EQ(denied->at("labels").as_object().at("sandbox_id").as_string(), id("gw"));

  std::string error;
  ASSERT_TRUE(world->daemon->reload(
      world->tables + hostnet_profile("allow_host_services = [\"" + gateway + ":" +
                                      std::to_string(kHostService) + "\"]\n"),
      &error))
      << error;
  EXPECT_EQ(get(kHostService), "200");
  EXPECT_EQ(get(kOtherHostService), "403");
  EXPECT_TRUE(service.wait_for_requests(1));
  EXPECT_EQ(other.connection_count(), 0u);

  ASSERT_TRUE(world->daemon->reload(world->tables + hostnet_profile(""), &error)) << error;
  EXPECT_EQ(launch({"down", "--sandbox", id("gw")}).exit_code, 0);
}

TEST_F(SandboxE2e, NpmInstallsFromARegistryThroughSandgate) {
  ASSERT_EQ(run_command({"npm", "--version"}, 20s).exit_code, 0)
      << "npm is missing: scripts/install-deps.sh installs it";
  const std::string work = world->dir.file("npm-work");
  fs::create_directories(work);
  const auto r = run_in(
      "npm", "web",
      "cd " + work + " && HOME=" + work +
          " timeout 40 npm install --no-audit --no-fund --no-update-notifier --loglevel http "
          "--registry https://registry.test/ sandgate-e2e-pkg 2>&1 && "
          "node -e \"console.log(require('sandgate-e2e-pkg'))\"");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reached through sandgate"), std::string::npos) << r.out;
  EXPECT_NE(requests().find("host=registry.test path=/sandgate-e2e-pkg/-/"), std::string::npos)
      << requests();
}

TEST_F(SandboxE2e, SandboxesAtOnceEachLimitedToItsOwnPolicy) {
  ASSERT_EQ(launch({"up", "--sandbox", id("a"), "--profile", "web"}).exit_code, 0);
  ASSERT_EQ(launch({"up", "--sandbox", id("b"), "--profile", "other"}).exit_code, 0);
  const auto get = [&](const std::string& sandbox, const std::string& host) {
    return launch({"exec", "--sandbox", id(sandbox), "--", "curl", "-sS", "-m", "10", "-o",
                   "/dev/null", "-w", "%{http_code}", "http://" + host + "/"});
  };
  EXPECT_EQ(get("a", "origin.test").out, "200");
  EXPECT_NE(get("a", "blocked.test").out, "200");
  EXPECT_EQ(get("b", "blocked.test").out, "200");
  EXPECT_NE(get("b", "origin.test").out, "200");
  EXPECT_EQ(launch({"down", "--sandbox", id("a")}).exit_code, 0);
  EXPECT_EQ(launch({"down", "--sandbox", id("b")}).exit_code, 0);
}

TEST_F(SandboxE2e, DownClosesTheSandboxesOpenConnections) {
  ASSERT_EQ(launch({"up", "--sandbox", id("held"), "--profile", "web"}).exit_code, 0);
  // A connection that would otherwise stay open for the idle timeout (5 minutes).
  Background held(
      {launch_binary(), "--config", world->daemon->config_path(), "exec", "--sandbox", id("held"),
       "--", "bash", "-c", "exec 3<>/dev/tcp/origin.test/22; head -n1 <&3; sleep 60"},
      world->dir.file("held.out"));
  for (int i = 0; i < 100 && requests().find("203.0.113.10:22") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(requests().find("CONNECT 203.0.113.10:22"), std::string::npos) << requests();
  EXPECT_TRUE(audit("connection_closed").empty());
  ASSERT_EQ(launch({"down", "--sandbox", id("held")}).exit_code, 0);
  const auto closed = world->daemon->wait_audit(
      [&](const boost::json::object& line) {
        return line.at("event").as_object().at("code").as_string() == "connection_closed" &&
               line.at("destination").as_object().at("port").as_int64() == 22;
      },
      5s, audit_from_);
  ASSERT_TRUE(closed.has_value()) << "the tunnel outlived its sandbox";
  EXPECT_EQ(closed->at("labels").as_object().at("sandbox_id").as_string(), id("held"));
}

TEST_F(SandboxE2e, UpAttachesAnExistingNamespace) {
  const std::string ns = "sgt" + std::to_string(::getpid()) + "x";
  must({"ip", "netns", "add", ns});
  const auto up = launch(
      {"up", "--sandbox", id("attached"), "--profile", "web", "--netns", "/run/netns/" + ns});
  EXPECT_EQ(up.exit_code, 0) << up.err;
  const auto get = run_command({"ip", "netns", "exec", ns, "curl", "-sS", "-m", "10", "--resolve",
                                "origin.test:80:203.0.113.10", "http://origin.test/"});
  EXPECT_EQ(get.out, "hello from origin.test over http\n") << get.err;
  EXPECT_EQ(launch({"down", "--sandbox", id("attached")}).exit_code, 0);
  // Not ours: the namespace stays, without the sandbox's link.
  EXPECT_NE(run_command({"ip", "netns", "list"}).out.find(ns), std::string::npos);
  EXPECT_EQ(run_command({"ip", "-n", ns, "-o", "link"}).out.find("sg"), std::string::npos);
  run_command({"ip", "netns", "del", ns});
}

TEST_F(SandboxE2e, UserRunsWithoutPrivilegesAndCannotLeaveTheNamespace) {
  const auto r = launch({"run", "--sandbox", id("user"), "--profile", "web", "--user", "nobody",
                         "--", "sh", "-c",
                         "id -u; curl -sS -m 10 http://origin.test/; "
                         "nsenter --net=/proc/1/ns/net true 2>/dev/null; echo leave=$?"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "65534\nhello from origin.test over http\nleave=1\n");
  const auto unknown =
      launch({"run", "--sandbox", id("user2"), "--user", "no-such-user-sg", "--", "true"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "sandgate-launch: unknown user \"no-such-user-sg\" for --user\n");
}

// The CA bundle the launcher points SSL_CERT_FILE (and friends) at is readable by an
// unprivileged command: curl and Python verify the daemon's certificates over HTTPS.
TEST_F(SandboxE2e, UserVerifiesHttpsWithTheBundle) {
  ::chmod(world->dir.path().c_str(), 0711);  // what is above state_dir is the operator's
  const auto r = launch(
      {"run", "--sandbox", id("userca"), "--profile", "web", "--user", "nobody", "--", "sh", "-c",
       "curl -sS -m 10 https://origin.test/; echo curl=$?; /usr/bin/python3 -c \"import "
       "urllib.request; print(urllib.request.urlopen('https://origin.test/', "
       "timeout=10).read().decode(), end='')\"; echo python=$?"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "hello from origin.test over https\ncurl=0\nhello from origin.test over https\n"
            "python=0\n")
      << r.err;
}

// Transparent interception (issue 10). The sandbox names inspected.test, which its profile
// marks with `inspect`: the launcher put sandgate's CA (interception.ca_cert) into the
// sandbox's bundle by itself, so curl, Python and node verify sandgate's leaf with no flags
// and no proxy settings, and the origin sees sandgate's own TLS and each request.
TEST_F(SandboxE2e, InterceptionCurlReachesAnInspectedHostThroughSandgatesOwnTls) {
  // At most TLS 1.2 offered by the client: the origin still negotiates 1.3 with sandgate.
  const auto r = run_in("icpt", "inspect",
                        "curl -sS -m 10 --tls-max 1.2 'https://inspected.test/curl?q=secret'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from inspected.test over https\n") << r.err;
  EXPECT_EQ(tls_lines(),
            std::vector<std::string>{"TLS 203.0.113.10:443 sni=inspected.test version=TLSv1.3 "
                                     "path=/curl?q=secret"})
      << requests();
  const auto lines = audit("http_request");
  ASSERT_EQ(lines.size(), 1u) << world->daemon->audit_text();
  EXPECT_EQ(json_string(lines[0], "url.scheme"), "https");
  EXPECT_EQ(json_string(lines[0], "http.request.method"), "GET");
  EXPECT_EQ(json_string(lines[0], "url.path"), "/curl");  // never the query
  EXPECT_EQ(json_int(lines[0], "http.response.status_code"), 200);
  EXPECT_EQ(json_string(lines[0], "tls.client.server_name"), "inspected.test");
  EXPECT_EQ(json_string(lines[0], "labels.sandbox_id"), id("icpt"));
  EXPECT_TRUE(audit("connection_closed").empty());  // not a spliced tunnel
}

TEST_F(SandboxE2e, InterceptionAHostThatIsNotInspectedIsStillSpliced) {
  // Trusting only the origin's CA: the origin's own certificate reaches curl, and the origin
  // sees curl's ClientHello (TLS 1.2, as curl was told), not sandgate's.
  const auto r = run_in(
      "splice", "inspect",
      "curl -sS -m 10 --tls-max 1.2 --cacert " + origin_ca() + " https://origin.test/spliced");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from origin.test over https\n") << r.err;
  EXPECT_EQ(tls_lines(), std::vector<std::string>{"TLS 203.0.113.10:443 sni=origin.test "
                                                  "version=TLSv1.2 path=/spliced"})
      << requests();
  EXPECT_TRUE(audit("http_request").empty());
  EXPECT_EQ(audit("connection_closed").size(), 1u);
}

TEST_F(SandboxE2e, InterceptionAnotherHostInsideTheInterceptedStreamIsMisdirected) {
  // origin.test is allowed too, but not through inspected.test's TLS.
  const auto r = run_in("front", "inspect",
                        "curl -sS -m 10 --http1.1 -D - -o /dev/null -H 'Host: origin.test' "
                        "https://inspected.test/fronted");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("HTTP/1.1 421", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("X-Sandgate-Error: MISDIRECTED_REQUEST"), std::string::npos) << r.out;
  EXPECT_EQ(requests().find("path=/fronted"), std::string::npos) << requests();
  const auto lines = audit("MISDIRECTED_REQUEST");
  ASSERT_EQ(lines.size(), 1u) << world->daemon->audit_text();
  EXPECT_EQ(json_string(lines[0], "destination.address"), "origin.test");
}

TEST_F(SandboxE2e, InterceptionAClientThatTrustsAnotherCaRefusesSandgatesLeaf) {
  const auto r = run_in(
      "distrust", "inspect",
      "curl -sS -m 10 --cacert " + origin_ca() + " https://inspected.test/never; echo curl=$?");
  EXPECT_NE(r.out.find("curl=60"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(requests().find("path=/never"), std::string::npos) << requests();
  const auto line = world->daemon->wait_audit(
      [](const boost::json::object& l) {
        return l.at("event").as_object().at("code").as_string() == "CLIENT_TLS_FAILED";
      },
      5s, audit_from_);
  ASSERT_TRUE(line.has_value()) << world->daemon->audit_text();
  EXPECT_EQ(json_string(*line, "network.protocol"), "tls");
  EXPECT_EQ(json_string(*line, "destination.address"), "inspected.test");
  EXPECT_EQ(json_string(*line, "labels.sandbox_id"), id("distrust"));
}

TEST_F(SandboxE2e, InterceptionPythonAndNodeTrustTheBundleWithNoFlags) {
  ASSERT_EQ(run_command({"node", "--version"}, 20s).exit_code, 0)
      << "node is missing: scripts/install-deps.sh installs it";
  const auto r = run_in(
      "langs", "inspect",
      "python3 -c \"import urllib.request; print(urllib.request.urlopen("
      "'https://inspected.test/python', timeout=10).read().decode(), end='')\"; echo python=$?; "
      "node -e \"require('https').get('https://inspected.test/node', (r) => "
      "r.pipe(process.stdout)).on('error', (e) => { console.log(e.message); "
      "process.exitCode = 1; })\"; echo node=$?");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "hello from inspected.test over https\npython=0\n"
            "hello from inspected.test over https\nnode=0\n")
      << r.err;
  EXPECT_EQ(tls_lines(), (std::vector<std::string>{
                             "TLS 203.0.113.10:443 sni=inspected.test version=TLSv1.3 path=/python",
                             "TLS 203.0.113.10:443 sni=inspected.test version=TLSv1.3 path=/node"}))
      << requests();
  EXPECT_EQ(audit("http_request").size(), 2u);
}

// git, Python's requests, pip and npm in a sandbox trust sandgate's leaf with no flags too:
// each one's request reaches the origin through the intercepted stream (a client that refused
// the certificate sends none). So does curl with no CA variable at all (`env -i`): it reads
// /etc/ssl/certs/ca-certificates.crt, over which the launcher bind-mounted the bundle.
TEST_F(SandboxE2e, InterceptionGitRequestsPipAndNpmTrustTheBundleWithNoFlags) {
  const std::string work = world->dir.file("tools-work");
  fs::create_directories(work);
  const auto r = run_in(
      "tools", "inspect",
      "cd " + work + " && export HOME=" + work +
          "; env -i PATH=/usr/bin:/bin curl -sS -m 10 https://inspected.test/no-variables; "
          "echo bare=$?; "
          "git ls-remote https://inspected.test/acme/repo.git >/dev/null 2>git.err; "
          "grep -ci 'certificate' git.err; "
          "/usr/bin/python3 -c \"import requests; print(requests.get("
          "'https://inspected.test/requests', timeout=10).text, end='')\"; echo requests=$?; "
          "/usr/bin/python3 -m pip download --no-deps --no-cache-dir -d . --index-url "
          "https://inspected.test/simple/ sandgate-none >pip.out 2>&1; "
          "grep -ci 'certificate' pip.out; "
          "timeout 40 npm view --registry https://inspected.test/ sandgate-e2e-pkg version; "
          "echo npm=$?");
  EXPECT_EQ(r.out,
            "hello from inspected.test over https\nbare=0\n0\nhello from inspected.test over "
            "https\nrequests=0\n0\n1.0.0\nnpm=0\n")
      << r.err << read_all(work + "/git.err") << read_all(work + "/pip.out");
  const std::string seen = requests();
  for (const char* path : {"/no-variables", "/acme/repo.git/info/refs?service=git-upload-pack",
                           "/requests", "/simple/sandgate-none/", "/sandgate-e2e-pkg"}) {
    EXPECT_NE(seen.find("sni=inspected.test version=TLSv1.3 path=" + std::string(path) + "\n"),
              std::string::npos)
        << path << "\n"
        << seen;
  }
}

// An intercepted stream whose original destination is not where its name leads (the sandbox
// resolved inspected.test to blocked.test's address itself): sandgate's own connection goes
// where the name leads, and nothing reaches the address the sandbox chose.
TEST_F(SandboxE2e, InterceptionDialsTheNameNotTheAddressTheSandboxChose) {
  const auto r = run_in("addr", "inspect",
                        "curl -sS -m 10 --resolve inspected.test:443:203.0.113.20 "
                        "https://inspected.test/elsewhere");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from inspected.test over https\n");
  EXPECT_EQ(requests().find(kBlocked), std::string::npos) << requests();
  EXPECT_EQ(tls_lines(), std::vector<std::string>{"TLS 203.0.113.10:443 sni=inspected.test "
                                                  "version=TLSv1.3 path=/elsewhere"})
      << requests();
  const auto lines = audit("http_request");
  ASSERT_EQ(lines.size(), 1u) << world->daemon->audit_text();
  EXPECT_EQ(json_string(lines[0], "labels.original_destination"), "203.0.113.20:443");
  EXPECT_EQ(json_string(lines[0], "destination.address"), "inspected.test");
}

// Requests kept alive on one intercepted connection go to the origin over one connection of
// sandgate's.
TEST_F(SandboxE2e, InterceptionKeptAliveRequestsShareOneUpstreamConnection) {
  const auto r = run_in("keep", "inspect",
                        "curl -sS -m 10 https://inspected.test/one https://inspected.test/two");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from inspected.test over https\nhello from inspected.test over https\n");
  std::size_t connects = 0;
  const std::string seen = requests();
  for (std::size_t at = 0; (at = seen.find("CONNECT 203.0.113.10:443", at)) != std::string::npos;
       ++at) {
    ++connects;
  }
  EXPECT_EQ(connects, 1u) << seen;
  EXPECT_EQ(audit("http_request").size(), 2u);
}

// THREATS 27 with interception: a ClientHello that comes after the peek timeout is still
// intercepted (not spliced past the host's inspection).
TEST_F(SandboxE2e, InterceptionALateClientHelloIsInterceptedToo) {
  const auto r =
      run_in("late-icpt", "inspect",
             "python3 -c \"import socket, ssl, time\n"
             "s = socket.create_connection(('inspected.test', 443)); time.sleep(0.6)\n"
             "c = ssl.create_default_context(); c.maximum_version = ssl.TLSVersion.TLSv1_2\n"
             "t = c.wrap_socket(s, server_hostname='inspected.test')\n"
             "print(dict(x[0] for x in t.getpeercert()['issuer'])['commonName'].split(' CA')[0])\n"
             "t.sendall(b'GET /late HTTP/1.1\\\\r\\\\nHost: inspected.test\\\\r\\\\nConnection: "
             "close\\\\r\\\\n\\\\r\\\\n')\n"
             "print(t.recv(100).split(b'\\\\r\\\\n')[0].decode())\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandgate interception\nHTTP/1.1 200 OK\n") << r.err;
  EXPECT_EQ(tls_lines(), std::vector<std::string>{"TLS 203.0.113.10:443 sni=inspected.test "
                                                  "version=TLSv1.3 path=/late"})
      << requests();
}

// A path rule of an intercepted host holds for every spelling of the path a client inside
// the stream can send: dot-segments, percent-encoding, an empty segment, and the absolute form
// of the target.
TEST_F(SandboxE2e, InterceptionPathRulesHoldForEverySpellingOfThePath) {
  // HTTP/1.1: the absolute form of a target exists only there (HTTP/2 refuses a :path that
  // does not start with '/').
  const std::string get =
      "curl -sS -m 10 --http1.1 -o /dev/null -w '%{http_code}\\n' --path-as-is ";
  const auto r =
      run_in("paths", "inspect",
             get + "https://inspected.test/public; " + get + "https://inspected.test/admin/x; " +
                 get + "https://inspected.test/public/../admin/x; " + get +
                 "https://inspected.test/%61dmin/x; " + get + "https://inspected.test//admin/x; " +
                 get + "--request-target https://inspected.test/admin/x https://inspected.test/; " +
                 get + "--request-target http://inspected.test/admin/x https://inspected.test/");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The absolute forms never reach a rule: https://inspected.test/... is refused as a bad
  // request, and http://... names another origin than the stream's (421).
  EXPECT_EQ(r.out, "200\n403\n403\n403\n403\n400\n421\n") << r.err << requests();
  EXPECT_EQ(requests().find("admin"), std::string::npos) << requests();
  // Dot-segments and percent-encoding are canonicalised onto the rule; an empty segment is
  // refused as ambiguous.
  const auto denied = audit("SANDBOX_NETWORK_DENIED", "denied_by_http_rule");
  ASSERT_EQ(denied.size(), 3u) << world->daemon->audit_text();
  for (const auto& line : denied) {
    EXPECT_EQ(json_string(line, "url.scheme"), "https");
    EXPECT_EQ(json_string(line, "rule.name"), "profiles.inspect.http_rules[0]")
        << boost::json::serialize(line);
  }
  EXPECT_EQ(audit("SANDBOX_NETWORK_DENIED", "ambiguous_path").size(), 1u);
  EXPECT_EQ(audit("UNSUPPORTED_REQUEST_TARGET").size(), 1u);
  EXPECT_EQ(audit("MISDIRECTED_REQUEST").size(), 1u);
}

// h2spec (third_party/h2spec, built here offline with Debian's Go packages) from inside a
// launched sandbox against inspected.test, which sandgate intercepts: every frame it sends is
// answered by sandgate's own HTTP/2, not the origin's. Every case passes, the strict ones too
// (issue 36 item 3: closed streams, lower stream ids, the last frame of a response).
TEST_F(SandboxE2e, H2specPassesEveryCaseThroughInterception) {
  const std::string gopath = world->dir.file("gopath");
  const std::string src = gopath + "/src/github.com/summerwind/h2spec";
  fs::create_directories(fs::path(src).parent_path());
  fs::copy(source_dir() + "/third_party/h2spec", src, fs::copy_options::recursive);
  const std::string bin = world->dir.file("h2spec");
  const CommandResult built =
      run_command({"env", "GO111MODULE=off", "GOFLAGS=", "GOPATH=" + gopath + ":/usr/share/gocode",
                   "GOCACHE=" + world->dir.file("gocache"), "sh", "-c",
                   "cd " + src + " && go build -o " + bin + " ./cmd/h2spec"},
                  180s);
  ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
  const auto r =
      run_in("h2spec", "inspect", bin + " --strict --tls --insecure -h inspected.test -p 443 -o 3");
  // "147 tests, 147 passed, 0 skipped, 0 failed"
  const std::size_t tests = r.out.find(" tests, ");
  ASSERT_NE(tests, std::string::npos) << r.out << r.err;
  const std::string summary = r.out.substr(r.out.rfind('\n', tests) + 1);
  EXPECT_NE(summary.find("147 tests, 147 passed, 0 skipped, 0 failed"), std::string::npos) << r.out;
}

TEST_F(SandboxE2e, NothingRemainsAfterRunAndDown) {
  ASSERT_EQ(run_in("gone", "web", "true").exit_code, 0);
  ASSERT_EQ(launch({"up", "--sandbox", id("gone2"), "--profile", "web"}).exit_code, 0);
  ASSERT_EQ(launch({"down", "--sandbox", id("gone2")}).exit_code, 0);
  const std::string netns = run_command({"ip", "netns", "list"}).out;
  EXPECT_EQ(netns.find("sg-" + id("")), std::string::npos) << netns;
  const std::string links = run_command({"ip", "-o", "link"}).out;
  EXPECT_EQ(links.find(": sg"), std::string::npos) << links;
  const std::string tables = run_command({"nft", "list", "tables"}).out;
  EXPECT_EQ(tables.find("sandgate"), std::string::npos) << tables;
  EXPECT_TRUE(fs::is_empty(world->dir.file("sandboxes.d")));
  EXPECT_FALSE(fs::exists("/etc/netns/sg-" + id("gone")));
  const auto listed = launch({"list"});
  EXPECT_EQ(listed.out.find(id("gone")), std::string::npos) << listed.out;
}

// The README's quick start, as a newcomer types it: the daemon on the shipped example config
// (run from a copy of `config/`, as scripts/run.sh runs it), then every command of the block
// after "Then, in another shell", read from README.md when the test runs. Stand-ins answer
// for the internet: dnsmasq says github.com and example.com are at their real addresses, which
// here lead to this test's own HTTPS server (its CA added to the system roots). The machine
// is left as it was: this process gets a mount namespace of its own, in which /etc is an
// overlay (the stand-ins' resolv.conf and roots) and /run a tmpfs (the launcher's state).
TEST(ReadmeQuickStart, WorksAsWritten) {
  ASSERT_NE(::getenv(kInsideEnv), nullptr) << "run through main(): it needs its own namespace";
  TempDir dir;
  const std::string d = dir.path();
  fs::create_directories(d + "/upper");
  fs::create_directories(d + "/work");
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
  ASSERT_EQ(::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  const std::string overlay = "lowerdir=/etc,upperdir=" + d + "/upper,workdir=" + d + "/work";
  ASSERT_EQ(::mount("overlay", "/etc", "overlay", 0, overlay.c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"), 0) << std::strerror(errno);

  // The stand-ins: one CA, one certificate for the GitHub names.
  must({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        "/CN=sandgate readme test CA", "-keyout", d + "/ca.key", "-out", d + "/ca.pem"});
  must({"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=github.com", "-keyout",
        d + "/gh.key", "-out", d + "/gh.csr"});
  dir.write("san.ext", "subjectAltName=DNS:github.com,DNS:api.github.com\n");
  must({"openssl", "x509", "-req", "-in", d + "/gh.csr", "-CA", d + "/ca.pem", "-CAkey",
        d + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", d + "/san.ext", "-out",
        d + "/gh.pem"});
  const std::string roots = "/etc/ssl/certs/ca-certificates.crt";
  std::ofstream(roots, std::ios::app) << read_all(d + "/ca.pem");
  constexpr const char* kGithub = "140.82.112.3";
  constexpr const char* kExample = "93.184.215.14";
  fs::remove("/etc/resolv.conf");
  std::ofstream("/etc/resolv.conf") << "nameserver " << kResolver << "\n";

  const std::string n = "sgt" + std::to_string(::getpid()) + "r";
  struct Cleanup {
    std::string netns;
    ~Cleanup() { run_command({"ip", "netns", "del", netns}); }
  } cleanup{n};
  make_test_internet(n, {kGithub, kExample, kResolver});
  const std::string requests_log = d + "/requests.log";
  Background servers({"ip", "netns", "exec", n, "python3",
                      source_dir() + "/tests/integration/testdata/e2e/internet.py", requests_log,
                      d + "/gh.pem", d + "/gh.key", "https:" + std::string(kGithub) + ":443"},
                     d + "/servers.out");
  Background dnsmasq(
      {"ip", "netns", "exec", n, "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
       "--bind-interfaces", "--listen-address=" + std::string(kResolver), "--user=root",
       "--pid-file=" + d + "/dnsmasq.pid", "--address=/github.com/" + std::string(kGithub),
       "--address=/example.com/" + std::string(kExample)},
      d + "/dnsmasq.out");

  // A newcomer's checkout: the example config (copied: the launcher writes its drop-ins next
  // to it) and the binaries where scripts/run.sh builds them.
  const std::string home = d + "/checkout";
  fs::create_directories(home + "/build/release/src/app");
  fs::create_directories(home + "/build/release/src/launcher");
  fs::copy(source_dir() + "/config", home + "/config", fs::copy_options::recursive);
  fs::create_symlink(sandgate_binary(), home + "/build/release/src/app/sandgate");
  fs::create_symlink(launch_binary(), home + "/build/release/src/launcher/sandgate-launch");
  Background daemon(
      {"sh", "-c",
       "cd " + home + " && exec ./build/release/src/app/sandgate --config config/sandgate.toml"},
      d + "/daemon.out");
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    std::this_thread::sleep_for(100ms);
    const bool served = read_all(d + "/servers.out").find("ready") != std::string::npos;
    const bool resolved = run_command({"dig", std::string("@") + kResolver, "github.com", "+short",
                                       "+tries=1", "+time=1"},
                                      5s)
                              .out.find(kGithub) != std::string::npos;
    up = served && resolved &&
         run_command({"curl", "-sf", "http://127.0.0.1:9090/readyz"}, 5s).exit_code == 0;
  }
  ASSERT_TRUE(up) << read_all(d + "/daemon.out") << read_all(d + "/servers.out")
                  << read_all(d + "/dnsmasq.out");

  // The block, as README.md has it: one command per line (a trailing backslash continues it).
  std::string block;
  for (const CodeBlock& b : code_blocks(source_dir() + "/README.md", "README.md")) {
    if (b.marker.find("ReadmeQuickStart.WorksAsWritten") != std::string::npos) block = b.text;
  }
  ASSERT_NE(block, "") << "README.md lost the block this test runs (its marker names the test)";
  std::vector<std::string> commands;
  std::istringstream lines(block);
  for (std::string line, pending; std::getline(lines, line);) {
    if (line.ends_with("\\")) {
      pending += line.substr(0, line.size() - 1);
      continue;
    }
    line = trim(pending + line);
    pending.clear();
    if (!line.empty() && !line.starts_with("#")) commands.push_back(line);
  }
  ASSERT_GE(commands.size(), 5u) << block;
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    const CommandResult r = run_command({"sh", "-c", "cd " + home + " && " + command}, 60s);
    // A command whose comment names a refusal ("# 403 SANDBOX_NETWORK_DENIED") must print
    // it; every other one succeeds.
    const std::size_t comment = command.find(" # ");
    const std::string said = comment == std::string::npos ? "" : trim(command.substr(comment + 3));
    if (said.starts_with("403 ")) {
      EXPECT_NE(r.out.find("HTTP/1.1 " + said), std::string::npos) << r.out << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
  // Both ways in reached the stand-in for github.com (explicit proxy, launched sandbox), and
  // nothing reached example.com's address.
  const std::string seen = read_all(requests_log);
  std::size_t github = 0;
  for (std::size_t at = seen.find("sni=github.com"); at != std::string::npos;
       at = seen.find("sni=github.com", at + 1)) {
    ++github;
  }
  EXPECT_EQ(github, 2u) << seen;
  EXPECT_EQ(seen.find(kExample), std::string::npos) << seen;
  run_command({"sh", "-c",
               "cd " + home +
                   " && ./build/release/src/launcher/sandgate-launch "
                   "--config config/sandgate.toml gc"},
              60s);
}

}  // namespace
}  // namespace sandgate::test

// The daemon, the launcher's wiring and the test internet never touch the machine's own
// network: the whole binary runs in a fresh network namespace.
int main(int argc, char** argv) {
  return sandgate::test::run_tests_in_own_netns(argc, argv, sandgate::test::kInsideEnv,
                                                "sandbox_e2e_test");
}
