// Black-box tests of the sandgate binary's operator commands: `--version`, `decide`,
// `--check-config` and `ca init`. Every row runs the real binary (from $SANDGATE_BIN) in
// tests/integration/testdata/cli and asserts its exit status, stdout and stderr exactly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace json = boost::json;
using sandgate::test::run_command;
using sandgate::test::TempDir;

// CTest sets both variables; the compiled-in fallbacks let the binary also run on its own.
std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

const std::string& sandgate_bin() {
  static const std::string bin = env_or("SANDGATE_BIN", SANDGATE_DEFAULT_BIN);
  return bin;
}

const std::string& source_dir() {
  static const std::string dir = env_or("SANDGATE_SOURCE_DIR", SANDGATE_DEFAULT_SOURCE_DIR);
  return dir;
}

// Where the test configs live. Commands run here and name configs relatively, so error lines
// carry short, exact file names.
const std::string& testdata() {
  static const std::string dir = source_dir() + "/tests/integration/testdata/cli";
  return dir;
}

// What one run of the binary left behind. exit_code is 128 + N when killed by signal N.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A run may not take longer than this; the binary is killed and the test fails if it does.
constexpr auto kRunTimeout = std::chrono::seconds(10);

// Runs `sandgate ARGS...` in `cwd` with stdin from /dev/null, collecting stdout and stderr
// (both read concurrently, so neither pipe can fill up and stall the child).
RunResult run_sandgate(const std::vector<std::string>& args, const std::string& cwd = testdata()) {
  RunResult result;
  std::vector<std::string> argv_storage{sandgate_bin()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::array<int, 2> out_pipe{};
  std::array<int, 2> err_pipe{};
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || pipe2(out_pipe.data(), O_CLOEXEC) != 0 ||
      pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    ADD_FAILURE() << "cannot create pipes: " << std::strerror(errno);
    return result;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (chdir(cwd.c_str()) != 0) _exit(126);
    if (dup2(null_fd, 0) < 0 || dup2(out_pipe[1], 1) < 0 || dup2(err_pipe[1], 2) < 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(null_fd);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    ADD_FAILURE() << "fork failed: " << std::strerror(errno);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }

  std::array<pollfd, 2> fds{pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  const auto deadline = std::chrono::steady_clock::now() + kRunTimeout;
  bool timed_out = false;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      std::array<char, 4096> buf{};
      const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  if (timed_out) {
    kill(pid, SIGKILL);
    ADD_FAILURE() << "sandgate did not finish within " << kRunTimeout.count() << "s";
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::string describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

// stdout as JSON; null, and a test failure, unless it is exactly one line holding one value.
json::value json_line(const RunResult& r) {
  if (!r.out.ends_with('\n') || r.out.find('\n') != r.out.size() - 1) {
    ADD_FAILURE() << "stdout is not one line\n" << describe(r);
    return nullptr;
  }
  boost::system::error_code ec;
  json::value value = json::parse(r.out, ec);
  if (ec) {
    ADD_FAILURE() << "stdout is not JSON: " << ec.message() << "\n" << describe(r);
    return nullptr;
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// --version, --help

TEST(CliVersion, PrintsNameAndVersion) {
  const RunResult r = run_sandgate({"--version"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "sandgate 0.1.0\n");
  EXPECT_EQ(r.err, "");
}

TEST(CliHelp, PrintsUsageOnStdout) {
  const RunResult r = run_sandgate({"--help"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(r.out.starts_with("usage: sandgate --config FILE")) << r.out;
  EXPECT_NE(r.out.find("sandgate decide --config FILE --sandbox ID [--method M] [--path P]\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("[--admin ADDRESS:PORT] TARGET\n"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

// `sandgate CMD --help` (or -h, anywhere after CMD): that command's usage alone.
TEST(CliHelp, EachCommandPrintsItsOwn) {
  for (const auto& [args, first] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"decide", "--help"}, "usage: sandgate decide --config FILE --sandbox ID"},
           {{"audit", "-h"}, "usage: sandgate audit [--sandbox ID]..."},
           {{"ca", "init", "--help"}, "usage: sandgate ca init DIR [--force]"},
           {{"--check-config", "x.toml", "--help"}, "usage: sandgate --check-config FILE"}}) {
    const RunResult r = run_sandgate(args);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(r.out.starts_with(first)) << r.out;
    EXPECT_EQ(r.out.find("sandgate --version"), std::string::npos) << r.out;  // only its own
    EXPECT_EQ(r.err, "");
  }
}

// `sandgate audit` with no FILE reads standard input; on a terminal that is someone who forgot
// the file, told so at once instead of a silent wait (script(1) gives it a terminal).
TEST(CliHelp, AuditOnATerminalWithoutFilePrintsItsUsage) {
  const auto r =
      run_command({"timeout", "5", "script", "-qec", sandgate_bin() + " audit", "/dev/null"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("no FILE given and standard input is a terminal"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("usage: sandgate audit"), std::string::npos) << r.out;
  // Control: from a pipe it reads standard input (empty here) and reports.
  const RunResult piped = run_sandgate({"audit"});
  EXPECT_EQ(piped.exit_code, 0) << describe(piped);
}

// ---------------------------------------------------------------------------------------------
// decide: one row per decision. `expected` is the whole JSON object on stdout, without the
// "sandbox" key (the test adds the row's). The exit status follows the decision: 0 allow,
// 3 deny.

struct DecideRow {
  std::string name;
  std::string sandbox;
  std::string target;
  std::string expected;
};

void PrintTo(const DecideRow& row, std::ostream* os) {
  *os << row.name;
}

std::vector<DecideRow> decide_rows() {
  return {
      // Exact and wildcard host rules; apex vs wildcard.
      {"ExactName", "dev", "github.com",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:github.com",
           "host":"github.com","host_kind":"name","port":443})"},
      {"SandboxOwnRule", "dev", "api.example.com",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.dev.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":443})"},
      {"Wildcard", "dev", "api.github.com",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:*.github.com",
           "host":"api.github.com","host_kind":"name","port":443})"},
      {"DeepWildcard", "dev", "a.b.c.d.zone1.wild.example",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"profiles.base.allow:*.wild.example",
           "host":"a.b.c.d.zone1.wild.example","host_kind":"name","port":443})"},
      {"WildcardDoesNotCoverApex", "dev", "wild.example",
       R"({"decision":"deny","reason":"no_matching_rule","rule":"",
           "host":"wild.example","host_kind":"name","port":443,
           "suggestion":"[sandboxes.dev] allow = [\"wild.example:443\"]"})"},
      {"NoRule", "dev", "example.com",
       R"({"decision":"deny","reason":"no_matching_rule","rule":"",
           "host":"example.com","host_kind":"name","port":443,
           "suggestion":"[sandboxes.dev] allow = [\"example.com:443\"]"})"},
      {"SuffixIsNotSubdomain", "dev", "notgithub.com",
       R"({"decision":"deny","reason":"no_matching_rule","rule":"",
           "host":"notgithub.com","host_kind":"name","port":443,
           "suggestion":"[sandboxes.dev] allow = [\"notgithub.com:443\"]"})"},

      // Target spellings: host, host:port, URLs; case and trailing dot normalised.
      {"HttpUrlDefaultsTo80", "dev", "http://github.com",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:github.com",
           "host":"github.com","host_kind":"name","port":80})"},
      {"HttpsUrlDefaultsTo443", "dev", "https://api.github.com/x",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:*.github.com",
           "host":"api.github.com","host_kind":"name","port":443})"},
      {"UpperCaseAndTrailingDot", "dev", "GitHub.COM.",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:github.com",
           "host":"github.com","host_kind":"name","port":443})"},
      {"UpperCaseUrl", "dev", "HTTP://API.GitHub.com.:80/Path?q=1#f",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:*.github.com",
           "host":"api.github.com","host_kind":"name","port":80})"},
      {"UrlExplicitPort", "ports", "https://api.example.com:8443/v1",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.ports.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":8443})"},

      // Ports: explicit ":PORT" rules, default [80, 443], custom `ports`.
      {"ExplicitPortRule", "dev", "github.com:22",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"profiles.base.allow:github.com:22",
           "host":"github.com","host_kind":"name","port":22})"},
      {"PortOutsideDefaults", "dev", "github.com:8080",
       R"({"decision":"deny","reason":"port_not_allowed","rule":"profiles.base.allow:github.com",
           "host":"github.com","host_kind":"name","port":8080,
           "suggestion":"[sandboxes.dev] allow = [\"github.com:8080\"]"})"},
      {"ExplicitPortIsNotInherited", "dev", "api.github.com:22",
       R"({"decision":"deny","reason":"port_not_allowed","rule":"profiles.base.allow:*.github.com",
           "host":"api.github.com","host_kind":"name","port":22,
           "suggestion":"[sandboxes.dev] allow = [\"api.github.com:22\"]"})"},
      {"CustomPorts443", "ports", "api.example.com",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.ports.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":443})"},
      {"CustomPorts8443", "ports", "api.example.com:8443",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.ports.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":8443})"},
      {"CustomPortsDrop80", "ports", "http://api.example.com",
       R"({"decision":"deny","reason":"port_not_allowed",
           "rule":"sandboxes.ports.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":80,
           "suggestion":"[sandboxes.ports] allow = [\"api.example.com:80\"]"})"},
      {"PinnedPortRule", "ports", "ssh.example.com:2222",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.ports.allow:ssh.example.com:2222",
           "host":"ssh.example.com","host_kind":"name","port":2222})"},
      {"PinnedPortRuleOtherPort", "ports", "ssh.example.com",
       R"({"decision":"deny","reason":"port_not_allowed",
           "rule":"sandboxes.ports.allow:ssh.example.com:2222",
           "host":"ssh.example.com","host_kind":"name","port":443,
           "suggestion":"[sandboxes.ports] allow = [\"ssh.example.com:443\"]"})"},

      // Deny beats allow, on every port.
      {"DenyBeatsWildcardAllow", "dev", "gist.github.com",
       R"({"decision":"deny","reason":"denied_by_rule","rule":"profiles.base.deny:gist.github.com",
           "host":"gist.github.com","host_kind":"name","port":443,
           "no_suggestion":"rule profiles.base.deny:gist.github.com refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"DenyWithoutPortCoversEveryPort", "dev", "gist.github.com:22",
       R"({"decision":"deny","reason":"denied_by_rule","rule":"profiles.base.deny:gist.github.com",
           "host":"gist.github.com","host_kind":"name","port":22,
           "no_suggestion":"rule profiles.base.deny:gist.github.com refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"WildcardDeny", "dev", "a.b.internal.github.com",
       R"({"decision":"deny","reason":"denied_by_rule",
           "rule":"profiles.base.deny:*.internal.github.com",
           "host":"a.b.internal.github.com","host_kind":"name","port":443,
           "no_suggestion":"rule profiles.base.deny:*.internal.github.com refuses it and comes first (deny beats allow); remove or narrow that rule"})"},

      // allow_all_hosts: names only, still subject to deny rules and ports.
      {"AllowAllHosts", "trusted", "anything.example",
       R"({"decision":"allow","reason":"allowed_all_hosts","rule":"allow_all_hosts",
           "host":"anything.example","host_kind":"name","port":443})"},
      {"AllowAllHostsRuleFirst", "trusted", "github.com",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:github.com",
           "host":"github.com","host_kind":"name","port":443})"},
      {"AllowAllHostsPort", "trusted", "anything.example:8080",
       R"({"decision":"deny","reason":"port_not_allowed","rule":"allow_all_hosts",
           "host":"anything.example","host_kind":"name","port":8080,
           "suggestion":"[sandboxes.trusted] allow = [\"anything.example:8080\"]"})"},
      {"AllowAllHostsDeny", "trusted", "gist.github.com",
       R"({"decision":"deny","reason":"denied_by_rule","rule":"profiles.base.deny:gist.github.com",
           "host":"gist.github.com","host_kind":"name","port":443,
           "no_suggestion":"rule profiles.base.deny:gist.github.com refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"AllowAllHostsNotLiterals", "trusted", "8.8.8.8",
       R"({"decision":"deny","reason":"ip_literal_not_allowed","rule":"",
           "host":"8.8.8.8","host_kind":"address","port":443,"address_class":"global",
           "suggestion":"[sandboxes.trusted] allow_cidrs = [\"8.8.8.8/32\"]"})"},

      // A sandbox from a drop-in file: the main file's profile plus its own rules and ports.
      {"DropInOwnRule", "dropped", "pkg.example.dev",
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.dropped.allow:pkg.example.dev",
           "host":"pkg.example.dev","host_kind":"name","port":443})"},
      {"DropInProfileRule", "dropped", "api.github.com",
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"profiles.base.allow:*.github.com",
           "host":"api.github.com","host_kind":"name","port":443})"},
      {"DropInPorts", "dropped", "http://pkg.example.dev",
       R"({"decision":"deny","reason":"port_not_allowed",
           "rule":"sandboxes.dropped.allow:pkg.example.dev",
           "host":"pkg.example.dev","host_kind":"name","port":80,
           "suggestion":"policy.d/dropped.toml: allow = [\"pkg.example.dev:80\"]"})"},

      // Hosts that are neither names nor addresses.
      {"NumericNotAnAddress", "dev", "1.2.3.999",
       R"({"decision":"deny","reason":"invalid_host","rule":"",
           "host":"1.2.3.999","host_kind":"invalid","port":443,
           "detail":"numeric host that is not a valid IPv4 address",
           "no_suggestion":"not a valid host name or IP address"})"},
      {"FiveNumericParts", "dev", "1.2.3.4.5",
       R"({"decision":"deny","reason":"invalid_host","rule":"",
           "host":"1.2.3.4.5","host_kind":"invalid","port":443,
           "detail":"numeric host that is not a valid IPv4 address",
           "no_suggestion":"not a valid host name or IP address"})"},
      {"HexLastLabel", "dev", "example.0x1f",
       R"({"decision":"deny","reason":"invalid_host","rule":"",
           "host":"example.0x1f","host_kind":"invalid","port":443,
           "detail":"numeric host that is not a valid IPv4 address",
           "no_suggestion":"not a valid host name or IP address"})"},
      {"BracketsWithoutAnAddress", "dev", "[1:2]",
       R"({"decision":"deny","reason":"invalid_host","rule":"",
           "host":"1:2","host_kind":"invalid","port":443,
           "detail":"invalid character in host name",
           "no_suggestion":"not a valid host name or IP address"})"},
      {"LabelStartsWithDash", "dev", "-bad.example",
       R"({"decision":"deny","reason":"invalid_host","rule":"",
           "host":"-bad.example","host_kind":"invalid","port":443,
           "detail":"label starts or ends with '-'",
           "no_suggestion":"not a valid host name or IP address"})"},

      // IP literals with no allow_cidrs: a special address says which class; a public one
      // needs a range.
      {"PublicLiteralNoCidrs", "dev", "8.8.8.8",
       R"({"decision":"deny","reason":"ip_literal_not_allowed","rule":"",
           "host":"8.8.8.8","host_kind":"address","port":443,"address_class":"global",
           "suggestion":"[sandboxes.dev] allow_cidrs = [\"8.8.8.8/32\"]"})"},
      {"PrivateNoCidrs", "dev", "10.1.2.3",
       R"({"decision":"deny","reason":"special_address","rule":"",
           "host":"10.1.2.3","host_kind":"address","port":443,"address_class":"private",
           "suggestion":"[sandboxes.dev] allow_cidrs = [\"10.1.2.3/32\"]"})"},
      {"CgnatNoCidrs", "dev", "100.64.0.1",
       R"({"decision":"deny","reason":"special_address","rule":"",
           "host":"100.64.0.1","host_kind":"address","port":443,"address_class":"cgnat",
           "suggestion":"[sandboxes.dev] allow_cidrs = [\"100.64.0.1/32\"]"})"},
      {"MetadataNoCidrs", "dev", "169.254.169.254",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"169.254.169.254","host_kind":"address","port":443,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},

      // allow_cidrs and deny_cidrs.
      {"AllowCidr", "lan", "10.1.2.3",
       R"({"decision":"allow","reason":"allowed_by_cidr",
           "rule":"sandboxes.lan.allow_cidrs:10.0.0.0/8",
           "host":"10.1.2.3","host_kind":"address","port":443,"address_class":"private"})"},
      {"AllowCidrHttpUrl", "lan", "http://10.1.2.3/",
       R"({"decision":"allow","reason":"allowed_by_cidr",
           "rule":"sandboxes.lan.allow_cidrs:10.0.0.0/8",
           "host":"10.1.2.3","host_kind":"address","port":80,"address_class":"private"})"},
      {"AllowCidrWrongPort", "lan", "10.1.2.3:22",
       R"({"decision":"deny","reason":"port_not_allowed",
           "rule":"sandboxes.lan.allow_cidrs:10.0.0.0/8",
           "host":"10.1.2.3","host_kind":"address","port":22,"address_class":"private",
           "suggestion":"[sandboxes.lan] allow_host_services = [\"10.1.2.3:22\"]"})"},
      // The launcher's pool (default 10.201.0.0/16) holds the host's own link addresses: no
      // range opens it, as in the daemon (THREATS 28).
      {"PoolAddressIsTheHosts", "lan", "10.201.0.1:443",
       R"({"decision":"deny","reason":"host_address","rule":"",
           "host":"10.201.0.1","host_kind":"address","port":443,"address_class":"private",
           "suggestion":"[sandboxes.lan] allow_host_services = [\"10.201.0.1:443\"]"})"},
      {"PoolAddressMappedForm", "lan", "[::ffff:10.201.3.2]:80",
       R"({"decision":"deny","reason":"host_address","rule":"",
           "host":"[::ffff:10.201.3.2]","host_kind":"address","port":80,
           "address_class":"private",
           "suggestion":"[sandboxes.lan] allow_host_services = [\"10.201.3.2:80\"]"})"},
      {"DenyCidrBeatsAllowCidr", "lan", "10.9.0.1",
       R"({"decision":"deny","reason":"denied_by_rule",
           "rule":"sandboxes.lan.deny_cidrs:10.9.0.0/16",
           "host":"10.9.0.1","host_kind":"address","port":443,"address_class":"private",
           "no_suggestion":"rule sandboxes.lan.deny_cidrs:10.9.0.0/16 refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"DenyCidrSeesMappedV4", "lan", "[::ffff:10.9.0.1]",
       R"({"decision":"deny","reason":"denied_by_rule",
           "rule":"sandboxes.lan.deny_cidrs:10.9.0.0/16",
           "host":"[::ffff:10.9.0.1]","host_kind":"address","port":443,
           "address_class":"private",
           "no_suggestion":"rule sandboxes.lan.deny_cidrs:10.9.0.0/16 refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"AllowCidrCgnat", "lan", "100.64.0.1",
       R"({"decision":"allow","reason":"allowed_by_cidr",
           "rule":"sandboxes.lan.allow_cidrs:100.64.0.0/10",
           "host":"100.64.0.1","host_kind":"address","port":443,"address_class":"cgnat"})"},
      {"AllowCidrPublic", "lan", "8.8.8.8",
       R"({"decision":"allow","reason":"allowed_by_cidr",
           "rule":"sandboxes.lan.allow_cidrs:8.8.8.0/24",
           "host":"8.8.8.8","host_kind":"address","port":443,"address_class":"global"})"},
      {"AllowCidrV6", "lan", "[fd00::1]:443",
       R"({"decision":"allow","reason":"allowed_by_cidr",
           "rule":"sandboxes.lan.allow_cidrs:fd00::/8",
           "host":"[fd00::1]","host_kind":"address","port":443,"address_class":"unique_local"})"},
      {"PublicOutsideCidrs", "lan", "1.1.1.1",
       R"({"decision":"deny","reason":"ip_literal_not_allowed","rule":"",
           "host":"1.1.1.1","host_kind":"address","port":443,"address_class":"global",
           "suggestion":"[sandboxes.lan] allow_cidrs = [\"1.1.1.1/32\"]"})"},
      {"PrivateOutsideCidrs", "lan", "192.168.1.1",
       R"({"decision":"deny","reason":"special_address","rule":"",
           "host":"192.168.1.1","host_kind":"address","port":443,"address_class":"private",
           "suggestion":"[sandboxes.lan] allow_cidrs = [\"192.168.1.1/32\"]"})"},
      {"V6LoopbackIsNotV4Loopback", "lan", "[::1]",
       R"({"decision":"deny","reason":"special_address","rule":"",
           "host":"[::1]","host_kind":"address","port":443,"address_class":"loopback",
           "suggestion":"[sandboxes.lan] allow_cidrs = [\"::1/128\"]"})"},
      {"NamesIgnoreCidrs", "lan", "github.com",
       R"({"decision":"deny","reason":"no_matching_rule","rule":"",
           "host":"github.com","host_kind":"name","port":443,
           "suggestion":"[sandboxes.lan] allow = [\"github.com:443\"]"})"},

      // Always denied, even though lan's allow_cidrs cover every one of them.
      {"MetadataV4", "lan", "169.254.169.254",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"169.254.169.254","host_kind":"address","port":443,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},
      {"MetadataV4Http", "lan", "http://169.254.169.254/latest/meta-data/",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"169.254.169.254","host_kind":"address","port":80,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},
      {"MetadataV6", "lan", "[fd00:ec2::254]",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"[fd00:ec2::254]","host_kind":"address","port":443,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},
      {"MetadataMapped", "lan", "[::ffff:169.254.169.254]",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"[::ffff:169.254.169.254]","host_kind":"address","port":443,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},
      {"MetadataNat64", "lan", "[64:ff9b::a9fe:a9fe]",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"[64:ff9b::a9fe:a9fe]","host_kind":"address","port":443,
           "address_class":"metadata",
           "no_suggestion":"metadata addresses are refused whatever the config says"})"},
      {"LinkLocal", "lan", "169.254.1.1",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"169.254.1.1","host_kind":"address","port":443,
           "address_class":"link_local",
           "no_suggestion":"link_local addresses are refused whatever the config says"})"},
      {"Unspecified", "lan", "0.0.0.0",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"0.0.0.0","host_kind":"address","port":443,"address_class":"unspecified",
           "no_suggestion":"unspecified addresses are refused whatever the config says"})"},
      {"UnspecifiedAsZero", "lan", "0",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"0.0.0.0","host_kind":"address","port":443,"address_class":"unspecified",
           "no_suggestion":"unspecified addresses are refused whatever the config says"})"},
      {"UnspecifiedV6", "lan", "[::]",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"[::]","host_kind":"address","port":443,"address_class":"unspecified",
           "no_suggestion":"unspecified addresses are refused whatever the config says"})"},
      {"Broadcast", "lan", "255.255.255.255",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"255.255.255.255","host_kind":"address","port":443,
           "address_class":"broadcast",
           "no_suggestion":"broadcast addresses are refused whatever the config says"})"},
      {"Multicast", "lan", "224.0.0.1",
       R"({"decision":"deny","reason":"always_denied_address","rule":"",
           "host":"224.0.0.1","host_kind":"address","port":443,"address_class":"multicast",
           "no_suggestion":"multicast addresses are refused whatever the config says"})"},
  };
}

