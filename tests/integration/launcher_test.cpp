// sandgate-launch against the real daemon, real network namespaces and real nftables (root).
// Each test runs the daemon and the launcher inside a private "test host" namespace
// (sgt-<pid>-<n>), entered with nsenter --net so the /run/netns mounts the launcher makes stay
// visible; deleting it removes every link and nft table made inside. Sandbox ids carry the pid.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "integration/launcher_fixture.hpp"
#include "secrets/placeholder.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {
namespace fs = std::filesystem;

// Probes run inside a sandbox (python3 from Debian).
constexpr const char* kProbe = R"(
import errno, socket, sys
def err(e): return errno.errorcode.get(e.errno, str(e))
kind, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    if kind == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
        s.connect((dst, port)); s.send(b"x"); s.recv(100); print("answered")
    elif kind == "ping":
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(2)
        s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", (dst, 0))
        d = s.recv(200); print("icmp type %d code %d" % (d[20], d[21]))
    elif kind == "tcp":
        s = socket.socket(); s.settimeout(2)
        if len(sys.argv) > 4: s.bind((sys.argv[4], 0))
        s.connect((dst, port)); print("connected")
except socket.timeout: print("timeout")
except OSError as e: print(err(e))
)";

// The operator's terminal: `sh` as the session leader on a fresh pty, whose master the test
// holds. What the test types is what the operator types; what the shell reads after a command
// ends (a line pushed into the terminal with TIOCSTI, say) it runs as root, outside any sandbox.
class OperatorTerminal {
 public:
  OperatorTerminal() {
    int slave = -1;
    char name[64] = {};
    if (::openpty(&master_, &slave, name, nullptr, nullptr) != 0) {
      ADD_FAILURE() << "openpty: " << std::strerror(errno);
      return;
    }
    slave_name_ = name;
    const pid_t parent = ::getpid();
    shell_ = ::fork();
    if (shell_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::setsid();
      ::ioctl(slave, TIOCSCTTY, 0);
      for (int fd = 0; fd < 3; ++fd) ::dup2(slave, fd);
      ::close(slave);
      ::close(master_);
      ::execl("/bin/sh", "sh", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(slave);
  }
  ~OperatorTerminal() {
    if (shell_ > 0) {
      ::kill(shell_, SIGKILL);
      ::waitpid(shell_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  const std::string& slave_name() const { return slave_name_; }

  void type(const std::string& text) const {
    ASSERT_EQ(::write(master_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  // The groups of the first match of `pattern` in what the terminal showed since the last
  // match ([0] the whole match), consuming it; empty when none appears within `timeout` (what
  // it showed is then in seen()).
  std::vector<std::string> wait_for(const std::string& pattern,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      std::smatch m;
      if (std::regex_search(seen_, m, re)) {
        std::vector<std::string> groups(m.begin(), m.end());
        seen_ = m.suffix().str();
        return groups;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return {};
      pollfd pfd{master_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) return {};
      seen_.append(buf, static_cast<std::size_t>(n));
    }
  }
  const std::string& seen() const { return seen_; }
  // Types `exit` and waits for the shell to end; its exit status, or -1.
  int close_shell() {
    type("exit\n");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(shell_, &status, WNOHANG) == shell_) {
        shell_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      pollfd pfd{master_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) > 0) {  // keep draining so the shell never blocks on output
        char buf[4096];
        const ssize_t n = ::read(master_, buf, sizeof buf);
        if (n > 0) seen_.append(buf, static_cast<std::size_t>(n));
      }
    }
    return -1;
  }

 private:
  int master_ = -1;
  pid_t shell_ = -1;
  std::string slave_name_;
  std::string seen_;
};

// Pushes argv[1] into every terminal it can reach: fds 0, 1, 2 and /dev/tty (TIOCSTI, one byte
// at a time as the ioctl takes). Prints one word per target: ok or the errno name.
constexpr const char* kInject = R"(
import errno, fcntl, os, sys, termios
def push(fd):
    try:
        for b in sys.argv[1].encode(): fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        return "ok"
    except OSError as e: return errno.errorcode.get(e.errno, str(e))
out = [push(fd) for fd in (0, 1, 2)]
try: out.append(push(os.open("/dev/tty", os.O_RDWR)))
except OSError as e: out.append("tty:" + errno.errorcode.get(e.errno, str(e)))
print("inject:", " ".join(out))
)";

class Launcher : public LauncherFixture {
 protected:
  // The daemon with interception (a CA `sandgate ca init` makes in sgca/), the placeholder
  // key `key` and a static credential "gh" (token file 0600 holding npm_realtoken; env
  // GH_TOKEN and GITHUB_TOKEN) injected as Bearer for example.com, after extra_tables_.
  void start_with_static_credential(const std::string& key) {
    ASSERT_EQ(run_command({sandgate_binary(), "ca", "init", dir_.file("sgca")}).exit_code, 0);
    dir_.write("placeholder.key", key);
    ::chmod(dir_.file("placeholder.key").c_str(), 0600);
    dir_.write("token", "npm_realtoken\n");
    ::chmod(dir_.file("token").c_str(), 0600);
    extra_tables_ +=
        "\n[interception]\nca_cert = \"" + dir_.file("sgca/ca.pem") + "\"\nca_key = \"" +
        dir_.file("sgca/ca.key") + "\"\n\n[credentials]\nplaceholder_key_file = \"" +
        dir_.file("placeholder.key") + "\"\n\n[credentials.gh]\nprovider = \"static\"\nfile = \"" +
        dir_.file("token") +
        "\"\nenv = [\"GH_TOKEN\", \"GITHUB_TOKEN\"]\n\n[[profiles.default.inject]]\n"
        "hosts = [\"example.com\"]\ncredential = \"gh\"\nas = \"bearer\"\n";
    start_daemon();
  }
  // A script for the operator's shell that runs sandgate-launch in the test host with `args`
  // (and `redirect`, e.g. "</dev/null", after them).
  std::string operator_script(const std::string& name, const std::vector<std::string>& args,
                              const std::string& redirect = "") {
    std::vector<std::string> argv = host_.enter();
    argv.push_back(launch_binary());
    argv.push_back("--config");
    argv.push_back(config_);
    argv.insert(argv.end(), args.begin(), args.end());
    std::string line = "exec";
    for (const std::string& a : argv) line += " " + shell_quote(a);
    return dir_.write(name, line + " " + redirect + "\n");
  }
  std::string probe(const std::string& sandbox, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"exec", "--sandbox", sandbox, "--", "python3", "-c", kProbe};
    argv.insert(argv.end(), args.begin(), args.end());
    return launch(argv).out;
  }
};

TEST_F(Launcher, RunExitsWithTheCommandsStatusAndLeavesNothing) {
  start_daemon();
  const std::string sb = id("run");
  const auto r = launch({"run", "--sandbox", sb, "--", "sh", "-c",
                         "ip -4 -o addr show scope global | awk '{print $2, $4}'; ip route show "
                         "default; cat /etc/resolv.conf; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, "sg0s 10.201.0.2/30\ndefault via 10.201.0.1 dev sg0s \nnameserver 10.201.0.1\n");
  EXPECT_EQ(r.err, "");
  expect_nothing_left(sb);
}

TEST_F(Launcher, UpExecListDown) {
  start_daemon();
  const std::string a = id("a");
  const std::string b = id("b");
  auto r = launch({"up", "--sandbox", a, "--profile", "default", "--allow", "*.example.org"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, a + " 10.201.0.2 sg-" + a + "\n");
  r = launch({"up", "--sandbox", b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, b + " 10.201.0.6 sg-" + b + "\n");
  EXPECT_EQ(read_file(sandboxes_dir() + "/" + a + ".toml"),
            "# written by sandgate-launch; removed by `sandgate-launch down`\nid = \"" + a +
                "\"\nprofile = \"default\"\nsources = [\"10.201.0.2\"]\nallow = "
                "[\"*.example.org\"]\n");
  EXPECT_EQ(host_tables(), (std::vector<std::string>{"sandgate_0", "sandgate_1"}));
  r = launch({"list"});
  EXPECT_EQ(r.out, a + " 10.201.0.2 sg-" + a + " ready\n" + b + " 10.201.0.6 sg-" + b + " ready\n");
  r = launch({"exec", "--sandbox", b, "--", "sh", "-c",
              "ip -4 -o addr show scope global | awk '{print $4}'; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "10.201.0.6/30\n");
  r = launch({"down", "--sandbox", a});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The freed slot is reused by the next sandbox.
  const std::string c = id("c");
  r = launch({"up", "--sandbox", c});
  EXPECT_EQ(r.out, c + " 10.201.0.2 sg-" + c + "\n");
  EXPECT_EQ(launch({"down", "--sandbox", b}).exit_code, 0);
  EXPECT_EQ(launch({"down", "--sandbox", c}).exit_code, 0);
  EXPECT_EQ(launch({"list"}).out, "");
  expect_nothing_left(a);
  expect_nothing_left(b);
  expect_nothing_left(c);
  r = launch({"down", "--sandbox", a});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sandgate-launch: no sandbox \"" + a + "\" in " + state_dir() +
                       "; `sandgate-launch list` shows the ones there are\n");
}

TEST_F(Launcher, EnvironmentHasCaBundleAndNoProxy) {
  start_daemon();
  const std::string sb = id("env");
  const auto r = launch(
      {"run", "--sandbox", sb, "--", "sh", "-c", "env | grep -i -E '_proxy=|_CA|CERT' | sort"},
      {"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HTTP_PROXY=http://p:1",
       "https_proxy=http://p:1", "ALL_PROXY=x", "no_proxy=x", "SSL_CERT_DIR=/nonexistent"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string b = state_dir() + "/ca/ca-bundle.pem";
  EXPECT_EQ(r.out, "AWS_CA_BUNDLE=" + b + "\nCARGO_HTTP_CAINFO=" + b + "\nCURL_CA_BUNDLE=" + b +
                       "\nDENO_CERT=" + b + "\nGIT_SSL_CAINFO=" + b + "\nNODE_EXTRA_CA_CERTS=" + b +
                       "\nNPM_CONFIG_CAFILE=" + b + "\nPIP_CERT=" + b + "\nREQUESTS_CA_BUNDLE=" +
                       b + "\nSSL_CERT_DIR=/nonexistent\nSSL_CERT_FILE=" + b + "\n");
  EXPECT_EQ(read_file(b), read_file("/etc/ssl/certs/ca-certificates.crt"));
}

// A credential's `env` variables hold the sandbox's placeholder for it (docs/credentials.md),
// never what the operator's own environment had: the token stays outside.
TEST_F(Launcher, CredentialVariablesHoldThePlaceholderNotTheOperatorsToken) {
  const std::string key(32, '\x33');
  ASSERT_NO_FATAL_FAILURE(start_with_static_credential(key));
  const std::string sb = id("cred");
  const auto r =
      launch({"run", "--sandbox", sb, "--profile", "default", "--", "sh", "-c",
              "echo \"$GH_TOKEN\"; echo \"$GITHUB_TOKEN\"; env | grep -c TOKEN"},
             {"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GH_TOKEN=ghp_the_operators_own"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string placeholder =
      secrets::PlaceholderKey::from_bytes(key).placeholder_for(sb, "gh");
  EXPECT_EQ(r.out, placeholder + "\n" + placeholder + "\n2\n");
  EXPECT_EQ(r.out.find("ghp_the_operators_own"), std::string::npos);
}

// `env` gives a client outside any launched sandbox (the explicit proxy's) what a launched
// sandbox gets: the bundle of system roots and sandgate's CA in every CA variable, and the
// sandbox's placeholders; `eval` of its output in a shell sets them. An id the config does
// not define gets the CA lines only, and a warning. No real token is ever printed.
TEST_F(Launcher, EnvPrintsTheBundleAndThePlaceholdersOfAConfiguredSandbox) {
  const std::string key(32, '\x44');
  extra_tables_ += "\n[sandboxes.proxied]\nprofile = \"default\"\ntoken = \"t0k3n\"\n";
  ASSERT_NO_FATAL_FAILURE(start_with_static_credential(key));
  const std::string b = state_dir() + "/ca/ca-bundle.pem";
  auto r = launch({"env", "--sandbox", "proxied"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string placeholder =
      secrets::PlaceholderKey::from_bytes(key).placeholder_for("proxied", "gh");
  EXPECT_NE(r.out.find("export SSL_CERT_FILE='" + b + "'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("export GIT_SSL_CAINFO='" + b + "'\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("export GH_TOKEN='" + placeholder + "'\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("npm_realtoken"), std::string::npos);
  EXPECT_EQ(r.err, "");
  const std::string bundle = read_file(b);
  EXPECT_TRUE(bundle.starts_with(read_file("/etc/ssl/certs/ca-certificates.crt")));
  EXPECT_NE(bundle.find(read_file(dir_.file("sgca/ca.pem"))), std::string::npos);
  const std::string script =
      dir_.write("env.sh", r.out + "echo \"$GITHUB_TOKEN $CURL_CA_BUNDLE\"\n");
  EXPECT_EQ(run_command({"sh", script}).out, placeholder + " " + b + "\n");

  r = launch({"env", "--sandbox", "nobody-here"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("export SSL_CERT_FILE='" + b + "'\n"), std::string::npos);
  EXPECT_EQ(r.out.find("GH_TOKEN"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no sandbox \"nobody-here\""), std::string::npos) << r.err;
}

// THREATS 25: an unprivileged (--user) command reaches the directory that holds the daemon's
// secrets (here made traversable, as a shared filesystem may be) but reads none of them: the
// interception CA key (`sandgate ca init` makes it 0600), the placeholder key and a static
// credential's token file (0600, as docs/credentials.md asks; the daemon refuses looser
// ones), while the CA certificate, which is public, stays readable.
TEST_F(Launcher, AnUnprivilegedCommandReadsNoKeyNorToken) {
  ASSERT_NO_FATAL_FAILURE(start_with_static_credential(std::string(32, '\x44')));
  ::chmod(dir_.path().c_str(), 0711);
  ::chmod(dir_.file("sgca").c_str(), 0711);
  const std::string sb = id("keys");
  const auto r = launch({"run", "--sandbox", sb, "--user", "nobody", "--", "sh", "-c",
                         "for f in \"$@\"; do cat \"$f\" >/dev/null 2>&1; echo $?; done", "sh",
                         dir_.file("sgca/ca.key"), dir_.file("placeholder.key"), dir_.file("token"),
                         dir_.file("sgca/ca.pem")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n1\n1\n0\n");
  EXPECT_EQ(r.out.find("npm_realtoken"), std::string::npos);
}

// A --user command reads the CA bundle (SSL_CERT_FILE), and nothing else of the state dir.
TEST_F(Launcher, UserReadsTheCaBundleButNotTheStateDir) {
  start_daemon();
  ::chmod(dir_.path().c_str(), 0711);  // the launcher does not open what is above state_dir
  const std::string sb = id("ca");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  const auto r =
      launch({"run", "--sandbox", sb, "--user", "nobody", "--", "sh", "-c",
              "cmp -s \"$SSL_CERT_FILE\" /etc/ssl/certs/ca-certificates.crt; echo ca=$?; "
              "ls \"$0\" >/dev/null 2>&1; echo list=$?; ls \"$0/sandboxes\" >/dev/null "
              "2>&1; echo sandboxes=$?; cat \"$1\" >/dev/null 2>&1; echo state=$?; "
              "cat \"$0/lock\" >/dev/null 2>&1; echo lock=$?",
              state_dir(), state});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ca=0\nlist=2\nsandboxes=2\nstate=1\nlock=1\n");
  EXPECT_EQ(fs::status(state_dir() + "/ca/ca-bundle.pem").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

// With [interception] on, the launcher puts sandgate's CA into the sandbox's bundle by itself
// (no launcher.ca_file), once even when launcher.ca_file names it too, and a ca_file with
// another CA adds that one after it. Inside, every CA variable names the bundle and the
// system's roots file shows it too (for programs that read no variable).
TEST_F(Launcher, InterceptionCaIsInTheBundleWithoutCaFile) {
  ASSERT_EQ(run_command({sandgate_binary(), "ca", "init", dir_.file("sgca")}).exit_code, 0);
  const std::string ca = read_file(dir_.file("sgca/ca.pem"));
  const std::string system = read_file("/etc/ssl/certs/ca-certificates.crt");
  ASSERT_FALSE(system.empty());
  ASSERT_EQ(system.back(), '\n');
  extra_tables_ = "\n[interception]\nca_cert = \"" + dir_.file("sgca/ca.pem") + "\"\nca_key = \"" +
                  dir_.file("sgca/ca.key") + "\"\n";
  start_daemon();
  const std::string b = state_dir() + "/ca/ca-bundle.pem";
  const std::string script =
      "for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO REQUESTS_CA_BUNDLE "
      "CURL_CA_BUNDLE PIP_CERT NPM_CONFIG_CAFILE; do eval \"x=\\$$v\"; [ \"$x\" = " +
      b +
      " ] || echo \"$v=$x\"; done; "
      "cmp -s /etc/ssl/certs/ca-certificates.crt \"$SSL_CERT_FILE\"; echo system=$?; "
      "if echo x 2>/dev/null >/etc/ssl/certs/ca-certificates.crt; then echo writable; fi";
  auto r = launch({"run", "--sandbox", id("ica"), "--", "sh", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "system=0\n") << r.err;
  EXPECT_TRUE(read_file(b) == system + ca) << "a bundle of " << read_file(b).size() << " bytes";
  EXPECT_EQ(read_file("/etc/ssl/certs/ca-certificates.crt"), system);  // the host's is intact

  // launcher.ca_file naming the same CA: still once.
  launcher_extra_ = "ca_file = \"" + dir_.file("sgca/ca.pem") + "\"\n";
  std::string error;
  ASSERT_TRUE(daemon_->reload(tables(), &error)) << error;
  r = launch({"run", "--sandbox", id("ica2"), "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(b) == system + ca) << "a bundle of " << read_file(b).size() << " bytes";

  // Another CA in ca_file: after sandgate's.
  ASSERT_EQ(run_command({sandgate_binary(), "ca", "init", dir_.file("other")}).exit_code, 0);
  const std::string other = read_file(dir_.file("other/ca.pem"));
  launcher_extra_ = "ca_file = \"" + dir_.file("other/ca.pem") + "\"\n";
  ASSERT_TRUE(daemon_->reload(tables(), &error)) << error;
  r = launch({"run", "--sandbox", id("ica3"), "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(b) == system + ca + other)
      << "a bundle of " << read_file(b).size() << " bytes";
}

// A CA file the bundle cannot take ends the launcher with a config error, before anything is
// set up.
TEST_F(Launcher, UnusableCaFileIsAConfigError) {
  start_daemon();
  const std::string original = read_file(config_);
  const std::string key =
      dir_.write("key.pem", "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n");
  struct Row {
    std::string ca_file;
    std::string err;
  };
  const Row rows[] = {
      {dir_.file("missing.pem"), "launcher.ca_file " + dir_.file("missing.pem") +
                                     " cannot be read; fix the path in " + config_},
      {key, "launcher.ca_file " + key +
                " holds no PEM certificate (-----BEGIN CERTIFICATE-----); fix the path in " +
                config_},
  };
  for (const Row& row : rows) {
    std::string text = original;
    const std::string at = "ready_timeout_ms = 5000\n";
    text.insert(text.find(at) + at.size(), "ca_file = \"" + row.ca_file + "\"\n");
    std::ofstream(config_, std::ios::trunc) << text;
    const std::string sb = id("badca");
    const auto r = launch({"run", "--sandbox", sb, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, "sandgate-launch: " + row.err + "\n");
    expect_nothing_left(sb);
  }
}

// The default state_dir is under /run, which the command gets a private tmpfs for: the bundle
// SSL_CERT_FILE names is there all the same, for root and for a --user command.
TEST_F(Launcher, BundleInAStateDirUnderRunIsVisibleInside) {
  state_dir_ = "/run/sgt-state-" + unique_suffix();
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { fs::remove_all(path); }
  } remove{state_dir_};
  start_daemon();
  const std::string script =
      "test \"$SSL_CERT_FILE\" = " + state_dir() +
      "/ca/ca-bundle.pem && cmp -s \"$SSL_CERT_FILE\" /etc/ssl/certs/ca-certificates.crt; "
      "echo ca=$?; ls -A /run | grep -c sgt-state";
  for (const std::vector<std::string>& user :
       {std::vector<std::string>{}, std::vector<std::string>{"--user", "nobody"}}) {
    std::vector<std::string> args{"run", "--sandbox", id("runca")};
    args.insert(args.end(), user.begin(), user.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    const auto r = launch(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ca=0\n1\n") << r.err << (user.empty() ? "" : " --user");
  }
}

TEST_F(Launcher, SandboxTrafficOnlyReachesTheDaemon) {
  start_daemon();
  const std::string sb = id("net");
  ASSERT_EQ(launch({"up", "--sandbox", sb}).exit_code, 0);
  // Every TCP destination ends at the transparent listener (connect succeeds), even the host
  // side's admin port; non-DNS UDP and ICMP are refused with admin-prohibited.
  EXPECT_EQ(probe(sb, {"tcp", "192.0.2.1", "80"}), "connected\n");
  EXPECT_EQ(probe(sb, {"udp", "192.0.2.1", "9999"}), "EHOSTUNREACH\n");
  EXPECT_EQ(probe(sb, {"udp", "10.201.0.1", "15053"}), "EHOSTUNREACH\n");
  EXPECT_EQ(probe(sb, {"ping", "10.201.0.1", "0"}), "icmp type 3 code 13\n");
  EXPECT_EQ(probe(sb, {"ping", "192.0.2.1", "0"}), "icmp type 3 code 13\n");
  const auto admin = launch({"exec", "--sandbox", sb, "--", "curl", "-sS", "-m", "5", "-o",
                             "/dev/null", "-w", "%{http_code}", "http://10.201.0.1:19090/metrics"});
  EXPECT_EQ(admin.out, "403");  // the transparent listener's denial, not the metrics page
  // DNS to any resolver is answered by the daemon: a refused name with the sink address.
  const auto dns = launch({"exec", "--sandbox", sb, "--", "dig", "+time=2", "+tries=1",
                           "@198.51.100.53", "denied.test"});
  EXPECT_NE(dns.out.find("status: NOERROR"), std::string::npos) << dns.out;
  EXPECT_NE(dns.out.find("192.0.2.254"), std::string::npos) << dns.out;
  EXPECT_NE(dns.out.find("EDE: 15 (Blocked)"), std::string::npos) << dns.out;
  // IPv6 is off inside.
  EXPECT_EQ(
      launch({"exec", "--sandbox", sb, "--", "cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"})
          .out,
      "1\n");
  // A second address inside is a spoofed source: dropped before conntrack.
  ASSERT_EQ(
      launch({"exec", "--sandbox", sb, "--", "ip", "addr", "add", "10.201.0.9/32", "dev", "sg0s"})
          .exit_code,
      0);
  EXPECT_EQ(probe(sb, {"tcp", "192.0.2.1", "80", "10.201.0.9"}), "timeout\n");
  EXPECT_EQ(launch({"down", "--sandbox", sb}).exit_code, 0);
  expect_nothing_left(sb);
}

// THREATS.md row 26. The operator runs the launcher from an interactive root shell; a command
// inside (as nobody, and as root) pushes "touch MARKER" into every terminal it can reach. If
// any of it lands in the operator's terminal, the shell runs it once the launcher has exited.
TEST_F(Launcher, CommandCannotTypeIntoTheOperatorsTerminal) {
  start_daemon();
  const std::string marker = dir_.file("injected");
  const std::string payload = "touch " + marker + "\n";
  struct Row {
    std::string name;
    std::vector<std::string> user;
    std::string redirect;
  };
  const Row rows[] = {
      {"nobody-on-terminal", {"--user", "nobody"}, ""},
      {"root-on-terminal", {}, ""},
      {"nobody-stdin-null", {"--user", "nobody"}, "</dev/null"},
      {"root-stdin-null", {}, "</dev/null"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<std::string> args = {"run", "--sandbox", id("tty")};
    args.insert(args.end(), row.user.begin(), row.user.end());
    args.insert(args.end(), {"--", "/usr/bin/python3", "-c", kInject, payload});
    const std::string script = operator_script(row.name + ".sh", args, row.redirect);
    OperatorTerminal terminal;
    terminal.type("sh " + script + "; echo END:$?\n");
    // The command ran and tried (into its own pty, where it lands harmlessly; the pty's echo
    // of the pushed bytes may interleave with the rest of the line).
    ASSERT_FALSE(terminal.wait_for("inject: ").empty()) << terminal.seen();
    const auto end = terminal.wait_for("END:([0-9]+)");
    ASSERT_FALSE(end.empty()) << terminal.seen();
    EXPECT_EQ(end[1], "0");
    EXPECT_EQ(terminal.close_shell(), 0) << terminal.seen();
    EXPECT_FALSE(fs::exists(marker)) << "the operator's shell ran the injected line";
    fs::remove(marker);
  }
}

// Through the launcher's pty an interactive command still has a terminal of its own (not the
// operator's) and gets what the operator types; without a terminal it has none at all.
TEST_F(Launcher, InteractiveCommandGetsAPtyOfItsOwn) {
  start_daemon();
  for (const bool as_nobody : {true, false}) {
    SCOPED_TRACE(as_nobody ? "nobody" : "root");
    std::vector<std::string> args = {"run", "--sandbox", id("pty")};
    if (as_nobody) args.insert(args.end(), {"--user", "nobody"});
    args.insert(args.end(), {"--", "sh", "-c",
                             "echo tty=$(tty) size=$(stty size); IFS= read -r line; "
                             "echo got=$line; exit 5"});
    const std::string script = operator_script(as_nobody ? "i1.sh" : "i2.sh", args);
    OperatorTerminal terminal;
    terminal.type("stty rows 31 cols 97; sh " + script + "; echo END:$?\n");
    const auto tty = terminal.wait_for("tty=(\\S+) size=([0-9]+ [0-9]+)");
    ASSERT_FALSE(tty.empty()) << terminal.seen();
    EXPECT_NE(tty[1], terminal.slave_name());
    EXPECT_TRUE(tty[1].starts_with("/dev/pts/")) << tty[1];
    EXPECT_EQ(tty[2], "31 97");  // the operator's window size
    terminal.type("hello there\n");
    EXPECT_FALSE(terminal.wait_for("got=hello there").empty()) << terminal.seen();
    const auto end = terminal.wait_for("END:([0-9]+)");
    ASSERT_FALSE(end.empty()) << terminal.seen();
    EXPECT_EQ(end[1], "5");
    // The operator's terminal is back in cooked mode with echo (stty -a shows icanon echo).
    terminal.type(
        "stty -a | tr ' ' '\\n' | grep -x -E -e '-?icanon' -e '-?echo' | tr '\\n' ' '; "
        "echo MODE\n");
    EXPECT_FALSE(terminal.wait_for("icanon echo MODE").empty()) << terminal.seen();
    EXPECT_EQ(terminal.close_shell(), 0);
  }
}

TEST_F(Launcher, CommandWithoutTerminalIsInASessionOfItsOwnWithNone) {
  start_daemon();
  // /proc/self/stat: pid, session id (field 6) and controlling tty (field 7, 0 = none).
  const std::string probe =
      "import os\nf = open('/proc/self/stat').read().rsplit(')', 1)[1].split()\n"
      "print(os.getpid() == int(f[3]), f[4])\n"
      "try: os.open('/dev/tty', os.O_RDWR); print('has /dev/tty')\n"
      "except OSError as e: print(e.strerror)\n";
  for (const bool as_nobody : {true, false}) {
    std::vector<std::string> args = {"run", "--sandbox", id("nocty")};
    if (as_nobody) args.insert(args.end(), {"--user", "nobody"});
    args.insert(args.end(), {"--", "/usr/bin/python3", "-c", probe});
    const auto r = launch(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "True 0\nNo such device or address\n") << (as_nobody ? "nobody" : "root");
  }
}

TEST_F(Launcher, SigtermTearsDownAndExits143) {
  start_daemon();
  const std::string sb = id("term");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(),
              {"sh", "-c",
               "\"$0\" --config \"$1\" run --sandbox \"$2\" -- sleep 30 & p=$!; "
               "until grep -q '\"ready\":true' \"$3\" 2>/dev/null; do sleep 0.05; done; "
               "kill -TERM $p; wait $p; echo $?",
               launch_binary(), config_, sb, state});
  const auto r = run_command(argv, std::chrono::seconds(20));
  EXPECT_EQ(r.out, "143\n") << r.err;
  expect_nothing_left(sb);
}

TEST_F(Launcher, GcRemovesWhatACrashedLauncherLeft) {
  start_daemon();
  const std::string sb = id("crash");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(),
              {"sh", "-c",
               "\"$0\" --config \"$1\" run --sandbox \"$2\" -- sleep 2 & p=$!; "
               "until grep -q '\"ready\":true' \"$3\" 2>/dev/null; do sleep 0.05; done; "
               "kill -KILL $p; wait $p; echo $?",
               launch_binary(), config_, sb, state});
  EXPECT_EQ(run_command(argv, std::chrono::seconds(20)).out, "137\n");
  EXPECT_EQ(launch({"list"}).out, sb + " 10.201.0.2 sg-" + sb + " stale\n");
  // Orphans with no state file at all, as a launcher that lost its state file would leave
  // them: a table, a link and a launcher drop-in, each with this state_dir's mark (made before
  // the thing itself).
  ASSERT_EQ(in_host({"nft", "add", "table", "inet", "sandgate_7"}).exit_code, 0);
  ASSERT_EQ(
      in_host({"ip", "link", "add", "sg7h", "type", "veth", "peer", "name", "sgt7"}).exit_code, 0);
  const std::string orphan = sandboxes_dir() + "/orphan.toml";
  dir_.write("sbx/orphan.toml",
             "# written by sandgate-launch\nid = \"orphan\"\nsources = [\"10.201.0.30\"]\n");
  fs::create_directories(state_dir() + "/links");
  fs::create_directories(state_dir() + "/tables");
  fs::create_directories(state_dir() + "/dropins");
  dir_.write("state/links/sg7h", "");
  dir_.write("state/tables/sandgate_7", "");
  dir_.write("state/dropins/orphan.toml", "");
  // What this state_dir did not make stays: another config's (no mark here) and a hand-made
  // drop-in.
  ASSERT_EQ(in_host({"nft", "add", "table", "inet", "sandgate_8"}).exit_code, 0);
  ASSERT_EQ(
      in_host({"ip", "link", "add", "sg8h", "type", "veth", "peer", "name", "sgt8"}).exit_code, 0);
  dir_.write("sbx/other.toml",
             "# written by sandgate-launch\nid = \"other\"\nsources = [\"10.201.0.38\"]\n");
  dir_.write("sbx/hand.toml", "id = \"hand\"\nsources = [\"10.77.0.34\"]\n");
  const auto r = launch({"gc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "removed sandbox " + sb +
                       "\nremoved link sg7h\nremoved nft table inet sandgate_7\n"
                       "removed drop-in " +
                       orphan + "\n");
  EXPECT_EQ(host_tables(), std::vector<std::string>{"sandgate_8"});
  auto links = host_links();
  std::sort(links.begin(), links.end());
  EXPECT_EQ(links, (std::vector<std::string>{"lo", "sg8h", "sgt8"}));
  EXPECT_TRUE(fs::exists(sandboxes_dir() + "/other.toml"));
  ASSERT_EQ(in_host({"nft", "delete", "table", "inet", "sandgate_8"}).exit_code, 0);
  ASSERT_EQ(in_host({"ip", "link", "del", "sg8h"}).exit_code, 0);
  fs::remove(sandboxes_dir() + "/hand.toml");
  fs::remove(sandboxes_dir() + "/other.toml");
  expect_nothing_left(sb);
}

// Issue 9 item 10: two launcher configs (their own state_dirs, the same pool and daemon) on one
// host. The second takes the slots the first does not use, and gc of either removes nothing
// of the other's live sandbox.
TEST_F(Launcher, TwoConfigsOnOneHostKeepApart) {
  start_daemon();
  const std::string first = config_;
  const std::string other_state = dir_.file("state2");
  const std::string second = dir_.write(
      "second.toml", std::regex_replace(read_file(first), std::regex("state_dir = \"[^\"]*\""),
                                        "state_dir = \"" + other_state + "\""));
  const std::string a = id("first");
  const std::string b = id("second");
  auto r = launch({"up", "--sandbox", a});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, a + " 10.201.0.2 sg-" + a + "\n");
  config_ = second;
  r = launch({"up", "--sandbox", b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, b + " 10.201.0.6 sg-" + b + "\n");
  // A `run` of the second config while both are up.
  r = launch({"run", "--sandbox", id("third"), "--", "sh", "-c",
              "ip -4 -o addr show scope global | awk '{print $2, $4}'"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sg2s 10.201.0.10/30\n");
  const auto works = [&](const std::string& sandbox) {
    return launch(
               {"exec", "--sandbox", sandbox, "--", "curl", "-sS", "-m", "5", "http://192.0.2.1/"})
        .out;
  };
  const auto intact = [&](const std::string& config, const std::string& sandbox,
                          const std::string& link, const std::string& table) {
    SCOPED_TRACE(sandbox);
    const auto links = host_links();
    const auto tables = host_tables();
    EXPECT_NE(std::find(links.begin(), links.end(), link), links.end());
    EXPECT_NE(std::find(tables.begin(), tables.end(), table), tables.end());
    EXPECT_TRUE(fs::exists(sandboxes_dir() + "/" + sandbox + ".toml"));
    config_ = config;
    EXPECT_EQ(launch({"list"}).out, sandbox + " " + (link == "sg0h" ? "10.201.0.2" : "10.201.0.6") +
                                        " sg-" + sandbox + " ready\n");
    // The daemon's denial names the sandbox: it is wired and the daemon knows it.
    EXPECT_NE(works(sandbox).find("\"sandbox\":\"" + sandbox + "\""), std::string::npos);
  };
  config_ = second;
  r = launch({"gc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  intact(first, a, "sg0h", "sandgate_0");
  config_ = first;
  r = launch({"gc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  intact(second, b, "sg1h", "sandgate_1");
  config_ = first;
  EXPECT_EQ(launch({"down", "--sandbox", a}).exit_code, 0);
  config_ = second;
  EXPECT_EQ(launch({"down", "--sandbox", b}).exit_code, 0);
  expect_nothing_left(a);
  expect_nothing_left(b);
}

// Issue 9 item 13: a network namespace alone leaves the host's Unix sockets under /run (nscd,
// systemd-resolved's varlink, D-Bus) reachable. The command gets a private /run; --share-run
// gives it the host's.
TEST_F(Launcher, HostUnixSocketsUnderRunAreOutOfReach) {
  start_daemon();
  // The test's own socket under the host's /run (in whatever mount namespace the test runs:
  // the launcher it starts sees the same).
  const std::string run_dir = "/run/sandgate-test-" + std::to_string(::getpid());
  fs::create_directories(run_dir);
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { fs::remove_all(path); }
  } remove_dir{run_dir}, remove_written{run_dir + ".written"};
  ::chmod(run_dir.c_str(), 0755);
  const std::string path = run_dir + "/sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::chmod(path.c_str(), 0777);
  ASSERT_EQ(::listen(listener, 16), 0);
  const std::string probe =
      "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
      "try: s.connect(sys.argv[1]); print('connected')\n"
      "except OSError as e: print(e.strerror)\n";
  struct Row {
    std::string name;
    std::vector<std::string> flags;
    std::string expected;
  };
  const Row rows[] = {
      {"root", {}, "No such file or directory\n"},
      {"nobody", {"--user", "nobody"}, "No such file or directory\n"},
      {"root --share-run", {"--share-run"}, "connected\n"},
      {"nobody --share-run", {"--user", "nobody", "--share-run"}, "connected\n"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<std::string> args = {"run", "--sandbox", id("run")};
    args.insert(args.end(), row.flags.begin(), row.flags.end());
    args.insert(args.end(), {"--", "/usr/bin/python3", "-c", probe, path});
    const auto r = launch(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, row.expected);
  }
  // The private /run is empty but for /run/lock; resolv.conf still names the daemon, and the
  // sandbox's interfaces are what /sys shows.
  const auto r = launch({"run", "--sandbox", id("run"), "--", "sh", "-c",
                         "ls -A /run; cat /etc/resolv.conf; ls /sys/class/net | sort; "
                         "stat -c %a /run/lock; touch \"$0\" && echo written",
                         run_dir + ".written"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "lock\nnameserver 10.201.0.1\nlo\nsg0s\n1777\nwritten\n");
  EXPECT_FALSE(fs::exists(run_dir + ".written"));  // written to the private /run only
  // exec gets the same.
  const std::string sb = id("exec");
  ASSERT_EQ(launch({"up", "--sandbox", sb}).exit_code, 0);
  EXPECT_EQ(launch({"exec", "--sandbox", sb, "--", "python3", "-c", probe, path}).out,
            "No such file or directory\n");
  EXPECT_EQ(
      launch({"exec", "--sandbox", sb, "--share-run", "--", "python3", "-c", probe, path}).out,
      "connected\n");
  EXPECT_EQ(launch({"down", "--sandbox", sb}).exit_code, 0);
  ::close(listener);
  expect_nothing_left(sb);
}

// THREATS 8 (a socket around the proxy), by a door no route or nft rule sees: a socket keeps
// the network namespace it was made in. Whatever the launcher inherited from whoever started it
// (an agent runner's connection to its host, a socket to a host service) must not reach the
// command. Here: a TCP connection in the test's own namespace, inheritable, given to the
// launcher as descriptor 7.
TEST_F(Launcher, CommandInheritsNoDescriptorButItsOwnThree) {
  start_daemon();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int outside = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(outside, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const int far_end = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  ASSERT_GE(far_end, 0);
  // The sandbox's command tries the descriptor as a socket and says how far it got.
  const std::string send_out =
      "import socket\ntry:\n  socket.socket(fileno=7).sendall(b'out')\n  print('sent')\n"
      "except OSError as e: print(e.strerror)\n";
  // Descriptor 7 without O_CLOEXEC in the launcher, which the wrapper then runs.
  const std::vector<std::string> give_7 = {
      "python3", "-c",
      "import os, sys\nos.dup2(int(sys.argv[1]), 7)\nos.execvp(sys.argv[2], sys.argv[2:])\n",
      std::to_string(outside)};
  const auto fd_flags = ::fcntl(outside, F_GETFD);
  ASSERT_EQ(::fcntl(outside, F_SETFD, 0), 0);  // through run_command's fork to the wrapper
  const std::string sb = id("exec");
  ASSERT_EQ(launch({"up", "--sandbox", sb}).exit_code, 0);
  struct Row {
    std::string name;
    std::vector<std::string> args;
  };
  const Row rows[] = {
      {"run", {"run", "--sandbox", id("run"), "--", "python3", "-c", send_out}},
      {"run --user nobody",
       {"run", "--sandbox", id("run"), "--user", "nobody", "--", "python3", "-c", send_out}},
      {"exec", {"exec", "--sandbox", sb, "--", "python3", "-c", send_out}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const auto r = launch(row.args, give_7);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find_first_of("\r\n")), "Bad file descriptor") << r.out;
  }
  ::fcntl(outside, F_SETFD, fd_flags);
  char byte = 0;
  EXPECT_EQ(::recv(far_end, &byte, 1, 0), -1) << "a byte from inside the sandbox arrived outside";
  EXPECT_EQ(launch({"down", "--sandbox", sb}).exit_code, 0);
  for (const int fd : {far_end, outside, listener}) ::close(fd);
  expect_nothing_left(sb);
}

// Where /etc/resolv.conf is a symlink into /run (systemd-resolved's stub, resolvconf), the
// private /run holds the file it names, saying what the sandbox's resolv.conf says. The
// symlink is made in an overlay on /etc in a mount namespace of the test's own.
TEST_F(Launcher, ResolvConfSymlinkIntoRunStillNamesTheDaemon) {
  start_daemon();
  fs::create_directories(dir_.path() / "upper");
  fs::create_directories(dir_.path() / "work");
  const std::string script =
      "set -e; mount -t overlay overlay -o lowerdir=/etc,upperdir=\"$0/upper\",workdir=\"$0/work\" "
      "/etc; ln -sf ../run/systemd/resolve/stub-resolv.conf /etc/resolv.conf; exec \"$@\"";
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(), {"unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           dir_.path().string(), launch_binary(), "--config", config_, "run",
                           "--sandbox", id("stub"), "--", "sh", "-c",
                           "readlink /etc/resolv.conf; cat /etc/resolv.conf; ls -A /run "
                           "/run/systemd/resolve"});
  const auto r = run_command(argv, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      r.out,
      "../run/systemd/resolve/stub-resolv.conf\nnameserver 10.201.0.1\n/run:\nlock\nsystemd\n\n"
      "/run/systemd/resolve:\nstub-resolv.conf\n");
}

// Issue 9 item 14: a command that cannot be run exits 127 with the launcher's prefix, before
// anything is set up.
TEST_F(Launcher, MissingCommandExits127) {
  start_daemon();
  for (const bool as_nobody : {false, true}) {
    SCOPED_TRACE(as_nobody ? "nobody" : "root");
    const std::string sb = id("missing");
    std::vector<std::string> args = {"run", "--sandbox", sb};
    if (as_nobody) args.insert(args.end(), {"--user", "nobody"});
    args.insert(args.end(), {"--", "no-such-command-here", "x"});
    auto r = launch(args, {"env", "PATH=/usr/bin:/bin"});
    EXPECT_EQ(r.exit_code, 127);
    EXPECT_EQ(r.err,
              "sandgate-launch: command not found: no-such-command-here (not in PATH "
              "/usr/bin:/bin)\n");
    args[args.size() - 2] = "/nonexistent/cmd";
    r = launch(args);
    EXPECT_EQ(r.exit_code, 127);
    EXPECT_EQ(r.err, "sandgate-launch: cannot run /nonexistent/cmd: no such executable file\n");
    EXPECT_FALSE(fs::exists(state_dir() + "/sandboxes/" + sb + ".json"));
    EXPECT_EQ(host_links(), std::vector<std::string>{"lo"});
    EXPECT_TRUE(fs::is_empty(sandboxes_dir()));
  }
  const std::string sb = id("missing");
  ASSERT_EQ(launch({"up", "--sandbox", sb}).exit_code, 0);
  const auto r = launch({"exec", "--sandbox", sb, "--user", "nobody", "--", "no-such-command-here"},
                        {"env", "PATH=/usr/bin:/bin"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err,
            "sandgate-launch: command not found: no-such-command-here (not in PATH "
            "/usr/bin:/bin)\n");
  EXPECT_EQ(launch({"down", "--sandbox", sb}).exit_code, 0);
}

// Issue 9 item 14: an attached namespace (--netns, not the launcher's) is given back as it was:
// IPv6 settings and lo as before, no link of the sandbox left.
TEST_F(Launcher, AttachedNamespaceIsPutBackAtTeardown) {
  start_daemon();
  const std::string ns = "sgt-" + unique_suffix() + "-att";
  ASSERT_EQ(run_command({"ip", "netns", "add", ns}).exit_code, 0);
  struct RemoveNs {
    std::string name;
    ~RemoveNs() { run_command({"ip", "netns", "del", name}); }
  } remove_ns{ns};
  const auto settings = [&] {
    return run_command({"ip", "netns", "exec", ns, "sh", "-c",
                        "cat /proc/sys/net/ipv6/conf/all/disable_ipv6 "
                        "/proc/sys/net/ipv6/conf/default/disable_ipv6; ip -o link show | "
                        "awk '{print $2, $3}'"})
        .out;
  };
  ASSERT_EQ(run_command({"ip", "netns", "exec", ns, "sh", "-c",
                         "echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 0 > "
                         "/proc/sys/net/ipv6/conf/default/disable_ipv6"})
                .exit_code,
            0);
  const std::string before = settings();
  ASSERT_EQ(before, "0\n0\nlo: <LOOPBACK>\n");
  // run: IPv6 is off inside while it runs, and back afterwards.
  auto r = launch({"run", "--sandbox", id("att"), "--netns", "/run/netns/" + ns, "--", "cat",
                   "/proc/sys/net/ipv6/conf/all/disable_ipv6"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");
  EXPECT_EQ(settings(), before);
  // up and down.
  const std::string sb = id("att");
  r = launch({"up", "--sandbox", sb, "--netns", "/run/netns/" + ns});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(settings(), before);
  EXPECT_EQ(launch({"down", "--sandbox", sb}).exit_code, 0);
  EXPECT_EQ(settings(), before);
  EXPECT_EQ(host_links(), std::vector<std::string>{"lo"});
  EXPECT_EQ(host_tables(), std::vector<std::string>{});
}

// Issue 9 item 14: a config with relative paths (as config/sandgate.toml has: sandboxes_dir =
// "sandboxes.d"), given as a relative --config, works from wherever the launcher runs next.
TEST_F(Launcher, RelativeConfigPathsHoldFromAnyDirectory) {
  start_daemon();
  std::string text = read_file(config_);
  text =
      std::regex_replace(text, std::regex("sandboxes_dir = \"[^\"]*\""), "sandboxes_dir = \"sbx\"");
  text = std::regex_replace(text, std::regex("state_dir = \"[^\"]*\""), "state_dir = \"state\"");
  dir_.write("relative.toml", text);
  const std::string sb = id("rel");
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(),
              {"sh", "-c", "cd \"$0\" && exec \"$1\" --config relative.toml up --sandbox \"$2\"",
               dir_.path().string(), launch_binary(), sb});
  auto r = run_command(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(sandboxes_dir() + "/" + sb + ".toml"));
  EXPECT_EQ(launch({"list"}).out, sb + " 10.201.0.2 sg-" + sb + " ready\n");
  // down from another directory (the test's), through the absolute path.
  config_ = dir_.file("relative.toml");
  r = launch({"down", "--sandbox", sb});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_nothing_left(sb);
}

// Issue 9 item 14: the denial's suggestion for a launcher-made sandbox names what the operator
// can edit: its profile, or the launcher's --allow; not [sandboxes.ID], which does not exist
// (its drop-in is the launcher's, rewritten and removed by it).
TEST_F(Launcher, DenialSuggestionNamesTheProfileOrTheLaunchersFlag) {
  start_daemon();
  const std::string with = id("prof");
  const std::string without = id("bare");
  ASSERT_EQ(launch({"up", "--sandbox", with, "--profile", "default"}).exit_code, 0);
  ASSERT_EQ(launch({"up", "--sandbox", without}).exit_code, 0);
  const auto suggestion = [&](const std::string& sandbox, const std::string& url) {
    const auto r = launch({"exec", "--sandbox", sandbox, "--", "curl", "-sS", "-m", "5",
                           "--resolve", "denied.test:80:192.0.2.1", url});
    boost::system::error_code ec;
    const auto body = boost::json::parse(r.out, ec);
    if (ec || !body.is_object()) return "no JSON body: " + r.out + r.err;
    const auto* line = body.as_object().if_contains("suggestion");
    return line != nullptr && line->is_string() ? std::string(line->as_string()) : std::string();
  };
  EXPECT_EQ(suggestion(with, "http://denied.test/"),
            "[profiles.default] allow = [\"denied.test:80\"]");
  EXPECT_EQ(suggestion(without, "http://denied.test/"),
            "sandgate-launch --allow \"denied.test:80\"");
  EXPECT_EQ(suggestion(without, "http://192.0.2.1/"),
            "[profiles.NAME] allow_cidrs = [\"192.0.2.1/32\"] (sandgate-launch --profile NAME)");
  EXPECT_EQ(launch({"down", "--sandbox", with}).exit_code, 0);
  EXPECT_EQ(launch({"down", "--sandbox", without}).exit_code, 0);
}

// Pids of the processes in a sandbox's namespace (ip netns pids), "" when none.
std::string netns_pids(const std::string& sandbox) {
  return run_command({"ip", "netns", "pids", "sg-" + sandbox}).out;
}

// Polls (every 20 ms) until the sandbox's namespace has no process, up to `bound`.
bool netns_empties_within(const std::string& sandbox, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!netns_pids(sandbox).empty()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A SIGKILLed `run` launcher cannot forward anything or tear down, but the command (as
// nobody, which setpriv's uid change strips of any parent-death signal) and its background
// children must not outlive it.
TEST_F(Launcher, KilledLauncherTakesItsCommandWithIt) {
  start_daemon();
  const std::string sb = id("orphan");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(),
              {"sh", "-c",
               "\"$0\" --config \"$1\" run --sandbox \"$2\" --user nobody -- sh -c "
               "'trap \"\" HUP; sleep 300 & exec sleep 301' & p=$!; "
               "until grep -q '\"ready\":true' \"$3\" 2>/dev/null; do sleep 0.05; done; "
               "until [ -n \"$(ip netns pids sg-$2)\" ]; do sleep 0.05; done; "
               "kill -KILL $p; wait $p; echo $?",
               launch_binary(), config_, sb, state});
  EXPECT_EQ(run_command(argv, std::chrono::seconds(20)).out, "137\n");
  EXPECT_TRUE(netns_empties_within(sb, std::chrono::seconds(3))) << netns_pids(sb);
  EXPECT_EQ(launch({"gc"}).exit_code, 0);
  expect_nothing_left(sb);
}

// gc (and down) end what is left in a dead sandbox's namespace before deleting it.
TEST_F(Launcher, GcEndsProcessesLeftInADeadSandbox) {
  start_daemon();
  const std::string sb = id("left");
  ASSERT_EQ(launch({"up", "--sandbox", sb}).exit_code, 0);
  // A process in the namespace that no launcher knows of, and a state file whose launcher
  // died: what a crash of launcher and watcher together would leave.
  std::vector<std::string> argv = host_.enter();
  argv.insert(argv.end(), {"sh", "-c",
                           "ip netns exec sg-\"$0\" setsid sleep 300 </dev/null >/dev/null 2>&1 & "
                           "until [ -n \"$(ip netns pids sg-$0)\" ]; do sleep 0.05; done",
                           sb});
  ASSERT_EQ(run_command(argv).exit_code, 0);
  ASSERT_NE(netns_pids(sb), "");
  const std::string state = state_dir() + "/sandboxes/" + sb + ".json";
  std::string json = read_file(state);
  json = std::regex_replace(json, std::regex("\"mode\":\"up\""), "\"mode\":\"run\"");
  json = std::regex_replace(json, std::regex("\"pid\":[0-9]+"), "\"pid\":999999999");
  dir_.write("state/sandboxes/" + sb + ".json", json);
  EXPECT_EQ(launch({"list"}).out, sb + " 10.201.0.2 sg-" + sb + " stale\n");
  // Found before gc deletes the namespace, which stays alive (unnamed) while a process is in it.
  const std::string pids = netns_pids(sb);
  const auto r = launch({"gc"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "removed sandbox " + sb + "\n");
  for (std::size_t at = 0; at < pids.size();) {
    const auto end = pids.find('\n', at);
    const std::string pid = pids.substr(at, end - at);
    EXPECT_FALSE(fs::exists("/proc/" + pid + "/ns/net")) << "pid " << pid << " lives on";
    at = end == std::string::npos ? pids.size() : end + 1;
  }
  expect_nothing_left(sb);
}

TEST_F(Launcher, ErrorsAreOneLineAndLeaveNothing) {
  start_daemon("10.201.0.0/29");
  const std::string a = id("a");
  const std::string b = id("b");
  ASSERT_EQ(launch({"up", "--sandbox", a}).exit_code, 0);
  ASSERT_EQ(launch({"up", "--sandbox", b}).exit_code, 0);
  struct Row {
    std::vector<std::string> args;
    std::vector<std::string> prefix;
    int exit_code;
    std::string err;
  };
  const std::string c = id("c");
  const Row rows[] = {
      {{"up", "--sandbox", c},
       {},
       1,
       "address pool 10.201.0.0/29 is exhausted (2 sandboxes); run `sandgate-launch down` on "
       "one, `sandgate-launch gc` after a crash, or widen launcher.pool"},
      {{"up", "--sandbox", a},
       {},
       1,
       "sandbox id \"" + a + "\" is in use: the launcher has it (state file " + state_dir() +
           "/sandboxes/" + a + ".json); pick another id, or run `sandgate-launch down --sandbox " +
           a + "` (or `gc` after a crash)"},
      {{"up", "--sandbox", c, "--profile", "nope"},
       {},
       2,
       "unknown profile \"nope\"; profiles in " + config_ + ": default"},
      {{"up", "--sandbox", "../x"},
       {},
       2,
       "invalid sandbox id \"../x\": use 1-64 characters of A-Z a-z 0-9 _ . - not starting with "
       "'.' or '-'"},
      {{"up", "--sandbox", c, "--allow", "exa mple.com"}, {}, 2, ""},
      {{"run", "--sandbox", c, "--", "true"},
       {"setpriv", "--reuid=65534", "--clear-groups", "--inh-caps=-all"},
       1,
       "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to manage network namespaces and nftables; "
       "run it as root"},
      // Not an empty list: the state files are root's.
      {{"list"},
       {"setpriv", "--reuid=65534", "--clear-groups", "--inh-caps=-all"},
       1,
       "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to manage network namespaces and nftables; "
       "run it as root"},
      {{"exec", "--sandbox", a, "--", "true"},
       {"setpriv", "--reuid=65534", "--clear-groups", "--inh-caps=-all"},
       1,
       "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to manage network namespaces and nftables; "
       "run it as root"},
  };
  ::chmod(dir_.path().c_str(), 0755);  // the unprivileged row reads the config
  ::chmod(daemon_->dir().path().c_str(), 0755);
  for (const Row& row : rows) {
    const auto r = launch(row.args, row.prefix);
    EXPECT_EQ(r.exit_code, row.exit_code) << row.args.back() << ": " << r.err;
    if (!row.err.empty()) {
      EXPECT_EQ(r.err, "sandgate-launch: " + row.err + "\n");
    }
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(launch({"down", "--sandbox", a}).exit_code, 0);
  EXPECT_EQ(launch({"down", "--sandbox", b}).exit_code, 0);
  expect_nothing_left(c);
  expect_nothing_left(a);
}

// As root, the launcher never runs an `ip`, `nft`, `nsenter` or `setpriv` that $PATH points at.
TEST_F(Launcher, ToolsAreNotTakenFromPath) {
  start_daemon();
  const std::string fake = dir_.file("fake-bin");
  fs::create_directories(fake);
  const std::string marker = dir_.file("fake-ran");
  for (const char* tool : {"ip", "nft", "nsenter", "setpriv"}) {
    dir_.write(std::string("fake-bin/") + tool, "#!/bin/sh\necho $0 >> " + marker + "\nexit 1\n");
    ::chmod((fake + "/" + tool).c_str(), 0755);
  }
  const std::string sb = id("path");
  const auto r = launch({"run", "--sandbox", sb, "--user", "nobody", "--", "id", "-u"},
                        {"env", "PATH=" + fake + ":/usr/sbin:/usr/bin:/sbin:/bin"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "65534\n");
  EXPECT_FALSE(fs::exists(marker)) << read_file(marker);
  EXPECT_EQ(launch({"gc"}, {"env", "PATH=" + fake}).exit_code, 0);
  EXPECT_FALSE(fs::exists(marker)) << read_file(marker);
  expect_nothing_left(sb);
}

// When the daemon's reload refuses the launcher's drop-in (here: its source address is one a
// sandbox of the daemon's own config already has, which the launcher, reading another config,
// cannot know), the launcher says the daemon's reason at once instead of waiting out
// ready_timeout_ms, and leaves nothing behind. Control: with the daemon's config (whose pool
// does not clash) the same run works.
TEST_F(Launcher, TheDaemonsRefusalIsShownAtOnce) {
  extra_tables_ = "[sandboxes.fixed]\nprofile = \"default\"\nsources = [\"10.201.0.2\"]\n";
  start_daemon("10.202.0.0/16");
  const std::string daemon_config = config_;
  const std::string sb = id("refused");
  const std::string other =
      dir_.write("other-pool.toml",
                 "sandboxes_dir = \"" + sandboxes_dir() +
                     "\"\n[listeners]\nexplicit = [\"127.0.0.1:3128\"]\ntransparent = "
                     "[\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]\nadmin = \"127.0.0.1:19090\"\n"
                     "[launcher]\nstate_dir = \"" +
                     state_dir() +
                     "\"\npool = \"10.201.0.0/16\"\nready_timeout_ms = 20000\n"
                     "[profiles.default]\nallow = [\"example.com\"]\n");
  config_ = other;
  const auto began = std::chrono::steady_clock::now();
  auto r = launch({"run", "--sandbox", sb, "--", "true"});
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.err.starts_with("sandgate-launch: the daemon did not activate sandbox \"" + sb +
                                "\": reloading its config failed (it kept the previous one): " +
                                sandboxes_dir() + "/" + sb + ".toml:"))
      << r.err;
  EXPECT_NE(r.err.find("source address \"10.201.0.2\" already identifies another sandbox"),
            std::string::npos)
      << r.err;
  EXPECT_LT(took, std::chrono::seconds(10)) << r.err;  // not ready_timeout_ms's 20 s
  expect_nothing_left(sb);

  config_ = daemon_config;
  const std::string fine = id("fine");
  r = launch({"run", "--sandbox", fine, "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_nothing_left(fine);
}

TEST_F(Launcher, NoDaemonAndReadyTimeoutRollBack) {
  start_daemon();
  const std::string sb = id("nodaemon");
  // A config naming a drop-in directory the daemon does not watch: it never activates.
  const std::string other = dir_.file("other-sbx");
  fs::create_directories(other);
  const std::string blind = dir_.write(
      "blind.toml", "sandboxes_dir = \"" + other +
                        "\"\n[listeners]\nexplicit = [\"127.0.0.1:3128\"]\ntransparent = "
                        "[\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]\nadmin = "
                        "\"127.0.0.1:19090\"\n[launcher]\nstate_dir = \"" +
                        state_dir() + "\"\nready_timeout_ms = 300\n");
  config_ = blind;
  auto r = launch({"run", "--sandbox", sb, "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sandgate-launch: the daemon did not report sandbox \"" + sb +
                       "\" active within 300 ms; check that it reads sandboxes_dir " + other +
                       " and look for a reload error in its log\n");
  EXPECT_TRUE(fs::is_empty(other));
  expect_nothing_left(sb);
  daemon_.reset();
  config_ = blind;
  r = launch({"up", "--sandbox", sb});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "sandgate-launch: no sandgate daemon answers on its admin listener "
            "127.0.0.1:19090 (Connection refused); start sandgate --config " +
                blind + " first\n");
  expect_nothing_left(sb);
}

}  // namespace
}  // namespace sandgate::test
