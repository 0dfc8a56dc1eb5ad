// sandgate-launch run's limits and outcomes (docs/launcher.md, "Limits and outcomes") against
// the real daemon, real namespaces, nftables and cgroups (root): --timeout stops the whole
// sandbox with 124, --memory's OOM kill and --pids's refused forks are reported, and --json's
// status object carries the error code, the command's end and the run's network denials.

#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "integration/launcher_fixture.hpp"

namespace sandgate::test {
namespace {
namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class LauncherOutcomes : public LauncherFixture {
 protected:
  // The status object in `path` (--json-file), parsed; an empty object when there is none.
  json::object status_in(const std::string& path) {
    boost::system::error_code ec;
    const json::value v = json::parse(read_file(path), ec);
    EXPECT_FALSE(ec) << path << ": " << read_file(path);
    return !ec && v.is_object() ? v.as_object() : json::object{};
  }
  // The last line of `out` parsed as the status object (run --json on stdout).
  json::object status_from_stdout(const std::string& out) {
    std::string text = out;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const std::string last =
        text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    boost::system::error_code ec;
    const json::value v = json::parse(last, ec);
    EXPECT_FALSE(ec) << "no status line at the end of: " << out;
    return !ec && v.is_object() ? v.as_object() : json::object{};
  }
};

// Whether process `pid` still runs (a zombie does not).
bool running(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Every directory named `name` under /sys/fs/cgroup (the sandbox's cgroups).
std::vector<std::string> cgroup_dirs_named(const std::string& name) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           "/sys/fs/cgroup", fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && it->path().filename() == name) found.push_back(it->path());
  }
  return found;
}

// The command and a child of it that ignores SIGTERM: at the deadline the command gets TERM
// (its trap records it and it exits 3), the child survives TERM and gets the KILL when the
// grace period ends. The launcher exits 124. The command gets TERM once although it is in the
// process group, the cgroup and the namespace the launcher signals: its trap takes a moment,
// within which a second TERM would run it again.
TEST_F(LauncherOutcomes, TimeoutStopsTheCommandAndItsChildrenWith124) {
  start_daemon();
  const std::string sb = id("timeout");
  const std::string status = dir_.file("status.json");
  const std::string script =
      "d=\"$0\"; sh -c 'trap \"\" TERM; echo $$ > \"$0/stubborn\"; exec sleep 300' \"$d\" & "
      "sleep 300 & trap 'echo term >> \"$d/log\"; sleep 0.3; exit 3' TERM; "
      "until [ -s \"$d/stubborn\" ]; do sleep 0.05; done; echo ready > \"$d/ready\"; wait";
  const auto began = Clock::now();
  const auto r = launch({"run", "--sandbox", sb, "--timeout", "1500ms", "--kill-after", "1s",
                         "--json-file", status, "--", "sh", "-c", script, dir_.path().string()});
  const auto took = Clock::now() - began;
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_EQ(r.err, "sandgate-launch: the command did not finish within --timeout 1500 ms\n");
  EXPECT_EQ(read_file(dir_.file("ready")), "ready\n");  // the child was running at the deadline
  EXPECT_EQ(read_file(dir_.file("log")), "term\n");
  const std::string stubborn = read_file(dir_.file("stubborn"));
  ASSERT_FALSE(stubborn.empty());
  EXPECT_FALSE(running(stubborn.substr(0, stubborn.size() - 1))) << "pid " << stubborn;
  // It ignored TERM: the launcher waited out the grace period before the KILL.
  EXPECT_GE(took, milliseconds(2500));
  EXPECT_LT(took, milliseconds(10000));
  const json::object j = status_in(status);
  EXPECT_EQ(j.at("sandbox"), json::value(sb));
  EXPECT_EQ(j.at("error"), "SANDBOX_COMMAND_TIMEOUT");
  EXPECT_EQ(j.at("retryable"), false);
  EXPECT_EQ(j.at("status"), 124);
  EXPECT_EQ(j.at("exit_code"), 3);  // the command's trap
  EXPECT_TRUE(j.at("signal").is_null());
  EXPECT_EQ(j.at("killed_after_grace"), true);
  EXPECT_GE(j.at("duration_ms").as_int64(), 1500);
  EXPECT_LT(j.at("duration_ms").as_int64(), 2500);  // the command itself ended at TERM
  EXPECT_EQ(j.at("limits").at("timeout_ms"), 1500);
  EXPECT_EQ(j.at("limits").at("kill_after_ms"), 1000);
  expect_nothing_left(sb);
}

// A command that dies of the TERM ends the run at once: no grace period is waited for, and
// the status names the signal. A command that finishes in time is not touched.
TEST_F(LauncherOutcomes, TimeoutTermEndsAtOnceAndAFastCommandIsUntouched) {
  start_daemon();
  const std::string sb = id("term");
  const auto began = Clock::now();
  auto r = launch({"run", "--sandbox", sb, "--timeout", "0.5", "--kill-after", "20s", "--json",
                   "--", "sleep", "30"});
  const auto took = Clock::now() - began;
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_LT(took, milliseconds(8000));
  json::object j = status_from_stdout(r.out);
  EXPECT_EQ(j.at("error"), "SANDBOX_COMMAND_TIMEOUT");
  EXPECT_EQ(j.at("signal"), SIGTERM);
  EXPECT_EQ(j.at("signal_name"), "SIGTERM");
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_EQ(j.at("killed_after_grace"), false);
  expect_nothing_left(sb);

  const std::string fast = id("fast");
  r = launch({"run", "--sandbox", fast, "--timeout", "30s", "--json", "--", "sh", "-c",
              "echo hi; exit 5"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(r.out.starts_with("hi\n{")) << r.out;
  j = status_from_stdout(r.out);
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_EQ(j.at("exit_code"), 5);
  EXPECT_EQ(j.at("status"), 5);
  expect_nothing_left(fast);
}

// --memory: the command runs in the sandbox's own cgroup with the limit; past it the kernel's
// OOM kill is reported as SANDBOX_OOM, and the cgroup is gone afterwards.
TEST_F(LauncherOutcomes, MemoryLimitOomKillIsReported) {
  start_daemon();
  const std::string sb = id("oom");
  const std::string status = dir_.file("oom.json");
  auto r = launch({"run", "--sandbox", sb, "--memory", "48M", "--json-file", status, "--",
                   "python3", "-c",
                   "print(open('/proc/self/cgroup').read(), flush=True)\n"
                   "b = bytearray(b'x') * (400 << 20)\nprint('survived')"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_NE(r.out.find("/sg-" + sb + "\n"), std::string::npos) << r.out;  // in its cgroup
  EXPECT_EQ(r.out.find("survived"), std::string::npos);
  EXPECT_NE(r.err.find("sandgate-launch: the kernel killed 1 process(es) of the sandbox at its "
                       "--memory limit of 50331648 bytes\n"),
            std::string::npos)
      << r.err;
  json::object j = status_in(status);
  EXPECT_EQ(j.at("error"), "SANDBOX_OOM");
  EXPECT_EQ(j.at("retryable"), false);
  EXPECT_EQ(j.at("signal"), SIGKILL);
  EXPECT_EQ(j.at("status"), 137);
  EXPECT_GE(j.at("oom_kills").as_int64(), 1);
  EXPECT_EQ(j.at("limits").at("memory_bytes"), 48 << 20);
  EXPECT_EQ(cgroup_dirs_named("sg-" + sb), std::vector<std::string>{});
  expect_nothing_left(sb);

  // Within the limit: no error, no OOM kill.
  const std::string fits = id("fits");
  r = launch({"run", "--sandbox", fits, "--memory", "256M", "--json-file", status, "--", "python3",
              "-c", "b = bytearray(b'x') * (16 << 20); print('ok')"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  j = status_in(status);
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_EQ(j.at("oom_kills"), 0);
  EXPECT_EQ(cgroup_dirs_named("sg-" + fits), std::vector<std::string>{});
  expect_nothing_left(fits);
}

// --pids: a loop that forks until it cannot gets exactly N-1 children (the command is the
// N-th task); the refused forks are counted, and the children die with the sandbox.
TEST_F(LauncherOutcomes, PidsLimitStopsAForkLoop) {
  start_daemon();
  const std::string sb = id("pids");
  const std::string status = dir_.file("pids.json");
  const std::string loop =
      "import errno, os, time\n"
      "n = 0\n"
      "for i in range(200):\n"
      "    try:\n"
      "        pid = os.fork()\n"
      "    except OSError as e:\n"
      "        print('refused', errno.errorcode[e.errno]); break\n"
      "    if pid == 0:\n"
      "        time.sleep(60); os._exit(0)\n"
      "    n += 1\n"
      "print('forked', n, flush=True)\n";
  const auto began = Clock::now();
  const auto r = launch(
      {"run", "--sandbox", sb, "--pids", "16", "--json-file", status, "--", "python3", "-c", loop});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "refused EAGAIN\nforked 15\n");
  EXPECT_LT(Clock::now() - began, milliseconds(20000));  // the sleeping children were killed
  const json::object j = status_in(status);
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_GE(j.at("pids_limit_hits").as_int64(), 1);
  EXPECT_EQ(j.at("limits").at("pids"), 16);
  EXPECT_TRUE(j.at("oom_kills").is_null());
  EXPECT_EQ(cgroup_dirs_named("sg-" + sb), std::vector<std::string>{});
  expect_nothing_left(sb);
}

// The status object lists the network refusals of the run, from the daemon's per-sandbox
// counters: two denied HTTP requests and one denied DNS query, each with its count. A later
// run of another sandbox starts with none.
TEST_F(LauncherOutcomes, JsonReportsTheRunsDenials) {
  start_daemon();
  const std::string sb = id("denials");
  auto r = launch({"run", "--sandbox", sb, "--json", "--", "sh", "-c",
                   "for i in 1 2; do curl -s -o /dev/null -w '%{http_code}\\n' -m 5 --resolve "
                   "denied.test:80:192.0.2.1 http://denied.test/; done; "
                   "getent hosts other.denied.test >/dev/null; echo dns=$?; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  // The refused name resolves to the DNS sink (docs/dns.md): the lookup succeeds.
  EXPECT_TRUE(r.out.starts_with("403\n403\ndns=0\n{")) << r.out;
  json::object j = status_from_stdout(r.out);
  EXPECT_EQ(j.at("sandbox"), json::value(sb));
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_EQ(j.at("exit_code"), 4);
  EXPECT_EQ(j.at("started"), true);
  EXPECT_TRUE(j.at("denials_error").is_null());
  EXPECT_GE(j.at("denials_total").as_int64(), 3);
  EXPECT_EQ(j.at("denials_overflow"), 0);
  bool http = false;
  bool dns = false;
  for (const json::value& v : j.at("denials").as_array()) {
    const json::object& d = v.as_object();
    if (d.at("host") == "denied.test") {
      http = true;
      EXPECT_EQ(d.at("port"), 80);
      EXPECT_EQ(d.at("protocol"), "http");
      EXPECT_EQ(d.at("reason"), "no_matching_rule");
      EXPECT_EQ(d.at("count"), 2);
      // As the daemon suggested it: the launcher's flag for a sandbox without a profile.
      EXPECT_EQ(d.at("suggestion"), "sandgate-launch --allow \"denied.test:80\"");
    }
    if (d.at("host") == "other.denied.test") {
      dns = true;
      EXPECT_TRUE(d.at("port").is_null());
      EXPECT_EQ(d.at("protocol"), "dns");
      EXPECT_EQ(d.at("reason"), "no_matching_rule");
      EXPECT_GE(d.at("count").as_int64(), 1);  // the resolver may ask for A and AAAA
    }
  }
  EXPECT_TRUE(http) << json::serialize(j);
  EXPECT_TRUE(dns) << json::serialize(j);
  expect_nothing_left(sb);

  const std::string clean = id("clean");
  r = launch({"run", "--sandbox", clean, "--json", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  j = status_from_stdout(r.out);
  EXPECT_EQ(j.at("denials"), json::array{});
  EXPECT_EQ(j.at("denials_total"), 0);
}

// Without --quiet, run and exec end with a short summary on stderr of what the network refused
// while the command ran: one line per destination with its count, reason and the line that
// would allow it (the daemon's suggestion), after the command's own output; at most 20 lines.
// Nothing when nothing was refused, nothing with --quiet (--json still carries them).
TEST_F(LauncherOutcomes, RunAndExecSummariseTheRefusalsOnStderr) {
  start_daemon();
  const std::string sb = id("summary");
  auto r = launch({"run", "--sandbox", sb, "--", "sh", "-c",
                   "for i in 1 2; do curl -s -o /dev/null -w '%{http_code}\\n' -m 5 --resolve "
                   "denied.test:80:192.0.2.1 http://denied.test/; done; "
                   "getent hosts other.denied.test >/dev/null; echo done >&2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "403\n403\n");
  // The command's own stderr first, then the summary.
  EXPECT_TRUE(r.err.starts_with("done\nsandgate-launch: sandbox \"" + sb +
                                "\": the network refused 2 destinations ("))
      << r.err;
  EXPECT_NE(r.err.find("\n  denied.test:80 (http, 2x): no_matching_rule; to allow: "
                       "sandgate-launch --allow \"denied.test:80\"\n"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("\n  other\\.denied\\.test \\(dns, [0-9]+x\\): "
                                                  "no_matching_rule; to allow: sandgate-launch "
                                                  "--allow \"other\\.denied\\.test\"\n")))
      << r.err;
  expect_nothing_left(sb);

  // --quiet: none; --json still has them.
  const std::string quiet = id("quiet");
  r = launch({"run", "--sandbox", quiet, "--quiet", "--json", "--", "sh", "-c",
              "getent hosts quiet.denied.test >/dev/null; true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_GE(status_from_stdout(r.out).at("denials_total").as_int64(), 1);

  // Control: nothing refused, nothing said.
  const std::string clean = id("clean");
  r = launch({"run", "--sandbox", clean, "--", "true"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");

  // Many destinations: at most 20 lines, the rest counted.
  const std::string many = id("many");
  r = launch({"run", "--sandbox", many, "--", "sh", "-c",
              "for i in $(seq 1 30); do getent hosts n$i.denied.test >/dev/null; done; true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 20) << r.err;
  EXPECT_NE(r.err.find("the network refused 30 destinations"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  and 12 more (sandgate-launch run --json lists them)\n"),
            std::string::npos)
      << r.err;

  // exec: what the sandbox was refused while its command ran.
  const std::string up = id("exec");
  ASSERT_EQ(launch({"up", "--sandbox", up}).exit_code, 0);
  r = launch({"exec", "--sandbox", up, "--", "sh", "-c",
              "getent hosts exec.denied.test >/dev/null; true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the network refused 1 destination ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  exec.denied.test (dns, "), std::string::npos) << r.err;
  r = launch({"exec", "--sandbox", up, "--quiet", "--", "sh", "-c",
              "getent hosts exec.denied.test >/dev/null; true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  r = launch({"exec", "--sandbox", up, "--", "true"});  // control
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(launch({"down", "--sandbox", up}).exit_code, 0);
}

// --json-fd N: the status object goes to a descriptor the caller opened, which the command
// never holds (it cannot write a status of its own there).
TEST_F(LauncherOutcomes, JsonFdIsTheLaunchersOnly) {
  start_daemon();
  const std::string sb = id("fd");
  const std::string out = dir_.file("fd3.json");
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(), {"sh", "-c", "exec 3>\"$0\"; exec \"$@\"", out, launch_binary(),
                           "--config", config_, "run", "--sandbox", sb, "--json-fd", "3", "--",
                           "sh", "-c", "echo '{\"forged\":true}' >&3 && echo wrote || echo no fd"});
  const auto r = run_command(argv, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "no fd\n");
  const std::string text = read_file(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  const json::object j = status_in(out);
  EXPECT_EQ(j.at("sandbox"), json::value(sb));
  EXPECT_EQ(j.at("exit_code"), 0);
  EXPECT_FALSE(j.contains("forged"));
  expect_nothing_left(sb);
}

// A sandbox that cannot be created is SANDBOX_CREATE_FAILED, with the launcher's error line
// and whether retrying can help (a config or request error cannot; an id in use may free up).
TEST_F(LauncherOutcomes, CreationFailureIsSandboxCreateFailed) {
  start_daemon();
  const std::string busy = id("busy");
  ASSERT_EQ(launch({"up", "--sandbox", busy}).exit_code, 0);
  struct Row {
    std::vector<std::string> args;
    int status;
    bool retryable;
    std::string message;
  };
  const std::string fresh = id("fresh");
  const Row rows[] = {
      {{"--sandbox", "../x"},
       2,
       false,
       "invalid sandbox id \"../x\": use 1-64 characters of A-Z a-z 0-9 _ . - not starting with "
       "'.' or '-'"},
      {{"--sandbox", fresh, "--profile", "nope"},
       2,
       false,
       "unknown profile \"nope\"; profiles in " + config_ + ": default"},
      {{"--sandbox", busy},
       1,
       true,
       "sandbox id \"" + busy + "\" is in use: the launcher has it (state file " + state_dir() +
           "/sandboxes/" + busy +
           ".json); pick another id, or run `sandgate-launch down "
           "--sandbox " +
           busy + "` (or `gc` after a crash)"},
  };
  const std::string status = dir_.file("create.json");
  for (const Row& row : rows) {
    std::vector<std::string> args = {"run", "--json-file", status};
    args.insert(args.end(), row.args.begin(), row.args.end());
    args.insert(args.end(), {"--memory", "64M", "--", "true"});
    fs::remove(status);
    const auto r = launch(args);
    EXPECT_EQ(r.exit_code, row.status) << r.err;
    EXPECT_EQ(r.err, "sandgate-launch: " + row.message + "\n");
    const json::object j = status_in(status);
    EXPECT_EQ(j.at("error"), "SANDBOX_CREATE_FAILED") << row.message;
    EXPECT_EQ(j.at("retryable"), row.retryable) << row.message;
    EXPECT_EQ(j.at("message"), json::value(row.message));
    EXPECT_EQ(j.at("status"), row.status);
    EXPECT_EQ(j.at("started"), false);
    EXPECT_TRUE(j.at("exit_code").is_null());
    EXPECT_TRUE(j.at("duration_ms").is_null());
  }
  EXPECT_EQ(cgroup_dirs_named("sg-" + fresh), std::vector<std::string>{});
  EXPECT_EQ(launch({"down", "--sandbox", busy}).exit_code, 0);
  expect_nothing_left(fresh);
}

// A command that cannot be found is the command's failure (127, as a shell says), not the
// sandbox's: no error code, exit_code 127.
TEST_F(LauncherOutcomes, MissingCommandIsNoSandboxError) {
  start_daemon();
  const std::string sb = id("nocmd");
  const std::string status = dir_.file("nocmd.json");
  const auto r = launch({"run", "--sandbox", sb, "--json-file", status, "--", "/nonexistent/cmd"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "sandgate-launch: cannot run /nonexistent/cmd: no such executable file\n");
  const json::object j = status_in(status);
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_EQ(j.at("exit_code"), 127);
  EXPECT_EQ(j.at("started"), false);
  EXPECT_EQ(j.at("message"), "cannot run /nonexistent/cmd: no such executable file");
  EXPECT_FALSE(fs::exists("/run/netns/sg-" + sb));  // checked before anything is set up
  EXPECT_TRUE(fs::is_empty(sandboxes_dir()));
}

// A SIGKILLed launcher cannot remove the sandbox's cgroup, but its watcher ends what is in it,
// and gc removes it with the rest of the stale sandbox (the state file names it).
TEST_F(LauncherOutcomes, GcRemovesTheCgroupOfAKilledLauncher) {
  start_daemon();
  const std::string sb = id("cgkill");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(),
              {"sh", "-c",
               "\"$0\" --config \"$1\" run --sandbox \"$2\" --memory 64M --pids 32 -- sh -c "
               "'sleep 300 & exec sleep 301' & p=$!; "
               "until grep -q '\"ready\":true' \"$3\" 2>/dev/null; do sleep 0.05; done; "
               "until [ -n \"$(ip netns pids sg-$2)\" ]; do sleep 0.05; done; "
               "kill -KILL $p; wait $p; echo $?",
               launch_binary(), config_, sb, state});
  EXPECT_EQ(run_command(argv, std::chrono::seconds(20)).out, "137\n");
  const auto dirs = cgroup_dirs_named("sg-" + sb);
  EXPECT_EQ(dirs.size(), 2U);  // v1 here: memory and pids; one dir with v2
  // Recorded in the state file for gc.
  const json::object recorded = json::parse(read_file(state)).as_object();
  EXPECT_EQ(recorded.at("cgroups").as_array().size(), dirs.size());
  // The watcher emptied them.
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  auto populated = [&] {
    for (const std::string& d : dirs) {
      if (!read_file(d + "/cgroup.procs").empty()) return true;
    }
    return false;
  };
  while (populated() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(populated());
  const auto r = launch({"gc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "removed sandbox " + sb + "\n");
  EXPECT_EQ(cgroup_dirs_named("sg-" + sb), std::vector<std::string>{});
  expect_nothing_left(sb);
}

}  // namespace
}  // namespace sandgate::test