class CliDecide : public ::testing::TestWithParam<DecideRow> {};

TEST_P(CliDecide, PrintsExactlyThisDecision) {
  const DecideRow& row = GetParam();
  const RunResult r =
      run_sandgate({"decide", "--config", "policy.toml", "--sandbox", row.sandbox, row.target});
  json::object expected = json::parse(row.expected).as_object();
  expected["sandbox"] = row.sandbox;
  const int expected_exit = expected.at("decision") == "allow" ? 0 : 3;

  EXPECT_EQ(r.exit_code, expected_exit) << describe(r);
  EXPECT_EQ(r.err, "");
  const json::value got = json_line(r);
  EXPECT_EQ(got, json::value(expected)) << "got      " << got << "\nexpected " << expected;
}

INSTANTIATE_TEST_SUITE_P(Rows, CliDecide, ::testing::ValuesIn(decide_rows()),
                         [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------------------------------------
// decide: every spelling of 127.0.0.1 (and IPv6 forms that embed it) is the same loopback
// address. Without allow_cidrs ("dev") it is refused as special; lan's 127.0.0.0/8 opens it.

struct LoopbackSpelling {
  std::string name;
  std::string target;
  std::string host;        // canonical form in the output
  bool tunnelled = false;  // 6to4, Teredo, IPv4-compatible: reached via IPv6, not at 127.0.0.1
};

void PrintTo(const LoopbackSpelling& row, std::ostream* os) {
  *os << row.name;
}

std::vector<LoopbackSpelling> loopback_spellings() {
  return {
      {"DottedQuad", "127.0.0.1", "127.0.0.1"},
      {"TrailingDot", "127.0.0.1.", "127.0.0.1"},
      {"TwoParts", "127.1", "127.0.0.1"},
      {"OneDecimalNumber", "2130706433", "127.0.0.1"},
      {"HexParts", "0x7f.1", "127.0.0.1"},
      {"UpperHex", "0X7F.0.0.1", "127.0.0.1"},
      {"OctalFirstPart", "0177.0.0.1", "127.0.0.1"},
      {"Url", "https://127.1/x", "127.0.0.1"},
      {"V4Mapped", "[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]"},
      {"V4MappedHex", "[::ffff:7f00:1]", "[::ffff:127.0.0.1]"},
      {"V4Compatible", "[::127.0.0.1]", "[::7f00:1]", true},
      {"Nat64", "[64:ff9b::7f00:1]", "[64:ff9b::7f00:1]"},
      {"Nat64Bracketed", "[64:ff9b::127.0.0.1]", "[64:ff9b::7f00:1]"},
      {"SixToFour", "[2002:7f00:1::]", "[2002:7f00:1::]", true},
      // Teredo: client address 80ff:fffe inverted is 7f00:0001; server 65.54.227.120.
      {"Teredo", "[2001:0:4136:e378:8000:63bf:80ff:fffe]", "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
       true},
  };
}

// The suggestion policy::suggest places for the address in `sandbox`'s table: its own range,
// an IPv4 address translated on the way (mapped, NAT64) as that IPv4 address, which opens those
// forms too; a tunnelled one (6to4, Teredo, IPv4-compatible) as the IPv6 address itself.
std::string cidr_suggestion(const std::string& sandbox, const LoopbackSpelling& row) {
  const std::string cidr = row.host.front() != '[' ? row.host + "/32"
                           : row.tunnelled ? row.host.substr(1, row.host.size() - 2) + "/128"
                                           : "127.0.0.1/32";
  return "[sandboxes." + sandbox + "] allow_cidrs = [\"" + cidr + "\"]";
}

class CliLoopbackLiteral : public ::testing::TestWithParam<LoopbackSpelling> {};

TEST_P(CliLoopbackLiteral, RefusedWithoutAllowCidrs) {
  const LoopbackSpelling& row = GetParam();
  const RunResult r =
      run_sandgate({"decide", "--config", "policy.toml", "--sandbox", "dev", row.target});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  const json::object expected{
      {"decision", "deny"},
      {"reason", "special_address"},
      {"rule", ""},
      {"sandbox", "dev"},
      {"host", row.host},
      {"host_kind", "address"},
      {"port", 443},
      {"address_class", "loopback"},
      {"suggestion", cidr_suggestion("dev", row)},
  };
  EXPECT_EQ(json_line(r), json::value(expected)) << describe(r);
}

// lan's 127.0.0.0/8 opens every spelling of 127.0.0.1 and the IPv6 forms that are
// translated to it (mapped, NAT64), but not the tunnelled forms (IPv4-compatible, 6to4,
// Teredo): those go through IPv6 relays, not to 127.0.0.1, and stay special addresses.
TEST_P(CliLoopbackLiteral, AllowedByCidr) {
  const LoopbackSpelling& row = GetParam();
  const RunResult r =
      run_sandgate({"decide", "--config", "policy.toml", "--sandbox", "lan", row.target});
  json::object expected{
      {"decision", "allow"},
      {"reason", "allowed_by_cidr"},
      {"rule", "sandboxes.lan.allow_cidrs:127.0.0.0/8"},
      {"sandbox", "lan"},
      {"host", row.host},
      {"host_kind", "address"},
      {"port", 443},
      {"address_class", "loopback"},
  };
  if (row.tunnelled) {
    expected["decision"] = "deny";
    expected["reason"] = "special_address";
    expected["rule"] = "";
    expected["suggestion"] = cidr_suggestion("lan", row);
  }
  EXPECT_EQ(r.exit_code, row.tunnelled ? 3 : 0) << describe(r);
  EXPECT_EQ(json_line(r), json::value(expected)) << describe(r);
}

INSTANTIATE_TEST_SUITE_P(Spellings, CliLoopbackLiteral, ::testing::ValuesIn(loopback_spellings()),
                         [](const auto& row) { return row.param.name; });

// A name padded past 300 bytes is shown by its rightmost labels, marked shortened, as the
// audit log shows it (issue 9 item 5): padding cannot hide who owns the name.
TEST(CliDecideLongHost, KeepsTheRegisteredDomain) {
  std::string padded;
  for (int i = 0; i < 8; ++i) padded += std::string(60, 'p') + ".";
  padded += "x.evil.example";
  const RunResult r =
      run_sandgate({"decide", "--config", "policy.toml", "--sandbox", "dev", padded});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  std::string kept;  // the whole labels in the last 297 bytes
  for (int i = 0; i < 4; ++i) kept += std::string(60, 'p') + ".";
  kept += "x.evil.example";
  const json::object expected{
      {"decision", "deny"},
      {"reason", "invalid_host"},
      {"rule", ""},
      {"sandbox", "dev"},
      {"host", "\xE2\x80\xA6" + kept},
      {"host_shortened", true},
      {"host_kind", "invalid"},
      {"port", 443},
      {"detail", "host name longer than 253 characters"},
      {"no_suggestion", "not a valid host name or IP address"},
  };
  EXPECT_EQ(json_line(r), json::value(expected)) << describe(r);
}

// ---------------------------------------------------------------------------------------------
// decide for one request (--method, --path, a URL's path): policy::decide_request over
// testdata/cli/requests.toml, as the proxy decides a request inside an intercepted stream.
// `expected` is the whole JSON object, without "sandbox" (always "agent").

struct DecideRequestRow {
  std::string name;
  std::vector<std::string> args;  // after --sandbox agent
  std::string expected;
};

void PrintTo(const DecideRequestRow& row, std::ostream* os) {
  *os << row.name;
}

std::vector<DecideRequestRow> decide_request_rows() {
  return {
      // An http rule that allows reading acme's repositories only: GET yes, POST no.
      {"HttpRuleAllowsGet",
       {"--method", "GET", "https://api.example.com/repos/acme/widgets?page=2"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.http_rules[0]",
           "host":"api.example.com","host_kind":"name","port":443,
           "method":"GET","path":"/repos/acme/widgets"})"},
      {"HttpRuleRefusesPost",
       {"--method", "POST", "--path", "/repos/acme/widgets", "api.example.com"},
       R"({"decision":"deny","reason":"no_matching_http_rule","rule":"",
           "host":"api.example.com","host_kind":"name","port":443,
           "method":"POST","path":"/repos/acme/widgets",
           "suggestion":"[[sandboxes.agent.http_rules]]\nhosts = [\"api.example.com\"]\nmethods = [\"POST\"]\npaths = [\"/repos/acme/widgets\"]\naction = \"allow\""})"},
      // --path alone is a GET; the path the rules see is the canonical one.
      {"PathAloneIsAGetAndIsCanonicalised",
       {"--path", "/repos/x/../acme/%77idgets", "api.example.com"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.http_rules[0]",
           "host":"api.example.com","host_kind":"name","port":443,
           "method":"GET","path":"/repos/acme/widgets"})"},
      // An encoded '/' could be read either way by the origin: refused, never matched.
      {"AmbiguousPathIsRefused",
       {"--path", "/repos/acme%2Fwidgets", "api.example.com"},
       R"({"decision":"deny","reason":"ambiguous_path","rule":"",
           "host":"api.example.com","host_kind":"name","port":443,
           "method":"GET","path":"/repos/acme%2Fwidgets","path_ambiguous":true,
           "no_suggestion":"the path holds an encoding servers read differently; no rule matches it"})"},
      // Plain HTTP (an http:// TARGET) goes through the same rules.
      {"PlainHttpUrl",
       {"--method", "HEAD", "http://api.example.com/repos/acme/x"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.http_rules[0]",
           "host":"api.example.com","host_kind":"name","port":80,
           "method":"HEAD","path":"/repos/acme/x"})"},
      // A git rule allowing fetch: the push, and its discovery request, are refused.
      {"GitPushIsRefused",
       {"--method", "POST", "https://github.com/acme/widgets.git/git-receive-pack"},
       R"({"decision":"deny","reason":"git_not_allowed",
           "rule":"sandboxes.agent.git[0]:github.com/acme/*",
           "host":"github.com","host_kind":"name","port":443,
           "method":"POST","path":"/acme/widgets.git/git-receive-pack",
           "git":"push","repository":"acme/widgets",
           "no_suggestion":"git rule sandboxes.agent.git[0]:github.com/acme/* matches the repository first and does not allow this operation; change it"})"},
      {"GitPushDiscoveryIsRefused",
       {"--method", "GET", "https://github.com/Acme/Widgets/info/refs?service=git-receive-pack"},
       R"({"decision":"deny","reason":"git_not_allowed",
           "rule":"sandboxes.agent.git[0]:github.com/acme/*",
           "host":"github.com","host_kind":"name","port":443,
           "method":"GET","path":"/Acme/Widgets/info/refs",
           "git":"push","repository":"acme/widgets",
           "no_suggestion":"git rule sandboxes.agent.git[0]:github.com/acme/* matches the repository first and does not allow this operation; change it"})"},
      {"GitFetchIsAllowed",
       {"--method", "GET", "https://github.com/acme/widgets/info/refs?service=git-upload-pack"},
       R"({"decision":"allow","reason":"allowed_by_rule",
           "rule":"sandboxes.agent.git[0]:github.com/acme/*",
           "host":"github.com","host_kind":"name","port":443,
           "method":"GET","path":"/acme/widgets/info/refs",
           "git":"fetch","repository":"acme/widgets"})"},
      // An audit-mode deny rule lets the request through and says what it would refuse.
      {"AuditModeRuleWouldDeny",
       {"--method", "DELETE", "https://staging.example.com/db"},
       R"({"decision":"allow","reason":"denied_by_http_rule",
           "rule":"sandboxes.agent.http_rules[1]",
           "host":"staging.example.com","host_kind":"name","port":443,
           "method":"DELETE","path":"/db","would_deny":"denied_by_http_rule",
           "no_suggestion":"rule sandboxes.agent.http_rules[1] refuses it and comes first (deny beats allow); remove or narrow that rule"})"},
      {"AuditModeRuleDoesNotMatch",
       {"--method", "PUT", "https://staging.example.com/db"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.http_rules[2]",
           "host":"staging.example.com","host_kind":"name","port":443,
           "method":"PUT","path":"/db"})"},
      // A host no request rule names: the host rules alone decide.
      {"HostWithoutRequestRules",
       {"--method", "POST", "https://plain.example.com/anything"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.allow:plain.example.com",
           "host":"plain.example.com","host_kind":"name","port":443,
           "method":"POST","path":"/anything"})"},
      {"HostRefusedFirst",
       {"--method", "GET", "https://other.example.com/"},
       R"({"decision":"deny","reason":"no_matching_rule","rule":"",
           "host":"other.example.com","host_kind":"name","port":443,"method":"GET","path":"/",
           "suggestion":"[sandboxes.agent] allow = [\"other.example.com:443\"]"})"},
      // Without --method or --path a URL's path is not used: the destination alone.
      {"UrlPathWithoutFlagsIsDestinationOnly",
       {"https://api.example.com/repos/other/x"},
       R"({"decision":"allow","reason":"allowed_by_rule","rule":"sandboxes.agent.allow:api.example.com",
           "host":"api.example.com","host_kind":"name","port":443})"},
  };
}

class CliDecideRequest : public ::testing::TestWithParam<DecideRequestRow> {};

TEST_P(CliDecideRequest, PrintsExactlyThisDecision) {
  const DecideRequestRow& row = GetParam();
  std::vector<std::string> args = {"decide", "--config", "requests.toml", "--sandbox", "agent"};
  args.insert(args.end(), row.args.begin(), row.args.end());
  const RunResult r = run_sandgate(args);
  json::object expected = json::parse(row.expected).as_object();
  expected["sandbox"] = "agent";
  const int expected_exit = expected.at("decision") == "allow" ? 0 : 3;
  EXPECT_EQ(r.exit_code, expected_exit) << describe(r);
  EXPECT_EQ(r.err, "");
  const json::value got = json_line(r);
  EXPECT_EQ(got, json::value(expected)) << "got      " << got << "\nexpected " << expected;
}

INSTANTIATE_TEST_SUITE_P(Rows, CliDecideRequest, ::testing::ValuesIn(decide_request_rows()),
                         [](const auto& row) { return row.param.name; });

// Drop-ins are found next to the config file, not in the working directory.
TEST(CliDropIns, ResolvedAgainstTheConfigFile) {
  const RunResult r = run_sandgate({"decide", "--config", testdata() + "/policy.toml", "--sandbox",
                                    "dropped", "pkg.example.dev"},
                                   "/");
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  const json::value got = json_line(r);
  ASSERT_TRUE(got.is_object()) << describe(r);
  EXPECT_EQ(got.at("rule"), "sandboxes.dropped.allow:pkg.example.dev") << describe(r);
}

// ---------------------------------------------------------------------------------------------
// Usage and config errors: exit 2, nothing on stdout, the exact first line on stderr.

struct UsageRow {
  std::string name;
  std::vector<std::string> args;
  std::string stderr_text;  // the first line(s) of stderr
  bool then_usage;          // the usage text follows
};

void PrintTo(const UsageRow& row, std::ostream* os) {
  *os << row.name;
}

const std::string kTargetHelp =
    "(expected host, host:port, [IPv6]:port or a http(s) URL, as a client would send it)";

std::vector<UsageRow> usage_rows() {
  const std::vector<std::string> decide = {"decide", "--config", "policy.toml"};
  const auto with = [&decide](std::vector<std::string> more) {
    std::vector<std::string> args = decide;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  return {
      {"NoArguments", {}, "sandgate: no command given\n", true},
      {"UnknownArgument", {"--frobnicate"}, "sandgate: unknown argument \"--frobnicate\"\n", true},
      {"CheckConfigWithoutFile",
       {"--check-config"},
       "sandgate: --check-config takes a FILE\n",
       true},
      {"MissingSandbox", with({"github.com"}),
       "sandgate: decide needs --config FILE, --sandbox ID and a TARGET\n", true},
      {"MissingTarget", with({"--sandbox", "dev"}),
       "sandgate: decide needs --config FILE, --sandbox ID and a TARGET\n", true},
      {"MissingConfig",
       {"decide", "--sandbox", "dev", "github.com"},
       "sandgate: decide needs --config FILE, --sandbox ID and a TARGET\n",
       true},
      {"SandboxWithoutValue", with({"github.com", "--sandbox"}),
       "sandgate: decide: unexpected argument \"--sandbox\"\n", true},
      {"TwoTargets", with({"--sandbox", "dev", "github.com", "gitlab.com"}),
       "sandgate: decide: unexpected argument \"gitlab.com\"\n", true},
      {"UnknownFlag", with({"--sandbox", "dev", "--verbose", "github.com"}),
       "sandgate: decide: unexpected argument \"--verbose\"\n", true},
      {"UnknownSandbox", with({"--sandbox", "nope", "github.com"}),
       "sandgate decide: no sandbox \"nope\" in policy.toml\n", false},
      {"FtpUrl", with({"--sandbox", "dev", "ftp://x"}),
       "sandgate decide: cannot parse target \"ftp://x\" " + kTargetHelp + "\n", false},
      {"PortZero", with({"--sandbox", "dev", "host:0"}),
       "sandgate decide: cannot parse target \"host:0\" " + kTargetHelp + "\n", false},
      {"PortTooBig", with({"--sandbox", "dev", "host:65536"}),
       "sandgate decide: cannot parse target \"host:65536\" " + kTargetHelp + "\n", false},
      {"EmptyPort", with({"--sandbox", "dev", "host:"}),
       "sandgate decide: cannot parse target \"host:\" " + kTargetHelp + "\n", false},
      {"UrlWithUserinfo", with({"--sandbox", "dev", "https://user@github.com/"}),
       "sandgate decide: cannot parse target \"https://user@github.com/\" " + kTargetHelp + "\n",
       false},
      {"UnclosedBracket", with({"--sandbox", "dev", "[::1"}),
       "sandgate decide: cannot parse target \"[::1\" " + kTargetHelp + "\n", false},
      // What the daemon refuses with 400 (issue 9 item 4): decide refuses it too, never
      // answering "allow" for a spelling no client can get through.
      {"NameInBrackets", with({"--sandbox", "dev", "[github.com]:443"}),
       "sandgate decide: cannot parse target \"[github.com]:443\" " + kTargetHelp + "\n", false},
      {"NameInBracketsUrl", with({"--sandbox", "dev", "https://[github.com]/"}),
       "sandgate decide: cannot parse target \"https://[github.com]/\" " + kTargetHelp + "\n",
       false},
      {"BareIpv6", with({"--sandbox", "lan", "::1"}),
       "sandgate decide: cannot parse target \"::1\" " + kTargetHelp + "\n", false},
      {"Ipv6ZoneId", with({"--sandbox", "dev", "[fe80::1%eth0]"}),
       "sandgate decide: cannot parse target \"[fe80::1%eth0]\" " + kTargetHelp + "\n", false},
      {"PercentEncodedName", with({"--sandbox", "dev", "github%2ecom"}),
       "sandgate decide: cannot parse target \"github%2ecom\" " + kTargetHelp + "\n", false},
      {"SpaceInHost", with({"--sandbox", "dev", "github.com :443"}),
       "sandgate decide: cannot parse target \"github.com :443\" " + kTargetHelp + "\n", false},
      // decide for one request.
      {"PathTwice",
       {"decide", "--config", "requests.toml", "--sandbox", "agent", "--path", "/x",
        "https://api.example.com/y"},
       "sandgate decide: TARGET \"https://api.example.com/y\" has a path and --path gives "
       "another; give the path once\n",
       false},
      {"MethodNotAToken",
       {"decide", "--config", "requests.toml", "--sandbox", "agent", "--method", "G T",
        "api.example.com"},
       "sandgate decide: --method \"G T\" is not an HTTP method token\n",
       false},
      {"EmptyPath",
       {"decide", "--config", "requests.toml", "--sandbox", "agent", "--path", "",
        "api.example.com"},
       "sandgate decide: --path must not be empty\n",
       false},
      {"MethodTwice", with({"--sandbox", "dev", "--method", "GET", "--method", "POST", "x.com"}),
       "sandgate: decide: unexpected argument \"--method\"\n", true},
      {"MethodWithoutValue", with({"--sandbox", "dev", "x.com", "--method"}),
       "sandgate: decide: unexpected argument \"--method\"\n", true},
      {"NonexistentConfig",
       {"decide", "--config", "missing.toml", "--sandbox", "dev", "x.com"},
       "missing.toml: cannot read file: No such file or directory\nmissing.toml: 1 error(s)\n",
       false},
      {"BrokenConfig",
       {"decide", "--config", "bad_type.toml", "--sandbox", "dev", "x.com"},
       "bad_type.toml:1:11: workers: expected an integer, got string\nbad_type.toml: 1 error(s)\n",
       false},
  };
}

class CliUsageError : public ::testing::TestWithParam<UsageRow> {};

TEST_P(CliUsageError, ExitsTwoWithMessage) {
  const UsageRow& row = GetParam();
  const RunResult r = run_sandgate(row.args);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.out, "");
  if (row.then_usage) {
    ASSERT_TRUE(r.err.starts_with(row.stderr_text)) << r.err;
    EXPECT_TRUE(r.err.substr(row.stderr_text.size()).starts_with("usage: sandgate")) << r.err;
  } else {
    EXPECT_EQ(r.err, row.stderr_text);
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, CliUsageError, ::testing::ValuesIn(usage_rows()),
                         [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------------------------------------
// --check-config

TEST(CliCheckConfig, ShippedExampleIsValid) {
  const std::string path = source_dir() + "/config/sandgate.toml";
  const RunResult r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, path + ": ok (2 sandboxes)\n");
  EXPECT_EQ(r.err, "");
}

TEST(CliCheckConfig, TestPolicyIsValid) {
  const RunResult r = run_sandgate({"--check-config", "policy.toml"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "policy.toml: ok (5 sandboxes)\n");
  EXPECT_EQ(r.err, "");
}

// One broken file per row; stderr is exactly these lines, then the count.
struct BrokenConfigRow {
  std::string name;
  std::string file;
  std::vector<std::string> lines;
};

void PrintTo(const BrokenConfigRow& row, std::ostream* os) {
  *os << row.name;
}

std::vector<BrokenConfigRow> broken_config_rows() {
  return {
      {"UnknownKeyDidYouMean",
       "bad_unknown_key.toml",
       {"bad_unknown_key.toml:2:1: profiles.default.alow: unknown key \"alow\"; "
        "did you mean \"allow\"?"}},
      {"WrongType",
       "bad_type.toml",
       {"bad_type.toml:1:11: workers: expected an integer, got string"}},
      {"BadHostPattern",
       "bad_host_pattern.toml",
       {"bad_host_pattern.toml:2:24: profiles.default.allow[1]: invalid host pattern "
        "\"foo.*.com\": '*' is only allowed as the whole first label, as in \"*.example.com\""}},
      {"BadCidr",
       "bad_cidr.toml",
       {"bad_cidr.toml:3:16: sandboxes.ci.allow_cidrs[0]: invalid CIDR \"10.0.0.1/8\": "
        "host bits set; did you mean 10.0.0.0/8?"}},
      {"DuplicateSandboxInDropIn",
       "bad_duplicate.toml",
       {"bad_duplicate.d/ci.toml:2:6: id: duplicate sandbox id \"ci\", first defined at "
        "bad_duplicate.toml:3:12"}},
      {"UnknownProfile",
       "bad_profile.toml",
       {"bad_profile.toml:6:11: sandboxes.ci.profile: unknown profile \"defualt\"; "
        "did you mean \"default\"?"}},
      {"TomlSyntax",
       "bad_syntax.toml",
       {"bad_syntax.toml:1:10: Error while parsing key-value pair: expected value, saw '\\n'"}},
      {"EveryErrorInFileOrder",
       "bad_many.toml",
       {
           "bad_many.toml:1:1: worker: unknown key \"worker\"; did you mean \"workers\"?",
           "bad_many.toml:4:10: profiles.default.ports[0]: must be between 1 and 65535, got 0",
           "bad_many.toml:5:9: profiles.default.deny[0]: invalid host pattern \"1.2.3.4\": "
           "IP addresses are not host patterns; use allow_cidrs",
           "bad_many.toml:7:1: sandboxes.ci.token: missing required key (a sandbox needs a token, "
           "sources, or both)",
           "bad_many.toml:8:11: sandboxes.ci.profile: unknown profile \"nope\"",
       }},
  };
}

class CliBrokenConfig : public ::testing::TestWithParam<BrokenConfigRow> {};

TEST_P(CliBrokenConfig, ListsEveryErrorAndExitsTwo) {
  const BrokenConfigRow& row = GetParam();
  const RunResult r = run_sandgate({"--check-config", row.file});
  std::string expected;
  for (const std::string& line : row.lines) expected += line + "\n";
  expected += row.file + ": " + std::to_string(row.lines.size()) + " error(s)\n";
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, expected);
}

INSTANTIATE_TEST_SUITE_P(Rows, CliBrokenConfig, ::testing::ValuesIn(broken_config_rows()),
                         [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------------------------------------
// --check-config and credentials: each secret file read as its provider will read it.

// A directory with an interception CA, an RSA GitHub App key, an EC key, a token file.
struct CredentialFiles {
  sandgate::test::TempDir dir;
  CredentialFiles() {
    const RunResult ca = run_sandgate({"ca", "init", dir.file("ca")});
    EXPECT_EQ(ca.exit_code, 0) << describe(ca);
    const auto rsa =
        sandgate::test::run_command({"openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                                     "rsa_keygen_bits:2048", "-out", dir.file("app.pem")});
    EXPECT_EQ(rsa.exit_code, 0) << rsa.err;
    const auto ec =
        sandgate::test::run_command({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                                     "ec_paramgen_curve:P-256", "-out", dir.file("ec.pem")});
    EXPECT_EQ(ec.exit_code, 0) << ec.err;
    dir.write("garbage.pem", "-----BEGIN PRIVATE KEY-----\nnot base64\n");
    dir.write("token", "npm_secret_value\n");
    dir.write("open-token", "npm_secret_value\n");
    for (const char* name : {"app.pem", "ec.pem", "garbage.pem", "token"}) {
      ::chmod(dir.file(name).c_str(), 0600);
    }
    ::chmod(dir.file("open-token").c_str(), 0644);
  }
  std::string config(const std::string& credentials) const {
    return dir.write("sandgate.toml",
                     "sandboxes_dir = \"\"\n[interception]\nca_cert = "
                     "\"ca/ca.pem\"\nca_key = \"ca/ca.key\"\n"
                     "[credentials]\nplaceholder_key_file = \"placeholder.key\"\n" +
                         credentials);
  }
};

TEST(CliCheckConfig, ReadsEveryCredentialFile) {
  const CredentialFiles files;
  const std::string good = files.config(
      "[credentials.gh]\nprovider = \"github_app\"\napp_id = 1\nprivate_key_file = "
      "\"app.pem\"\ninstallation_id = 2\n"
      "[credentials.npm]\nprovider = \"static\"\nfile = \"token\"\n");
  RunResult r = run_sandgate({"--check-config", good});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, good + ": ok (0 sandboxes)\n");

  const std::string d = files.dir.path().string();
  const std::string bad = files.config(
      "[credentials.api]\nprovider = \"oauth2_client_credentials\"\ntoken_url = "
      "\"https://auth.test/t\"\nclient_id = \"c\"\nclient_secret_file = \"missing\"\n"
      "[credentials.gh]\nprovider = \"github_app\"\napp_id = 1\nprivate_key_file = "
      "\"ec.pem\"\ninstallation_id = 2\n"
      "[credentials.gh2]\nprovider = \"github_app\"\napp_id = 1\nprivate_key_file = "
      "\"garbage.pem\"\ninstallation_id = 2\n"
      "[credentials.npm]\nprovider = \"static\"\nfile = \"open-token\"\n");
  r = run_sandgate({"--check-config", bad});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            bad + ": credentials.api: " + d +
                "/missing: cannot read client secret file: No such file or directory\n" + bad +
                ": credentials.gh: " + d +
                "/ec.pem: not an RSA key (GitHub App keys are RSA; RS256 needs one)\n" + bad +
                ": credentials.gh2: " + d +
                "/garbage.pem: not an unencrypted PEM private key (GitHub's \"Generate a private "
                "key\" gives one)\n" +
                bad + ": credentials.npm: " + d +
                "/open-token: token file is accessible by group or others (mode 0644); run chmod "
                "600 " +
                d + "/open-token\n" + bad + ": 4 error(s)\n");
  EXPECT_EQ(r.err.find("npm_secret_value"), std::string::npos);
}

// What start reads, read as the user the daemon runs as (`--user`): root's check of files that
// belong to `nobody` passes with --user nobody and names the owner without it; and every
// problem at once, whatever part of the start it belongs to.
TEST(CliCheckConfig, ChecksForTheDaemonsUserEverythingInOneRound) {
  const CredentialFiles files;
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  const std::string d = files.dir.path().string();
  for (const char* name : {"ca/ca.key", "app.pem"}) {
    ASSERT_EQ(::chown(files.dir.file(name).c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  }
  const std::string path = files.config(
      "[credentials.gh]\nprovider = \"github_app\"\napp_id = 1\nprivate_key_file = "
      "\"app.pem\"\ninstallation_id = 2\n");
  RunResult r = run_sandgate({"--check-config", path, "--user", "nobody"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  const std::string uid = std::to_string(nobody->pw_uid);
  EXPECT_EQ(r.err, path + ": interception: " + d + "/ca/ca.key: CA key is owned by uid " + uid +
                       ", not by the user sandgate runs as (uid 0)\n" + path +
                       ": credentials.gh: " + d + "/app.pem: private key file is owned by uid " +
                       uid + ", not by the user sandgate runs as (uid 0)\n" + path +
                       ": 2 error(s)\n");

  // The placeholder key's directory, launcher.ca_file and the CA, all in one report.
  const std::string many = files.dir.write(
      "many.toml",
      "sandboxes_dir = \"\"\n[launcher]\nca_file = \"extra-ca.pem\"\n[interception]\n"
      "ca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca.key\"\n[credentials]\n"
      "placeholder_key_file = \"run/placeholder.key\"\n[credentials.npm]\n"
      "provider = \"static\"\nfile = \"token\"\n");
  r = run_sandgate({"--check-config", many});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find(many + ": interception: "), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find(many + ": credentials.placeholder_key_file: " + d +
                 "/run/placeholder.key: placeholder key: directory " + d + "/run does not exist"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(many + ": launcher.ca_file: " + d +
                       "/extra-ca.pem: cannot read CA certificate: No such file or directory"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(many + ": 3 error(s)\n"), std::string::npos) << r.err;
  EXPECT_EQ(run_sandgate({"--check-config", many, "--user", "no-such-user-here"}).err,
            "sandgate: --check-config: no user \"no-such-user-here\" on this host\n");
}

// Loads, but cannot be what was meant: warned, and the check still passes.
TEST(CliCheckConfig, WarnsOfASandboxOrProfileThatReachesNothingAndACredentialNeverSent) {
  TempDir dir;
  dir.write("token", "t0k3n\n");
  ::chmod(dir.file("token").c_str(), 0600);
  ASSERT_EQ(run_sandgate({"ca", "init", dir.file("ca")}).exit_code, 0);
  const std::string path = dir.write(
      "sandgate.toml",
      "sandboxes_dir = \"\"\n[interception]\nca_cert = \"ca/ca.pem\"\nca_key = \"ca/ca.key\"\n"
      "[credentials]\nplaceholder_key_file = \"pk\"\n"
      "[credentials.npm]\nprovider = \"static\"\nfile = \"token\"\n"
      "[profiles.web]\nallow = [\"registry.npmjs.org\"]\n"
      "[[profiles.web.inject]]\nhosts = [\"registry.npmjs.org\", \"npm.pkg.github.com\"]\n"
      "credential = \"npm\"\nas = \"bearer\"\n"
      "[profiles.bare]\nports = [443]\n"
      "[sandboxes.a]\nprofile = \"web\"\ntoken = \"a\"\n"
      "[sandboxes.b]\ntoken = \"b\"\n");
  const RunResult r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, path + ": ok (2 sandboxes)\n");
  // Each sandbox, then each profile as a sandbox launched with it alone would be.
  EXPECT_EQ(r.err, path +
                       ": warning: sandbox a (profile web): profiles.web.inject[0] names "
                       "npm.pkg.github.com:443, which the sandbox may not reach "
                       "(no_matching_rule): credential npm is never sent there\n" +
                       path +
                       ": warning: sandbox b has no allow list: every destination is "
                       "refused\n" +
                       path +
                       ": warning: profile bare has no allow list: a sandbox launched with it "
                       "alone refuses every destination (unless sandgate-launch --allow adds "
                       "some)\n" +
                       path +
                       ": warning: profile web: profiles.web.inject[0] names "
                       "npm.pkg.github.com:443, which a sandbox launched with it may not reach "
                       "(no_matching_rule): credential npm is never sent there\n");
}

// The example config copied elsewhere without its sandboxes.d: a note, and the daemon makes it.
// The audit log's checkpoint signing key, checked as the daemon checks it at start: a key
// group and others can read is refused, the same key made private again passes (the control).
TEST(CliCheckConfig, ChecksTheAuditSigningKey) {
  const TempDir dir;
  const auto keygen = run_command({sandgate_bin(), "audit", "keygen", dir.file("audit.key")});
  ASSERT_EQ(keygen.exit_code, 0) << keygen.err;
  const std::string path = dir.write("sandgate.toml",
                                     "sandboxes_dir = \"\"\n[log]\naudit = \"audit.log\"\n"
                                     "audit_signing_key = \"audit.key\"\n");
  RunResult r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  ::chmod(dir.file("audit.key").c_str(), 0640);
  r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.err, path + ": log.audit_signing_key: audit signing key " + dir.file("audit.key") +
                       ": accessible by group or others; run chmod 600 " + dir.file("audit.key") +
                       "\n" + path + ": 1 error(s)\n");
}

TEST(CliCheckConfig, AMissingSandboxesDirIsMadeAtStart) {
  TempDir dir;
  const std::string path =
      dir.write("sandgate.toml",
                "sandboxes_dir = \"sandboxes.d\"\n[listeners]\nexplicit = [\"127.0.0.1:0\"]\n"
                "[sandboxes.a]\ntoken = \"a\"\nallow = [\"example.org\"]\n");
  RunResult r = run_sandgate({"--check-config", path});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, path + ": note: sandboxes_dir " + dir.file("sandboxes.d") +
                       " does not exist; the daemon makes it at start (mode 0750)\n");
  // The daemon runs for a second (it is ready in far less), then `timeout` ends it.
  const auto daemon = run_command({"timeout", "1", sandgate_bin(), "--config", path});
  EXPECT_NE(daemon.err.find("\"event\":\"sandboxes_dir_created\""), std::string::npos)
      << daemon.err;
  EXPECT_NE(daemon.err.find("\"event\":\"ready\""), std::string::npos) << daemon.err;
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("sandboxes.d").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  // A parent that is missing is a mistake in the path: an error, before start.
  const std::string deeper = dir.write("deeper.toml",
                                       "sandboxes_dir = \"no/such\"\n[sandboxes.a]\ntoken = \"a\"\n"
                                       "allow = [\"example.org\"]\n");
  r = run_sandgate({"--check-config", deeper});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_EQ(r.err, deeper + ": sandboxes_dir " + dir.file("no/such") + ": its directory " +
                       dir.file("no") + " does not exist\n" + deeper + ": 1 error(s)\n");
}

// ---------------------------------------------------------------------------------------------
// ca init: the files, their modes, what openssl makes of them, refusal and --force.

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777;
}

// The value after "KEY: " on its line of `out`, or "".
std::string field(const std::string& out, const std::string& key) {
  const std::string prefix = key + ": ";
  std::size_t at = out.starts_with(prefix) ? 0 : out.find("\n" + prefix);
  if (at == std::string::npos) return "";
  if (at != 0) ++at;
  const std::size_t end = out.find('\n', at);
  return out.substr(at + prefix.size(), end - at - prefix.size());
}

// `openssl x509 -in FILE -noout ARGS...`, stdout without its trailing newline.
std::string openssl_x509(const std::string& file, std::vector<std::string> args) {
  std::vector<std::string> argv{"openssl", "x509", "-in", file, "-noout"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(CliCaInit, CreatesTheCaAndPrintsItsFingerprint) {
  const TempDir tmp;
  const std::string dir = tmp.file("ca");
  const RunResult r = run_sandgate({"ca", "init", dir});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");

  const std::string cert = dir + "/ca.pem";
  const std::string key = dir + "/ca.key";
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(key), 0600u);
  EXPECT_EQ(mode_of(cert), 0644u);

  // stdout: exactly these lines, the values as openssl reads them from the files.
  const std::string fingerprint = openssl_x509(cert, {"-fingerprint", "-sha256"});
  ASSERT_TRUE(fingerprint.starts_with("sha256 Fingerprint=")) << fingerprint;
  const std::string subject = openssl_x509(cert, {"-subject", "-nameopt", "RFC2253"});
  ASSERT_TRUE(subject.starts_with("subject=CN=sandgate interception CA ")) << subject;
  const std::string not_after = field(r.out, "not_after");
  EXPECT_EQ(r.out, "certificate: " + cert + "\nkey: " + key +
                       "\nsubject: " + subject.substr(std::string("subject=").size()) +
                       "\nnot_after: " + not_after + "\nsha256_fingerprint: " +
                       fingerprint.substr(std::string("sha256 Fingerprint=").size()) + "\n");
  EXPECT_EQ(not_after.size(), std::string("2036-11-29 23:40:39 UTC").size()) << not_after;

  // A CA openssl verifies, with the extensions the issue asks for, and the key belongs to it.
  const auto verified = run_command({"openssl", "verify", "-CAfile", cert, cert});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
  EXPECT_EQ(verified.out, cert + ": OK\n");
  const std::string ext =
      openssl_x509(cert, {"-ext", "basicConstraints,keyUsage,subjectKeyIdentifier"});
  EXPECT_NE(ext.find("X509v3 Basic Constraints: critical\n    CA:TRUE, pathlen:0"),
            std::string::npos)
      << ext;
  EXPECT_NE(ext.find("X509v3 Key Usage: critical\n    Certificate Sign, CRL Sign"),
            std::string::npos)
      << ext;
  EXPECT_NE(ext.find("X509v3 Subject Key Identifier"), std::string::npos) << ext;
  const auto key_text = run_command({"openssl", "pkey", "-in", key, "-noout", "-text"});
  EXPECT_NE(key_text.out.find("ASN1 OID: prime256v1"), std::string::npos) << key_text.out;
  const auto pub_from_key = run_command({"openssl", "pkey", "-in", key, "-pubout"});
  const auto pub_from_cert = run_command({"openssl", "x509", "-in", cert, "-noout", "-pubkey"});
  EXPECT_EQ(pub_from_key.out, pub_from_cert.out);
}

TEST(CliCaInit, RelativeDirectoryIsPrintedAsGiven) {
  const TempDir tmp;
  const RunResult r = run_sandgate({"ca", "init", "ca"}, tmp.path().string());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(field(r.out, "certificate"), "ca/ca.pem");
  EXPECT_EQ(field(r.out, "key"), "ca/ca.key");
  EXPECT_EQ(mode_of(tmp.file("ca/ca.key")), 0600u);
}

TEST(CliCaInit, RefusesExistingFilesUnlessForced) {
  const TempDir tmp;
  const std::string dir = tmp.file("ca");
  const RunResult first = run_sandgate({"ca", "init", dir});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const std::string cert_before = sandgate::test::read_file(dir + "/ca.pem");
  const std::string key_before = sandgate::test::read_file(dir + "/ca.key");

  const RunResult again = run_sandgate({"ca", "init", dir});
  EXPECT_EQ(again.exit_code, 1) << describe(again);
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(again.err,
            "sandgate ca init: " + dir + "/ca.key already exists (use --force to replace it)\n");
  EXPECT_EQ(sandgate::test::read_file(dir + "/ca.pem"), cert_before);
  EXPECT_EQ(sandgate::test::read_file(dir + "/ca.key"), key_before);

  // Only the certificate left: still refused, naming it.
  std::filesystem::remove(dir + "/ca.key");
  const RunResult cert_only = run_sandgate({"ca", "init", dir});
  EXPECT_EQ(cert_only.exit_code, 1) << describe(cert_only);
  EXPECT_EQ(cert_only.err,
            "sandgate ca init: " + dir + "/ca.pem already exists (use --force to replace it)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/ca.key"));

  // --force (before or after DIR) makes a new CA in place.
  for (const auto& args : {std::vector<std::string>{"ca", "init", "--force", dir},
                           std::vector<std::string>{"ca", "init", dir, "--force"}}) {
    const RunResult forced = run_sandgate(args);
    ASSERT_EQ(forced.exit_code, 0) << describe(forced);
    EXPECT_NE(field(forced.out, "sha256_fingerprint"), field(first.out, "sha256_fingerprint"));
    EXPECT_EQ("sha256 Fingerprint=" + field(forced.out, "sha256_fingerprint"),
              openssl_x509(dir + "/ca.pem", {"-fingerprint", "-sha256"}));
    EXPECT_EQ(mode_of(dir + "/ca.key"), 0600u);
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"ca.key", "ca.pem"}));
  }
}

// Missing parents are made (as mkdir -p); a path through a file cannot be.
TEST(CliCaInit, UnwritableDirectoryIsExitOne) {
  const TempDir tmp;
  tmp.write("file", "x");
  const std::string dir = tmp.file("file/ca");
  const RunResult r = run_sandgate({"ca", "init", dir});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "sandgate ca init: " + dir + ": cannot create directory: Not a directory\n");
  const RunResult made = run_sandgate({"ca", "init", tmp.file("missing/ca")});
  EXPECT_EQ(made.exit_code, 0) << describe(made);
}

std::vector<UsageRow> ca_usage_rows() {
  return {
      {"CaWithoutSubcommand", {"ca"}, "sandgate: ca: expected \"ca init DIR\"\n", true},
      {"CaUnknownSubcommand", {"ca", "list"}, "sandgate: ca: expected \"ca init DIR\"\n", true},
      {"CaInitWithoutDir", {"ca", "init"}, "sandgate: ca init needs a DIR\n", true},
      {"CaInitForceWithoutDir", {"ca", "init", "--force"}, "sandgate: ca init needs a DIR\n", true},
      {"CaInitTwoDirs",
       {"ca", "init", "a", "b"},
       "sandgate: ca init: unexpected argument \"b\"\n",
       true},
      {"CaInitUnknownFlag",
       {"ca", "init", "--yes", "a"},
       "sandgate: ca init: unexpected argument \"--yes\"\n",
       true},
  };
}

INSTANTIATE_TEST_SUITE_P(CaRows, CliUsageError, ::testing::ValuesIn(ca_usage_rows()),
                         [](const auto& row) { return row.param.name; });

}  // namespace
