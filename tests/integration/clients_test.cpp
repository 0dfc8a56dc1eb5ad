// The client matrix: real clients (curl, wget, git, Python requests and urllib, pip, apt-get,
// npm, Go's net/http, Java's HttpClient) through the explicit proxy against local origins, each
// allowed, denied and with a wrong token, asserting what the user sees (the verdict in the
// client's own output wherever it prints the status line's reason phrase) and the audit line.
// Each test runs in a private network namespace with only loopback (support/private_netns.hpp),
// so a client that tries to reach anything else (pip's index, npm's registry, apt's mirrors)
// fails instead of leaving the machine. docs/clients.md quotes what these clients print.
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/git_origin.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/private_netns.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kId = "agent-1";
const std::string kToken = "tok-agent-clients-5Qe8";
const std::string kWrongToken = "tok-stale-Zr41";
const std::string kClientsDir = SANDGATE_CLIENTS_DIR;  // tests/integration/testdata/clients

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A static site (files under `root`; a path ending in '/' serves its index.html) with git
// smart HTTP under /git/ (repositories under `git_root`/git).
std::function<OriginReply(const RecordedRequest&)> site(std::string root, std::string git_root) {
  auto git = git_http_backend(git_root);
  return [root, git](const RecordedRequest& r) {
    std::string path = r.target.substr(0, r.target.find('?'));
    if (path.rfind("/git/", 0) == 0) return git(r);
    if (path.ends_with('/')) path += "index.html";
    const fs::path file = fs::path(root) / path.substr(1);
    std::error_code ec;
    if (path.find("..") != std::string::npos || !fs::is_regular_file(file, ec)) {
      return OriginReply::with_length(404, "not found\n");
    }
    const std::string type = file.extension() == ".html"   ? "text/html"
                             : file.extension() == ""      ? "application/json"
                             : file.extension() == ".json" ? "application/json"
                                                           : "application/octet-stream";
    return OriginReply::with_length(200, read_file(file.string()), {{"Content-Type", type}});
  };
}

// Everything one test needs: a plain and a TLS origin on 127.0.0.1 serving the same site, as
// allowed.test (allowed on both ports) and denied.test (no rule names it: no_matching_rule),
// and the daemon with sandbox agent-1. Built inside the private namespace.
class World {
 public:
  World() {
    const std::string p = std::to_string(plain_.port());
    const std::string t = std::to_string(tls_.port());
    SandgateOptions options;
    options.tables = R"(
[limits]
idle_timeout_ms = 10000

[dns.hosts]
"allowed.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]

[sandboxes.agent-1]
token = ")" + kToken +
                     R"("
allow = ["allowed.test:)" +
                     p + R"(", "allowed.test:)" + t + R"("]
allow_cidrs = ["127.0.0.1/32"]
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
    put("site/hello", "hello from the origin\n");
    const auto handler = site(dir_.file("site"), repos_.path().string());
    plain_.set_handler(handler);
    tls_.set_handler(handler);
  }

  SandgateProcess& daemon() { return *daemon_; }
  // Writes a file under the test's directory, making its parents.
  std::string put(const std::string& name, const std::string& content) const {
    fs::create_directories(fs::path(dir_.file(name)).parent_path());
    return dir_.write(name, content);
  }
  const TempDir& dir() const { return dir_; }
  HttpOrigin& plain() { return plain_; }
  std::string ca() const { return ca_; }
  std::string repos() const { return repos_.path().string(); }
  std::string proxy(const std::string& token = kToken) const {
    return daemon_->proxy_url(kId, token);
  }
  std::string proxy_port() const { return std::to_string(daemon_->explicit_port()); }
  // http(s)://HOST:PORT for the plain or the TLS origin.
  std::string base(bool allowed, bool https) const {
    const std::string host = allowed ? "allowed.test" : "denied.test";
    return (https ? "https://" : "http://") + host + ":" +
           std::to_string(https ? tls_.port() : plain_.port());
  }
  std::string authority(bool allowed, bool https) const {
    return base(allowed, https).substr(https ? 8 : 7);
  }
  // The reason phrase of the denial of denied.test on the plain or the TLS port.
  std::string denial_phrase(bool https) const {
    return "SANDBOX_NETWORK_DENIED " + authority(false, https) +
           " for sandbox agent-1 (no_matching_rule; not retryable)";
  }
  std::string auth_phrase(bool https) const {
    // A wrong token: told as invalid_credentials (an unknown id looks the same).
    return "PROXY_AUTH_REQUIRED " + authority(true, https) +
           " (invalid_credentials; not retryable)";
  }
  std::size_t lines() const { return daemon_->audit_lines().size(); }

  // The audit line of the refusal of denied.test since line `from`: for plain HTTP with the
  // method and the path (never the query).
  ::testing::AssertionResult denied_line(std::size_t from, bool https, const std::string& method,
                                         const std::string& path) const {
    const auto line = daemon_->wait_audit(
        [](const boost::json::object& l) {
          return json_string(l, "event.code") == "SANDBOX_NETWORK_DENIED";
        },
        5000ms, from);
    if (auto r = AuditLineIs(line, "SANDBOX_NETWORK_DENIED", "no_matching_rule", kId); !r) {
      return r;
    }
    const std::string text = boost::json::serialize(*line);
    if (json_string(*line, "destination.domain") != "denied.test" ||
        json_string(*line, "network.protocol") != (https ? "connect" : "http") ||
        json_int(*line, "http.response.status_code") != 403) {
      return ::testing::AssertionFailure() << "not the expected refusal: " << text;
    }
    if (!https && (json_string(*line, "http.request.method") != method ||
                   json_string(*line, "url.path") != path)) {
      return ::testing::AssertionFailure() << "no " << method << " " << path << ": " << text;
    }
    if (has(text, "?") || has(text, kToken)) {
      return ::testing::AssertionFailure() << "a query or the token in the line: " << text;
    }
    return ::testing::AssertionSuccess();
  }

  // The 407 line of a wrong token for agent-1 since line `from` (named, never the token).
  ::testing::AssertionResult wrong_token_line(std::size_t from) const {
    const auto line = daemon_->wait_audit(
        [](const boost::json::object& l) {
          return json_string(l, "event.code") == "PROXY_AUTH_REQUIRED" &&
                 json_string(l, "event.reason") == "wrong_token";
        },
        5000ms, from);
    if (auto r = AuditLineIs(line, "PROXY_AUTH_REQUIRED", "wrong_token", kId); !r) return r;
    const std::string text = daemon_->audit_text();
    if (has(text, kWrongToken) || has(text, kToken)) {
      return ::testing::AssertionFailure() << "a token in the audit log";
    }
    return ::testing::AssertionSuccess();
  }

  // A line of an allowed exchange since `from`: a forwarded request (http) or a finished
  // tunnel (https).
  ::testing::AssertionResult allowed_line(std::size_t from, bool https) const {
    const auto line = daemon_->wait_audit(
        [https](const boost::json::object& l) {
          return json_string(l, "event.code") == (https ? "connection_closed" : "http_request") &&
                 json_string(l, "event.outcome") == "success" &&
                 json_string(l, "destination.domain") == "allowed.test";
        },
        5000ms, from);
    if (!line) return ::testing::AssertionFailure() << "no allowed exchange in the log";
    if (json_string(*line, "labels.sandbox_id") != kId) {
      return ::testing::AssertionFailure() << boost::json::serialize(*line);
    }
    return ::testing::AssertionSuccess();
  }

  // Whether a 407 challenge (no credentials sent) was logged since `from`, as such.
  bool challenged(std::size_t from) const {
    return daemon_
        ->wait_audit(
            [](const boost::json::object& l) {
              return json_string(l, "event.code") == "PROXY_AUTH_REQUIRED" &&
                     json_string(l, "event.reason") == "no_credentials" &&
                     json_string(l, "event.outcome") == "unknown";
            },
            3000ms, from)
        .has_value();
  }

 private:
  TempDir dir_;
  TempDir repos_;
  TestCertificate cert_ = make_self_signed_certificate({"allowed.test", "denied.test"}, {});
  std::string ca_ = dir_.write("origin.pem", cert_.cert_pem);
  HttpOrigin plain_;
  HttpOrigin tls_{"127.0.0.1", 0, cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

// Appends what a client printed to $SANDGATE_CLIENTS_SHOW, when set (for docs/clients.md).
void show(const std::string& what, const std::string& out) {
  const char* path = std::getenv("SANDGATE_CLIENTS_SHOW");
  if (path == nullptr || *path == '\0') return;
  std::ofstream(path, std::ios::app) << "$ " << what << "\n" << out << "\n";
}

// Runs argv with a clean environment of the test's own (HOME in the test's directory, no
// proxy variables but `env`), stdout and stderr together in `out`.
CommandResult run_clean(const World& w, std::vector<std::string> env,
                        const std::vector<std::string>& argv,
                        std::chrono::milliseconds timeout = 60s) {
  std::vector<std::string> full = {"env",
                                   "-i",
                                   "PATH=/usr/local/bin:/usr/bin:/bin",
                                   "HOME=" + w.dir().file("home"),
                                   "TMPDIR=" + w.dir().file("tmp"),
                                   "LANG=C.UTF-8"};
  fs::create_directories(w.dir().file("home"));
  fs::create_directories(w.dir().file("tmp"));
  full.insert(full.end(), env.begin(), env.end());
  full.insert(full.end(), argv.begin(), argv.end());
  CommandResult r = run_command(full, timeout);
  r.out += r.err;
  std::string what;
  for (const std::string& a : argv) what += (what.empty() ? "" : " ") + a;
  show(what, r.out);
  return r;
}

#define WORLD()                \
  SANDGATE_IN_PRIVATE_NETNS(); \
  World w

TEST(Clients, Curl) {
  WORLD();
  for (const bool https : {false, true}) {
    SCOPED_TRACE(https ? "https" : "http");
    const std::vector<std::string> ca = {"--cacert", w.ca()};
    std::size_t from = w.lines();
    auto args = ca;
    args.insert(args.end(), {"-x", w.proxy(), w.base(true, https) + "/hello"});
    const auto ok = run_curl(args);
    EXPECT_EQ(ok.http_code, 200) << ok.err;
    EXPECT_EQ(ok.body, "hello from the origin\n");
    EXPECT_TRUE(w.allowed_line(from, https));

    from = w.lines();
    args = ca;
    args.insert(args.end(), {"-x", w.proxy(), w.base(false, https) + "/hello?secret=1"});
    const auto denied = run_curl(args);
    show("curl " + args.back(), denied.headers + denied.err);
    // curl prints the status line only with -i or -v; -D shows what it got.
    EXPECT_TRUE(has(denied.headers, "403 " + w.denial_phrase(https))) << denied.headers;
    if (https) {
      EXPECT_TRUE(has(denied.err, "CONNECT tunnel failed, response 403")) << denied.err;
    }
    EXPECT_TRUE(w.denied_line(from, https, "GET", "/hello"));

    from = w.lines();
    args = ca;
    args.insert(args.end(), {"-x", w.proxy(kWrongToken), w.base(true, https) + "/hello"});
    const auto wrong = run_curl(args);
    show("curl " + args.back(), wrong.headers + wrong.err);
    EXPECT_TRUE(has(wrong.headers, "407 " + w.auth_phrase(https))) << wrong.headers;
    EXPECT_TRUE(w.wrong_token_line(from));

    // --proxy-anyauth asks first without credentials: the challenge is logged as such.
    from = w.lines();
    args = ca;
    args.insert(args.end(), {"--proxy-anyauth", "-x", w.proxy(), w.base(true, https) + "/hello"});
    const auto any = run_curl(args);
    EXPECT_EQ(any.http_code, 200) << any.err;
    EXPECT_TRUE(w.challenged(from));
    EXPECT_TRUE(w.allowed_line(from, https));
  }
}

TEST(Clients, Wget) {
  WORLD();
  for (const bool https : {false, true}) {
    SCOPED_TRACE(https ? "https" : "http");
    const auto wget = [&](const std::string& token, bool allowed) {
      return run_clean(w, {},
                       {"wget", "--no-config", "--tries=1", "--timeout=10",
                        "--ca-certificate=" + w.ca(), "-e", "use_proxy=on", "-e",
                        "http_proxy=" + w.proxy(token), "-e", "https_proxy=" + w.proxy(token), "-O",
                        w.dir().file("wget.out"), w.base(allowed, https) + "/hello?q=1"});
    };
    std::size_t from = w.lines();
    const auto ok = wget(kToken, true);
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
    EXPECT_EQ(read_file(w.dir().file("wget.out")), "hello from the origin\n");
    EXPECT_TRUE(w.allowed_line(from, https));

    from = w.lines();
    const auto denied = wget(kToken, false);
    EXPECT_NE(denied.exit_code, 0);
    EXPECT_TRUE(has(denied.out, w.denial_phrase(https))) << denied.out;
    EXPECT_TRUE(w.denied_line(from, https, "GET", "/hello"));

    from = w.lines();
    const auto wrong = wget(kWrongToken, true);
    EXPECT_NE(wrong.exit_code, 0);
    EXPECT_TRUE(has(wrong.out, w.auth_phrase(https))) << wrong.out;
    EXPECT_TRUE(w.wrong_token_line(from));
  }
}

TEST(Clients, Git) {
  WORLD();
  ASSERT_EQ(make_bare_repository(w.repos() + "/git/acme/widgets.git", "README", "hi\n"), "");
  const auto git = [&](const std::string& token, const std::string& method,
                       std::vector<std::string> args) {
    std::vector<std::string> argv = {"git",
                                     "-c",
                                     "http.proxy=" + w.proxy(token),
                                     "-c",
                                     "http.proxyAuthMethod=" + method,
                                     "-c",
                                     "user.name=agent",
                                     "-c",
                                     "user.email=agent@example.test"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_clean(w, {"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"}, argv);
  };
  const std::string remote = w.base(true, false) + "/git/acme/widgets.git";
  for (const std::string method : {"anyauth", "basic"}) {
    SCOPED_TRACE(method);
    const std::string dir = w.dir().file("widgets-" + method);
    std::size_t from = w.lines();
    const auto clone = git(kToken, method, {"clone", "-q", remote, dir});
    ASSERT_EQ(clone.exit_code, 0) << clone.out;
    EXPECT_EQ(read_file(dir + "/README"), "hi\n");
    EXPECT_TRUE(w.allowed_line(from, false));
    // anyauth (git's default) asks without credentials first; the challenge is no failure.
    EXPECT_EQ(w.challenged(from), method == "anyauth");
    const auto fetch = git(kToken, method, {"-C", dir, "fetch", "-q", "origin"});
    EXPECT_EQ(fetch.exit_code, 0) << fetch.out;
    w.put("widgets-" + method + "/CHANGE-" + method, "agent was here\n");
    EXPECT_EQ(git(kToken, method, {"-C", dir, "add", "."}).exit_code, 0);
    EXPECT_EQ(git(kToken, method, {"-C", dir, "commit", "-q", "-m", "change"}).exit_code, 0);
    const auto push = git(kToken, method, {"-C", dir, "push", "-q", "origin", "HEAD:main"});
    EXPECT_EQ(push.exit_code, 0) << push.out;

    from = w.lines();
    const auto denied = git(kToken, method,
                            {"clone", "-q", w.base(false, false) + "/git/acme/widgets.git",
                             w.dir().file("denied-" + method)});
    EXPECT_NE(denied.exit_code, 0);
    // git (libcurl) shows the status code only.
    EXPECT_TRUE(has(denied.out, "The requested URL returned error: 403")) << denied.out;
    EXPECT_TRUE(w.denied_line(from, false, "GET", "/git/acme/widgets.git/info/refs"));

    from = w.lines();
    const auto wrong =
        git(kWrongToken, method, {"clone", "-q", remote, w.dir().file("wrong-" + method)});
    EXPECT_NE(wrong.exit_code, 0);
    EXPECT_TRUE(has(wrong.out, "407")) << wrong.out;
    EXPECT_TRUE(w.wrong_token_line(from));
  }
}

// One Python client script from testdata/clients.
void python_matrix(World& w, const std::string& script, const std::string& denied_text,
                   const std::string& denied_text_https) {
  for (const bool https : {false, true}) {
    SCOPED_TRACE(https ? "https" : "http");
    const auto run = [&](const std::string& token, bool allowed) {
      return run_clean(w, {},
                       {"/usr/bin/python3", kClientsDir + "/" + script,
                        w.base(allowed, https) + "/hello?q=1", w.proxy(token), w.ca()});
    };
    std::size_t from = w.lines();
    const auto ok = run(kToken, true);
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
    EXPECT_TRUE(has(ok.out, "hello from the origin")) << ok.out;
    EXPECT_TRUE(w.allowed_line(from, https));

    from = w.lines();
    const auto denied = run(kToken, false);
    EXPECT_EQ(denied.exit_code, 1) << denied.out;
    EXPECT_TRUE(has(denied.out, (https ? denied_text_https : denied_text) + w.denial_phrase(https)))
        << denied.out;
    EXPECT_TRUE(w.denied_line(from, https, "GET", "/hello"));

    from = w.lines();
    const auto wrong = run(kWrongToken, true);
    EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
    EXPECT_TRUE(has(wrong.out, w.auth_phrase(https))) << wrong.out;
    EXPECT_TRUE(w.wrong_token_line(from));
  }
}

TEST(Clients, PythonRequests) {
  WORLD();
  python_matrix(w, "get_requests.py", "403 Client Error: ", "Tunnel connection failed: 403 ");
}

TEST(Clients, PythonUrllib) {
  WORLD();
  python_matrix(w, "get_urllib.py", "HTTP Error 403: ", "Tunnel connection failed: 403 ");
}

// pip download from a simple index (PEP 503) on the origin. pip shows a refused index only at
// -vv ("Could not fetch URL ...: 403 Client Error: <phrase> ... - skipping"): at the default
// verbosity it ends with "Could not find a version". A refused file host is shown.
TEST(Clients, Pip) {
  WORLD();
  const auto wheel = [&](const std::string& name) {
    const std::string file = w.dir().file("site/packages/" + name + "-1.0-py3-none-any.whl");
    fs::create_directories(w.dir().file("site/packages"));
    const std::string dist = name + "-1.0.dist-info/";
    const auto r = run_command(
        {"/usr/bin/python3", "-c",
         "import sys, zipfile\n"
         "z = zipfile.ZipFile(sys.argv[1], 'w')\n"
         "z.writestr(sys.argv[2] + '/__init__.py', '')\n"
         "z.writestr(sys.argv[3] + 'METADATA', 'Metadata-Version: 2.1\\nName: ' + sys.argv[2] +"
         " '\\nVersion: 1.0\\n')\n"
         "z.writestr(sys.argv[3] + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\n"
         "Root-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
         "z.writestr(sys.argv[3] + 'RECORD', '')\n",
         file, name, dist});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  wheel("sandgate_hello");
  w.put("site/simple/sandgate-hello/index.html",
        "<a href=\"/packages/sandgate_hello-1.0-py3-none-any.whl\">"
        "sandgate_hello-1.0-py3-none-any.whl</a>\n");
  // Its index is allowed, its file host is not (like pypi.org allowed, a files host not).
  w.put("site/simple/sandgate-elsewhere/index.html",
        "<a href=\"" + w.base(false, false) +
            "/packages/sandgate_elsewhere-1.0-py3-none-any.whl\">"
            "sandgate_elsewhere-1.0-py3-none-any.whl</a>\n");
  const auto pip = [&](const std::string& token, bool allowed, const std::string& project,
                       std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     "-m",
                                     "pip",
                                     "download",
                                     "--no-deps",
                                     "--no-cache-dir",
                                     "--disable-pip-version-check",
                                     "--retries",
                                     "0",
                                     "--timeout",
                                     "10",
                                     "--trusted-host",
                                     "allowed.test",
                                     "--trusted-host",
                                     "denied.test",
                                     "--proxy",
                                     w.proxy(token),
                                     "--index-url",
                                     w.base(allowed, false) + "/simple/",
                                     "-d",
                                     w.dir().file("pip-out"),
                                     project + "==1.0"};
    argv.insert(argv.end(), more.begin(), more.end());
    return run_clean(w, {"PIP_CONFIG_FILE=/dev/null"}, argv);
  };
  std::size_t from = w.lines();
  const auto ok = pip(kToken, true, "sandgate-hello");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_TRUE(fs::exists(w.dir().file("pip-out/sandgate_hello-1.0-py3-none-any.whl"))) << ok.out;
  EXPECT_TRUE(w.allowed_line(from, false));

  from = w.lines();
  const auto index = pip(kToken, false, "sandgate-hello", {"-vv"});
  EXPECT_NE(index.exit_code, 0);
  EXPECT_TRUE(has(index.out, "Could not find a version that satisfies the requirement"));
  EXPECT_TRUE(has(index.out, "403 Client Error: " + w.denial_phrase(false))) << index.out;
  EXPECT_TRUE(w.denied_line(from, false, "GET", "/simple/sandgate-hello/"));

  from = w.lines();
  const auto file = pip(kToken, true, "sandgate-elsewhere");
  EXPECT_NE(file.exit_code, 0);
  EXPECT_TRUE(has(file.out, "HTTP error 403 Client Error: " + w.denial_phrase(false))) << file.out;
  EXPECT_TRUE(
      w.denied_line(from, false, "GET", "/packages/sandgate_elsewhere-1.0-py3-none-any.whl"));

  from = w.lines();
  const auto wrong = pip(kWrongToken, true, "sandgate-hello", {"-vv"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_TRUE(has(wrong.out, "407 Client Error: " + w.auth_phrase(false))) << wrong.out;
  EXPECT_TRUE(w.wrong_token_line(from));
}

// apt-get update and download against a flat repository ("deb [trusted=yes] URL ./"), every
// state and cache directory under the test's own, the host's apt.conf.d left out.
TEST(Clients, AptGet) {
  WORLD();
  const std::string root = w.dir().file("apt");
  for (const std::string d :
       {"empty", "state/lists/partial", "cache/archives/partial", "pkg/DEBIAN", "dl"}) {
    fs::create_directories(root + "/" + d);
  }
  w.put("apt/state/status", "");
  w.put("apt/apt.conf", "Dir::Etc::Parts \"" + root + "/empty\";\n");
  w.put("apt/pkg/DEBIAN/control",
        "Package: sandgate-hello\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: test <test@example.test>\nDescription: a test package\n");
  fs::create_directories(w.dir().file("site/apt"));
  ASSERT_EQ(run_command({"dpkg-deb", "--build", "-Znone", root + "/pkg",
                         w.dir().file("site/apt/sandgate-hello_1.0_all.deb")})
                .exit_code,
            0);
  const auto scan = run_command(
      {"sh", "-c",
       "cd " + w.dir().file("site/apt") + " && dpkg-scanpackages -m . /dev/null > Packages"});
  ASSERT_EQ(scan.exit_code, 0) << scan.err;
  const auto apt = [&](const std::string& token, bool allowed, const std::string& command) {
    w.put("apt/sources.list", "deb [trusted=yes] " + w.base(allowed, false) + "/apt/ ./\n");
    return run_clean(
        w, {"APT_CONFIG=" + root + "/apt.conf"},
        {"sh", "-c",
         "cd " + root + "/dl && exec apt-get -q -o Dir::Etc::SourceList=" + root +
             "/sources.list -o Dir::Etc::SourceParts=" + root + "/empty -o Dir::State=" + root +
             "/state -o Dir::State::status=" + root + "/state/status -o Dir::Cache=" + root +
             "/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o "
             "Acquire::Retries=0 -o Acquire::http::Proxy=" +
             w.proxy(token) + " " + command});
  };
  std::size_t from = w.lines();
  const auto update = apt(kToken, true, "update");
  EXPECT_EQ(update.exit_code, 0) << update.out;
  EXPECT_TRUE(has(update.out, "Get:3 " + w.base(true, false) + "/apt ./ Packages")) << update.out;
  const auto download = apt(kToken, true, "download sandgate-hello");
  EXPECT_EQ(download.exit_code, 0) << download.out;
  EXPECT_TRUE(fs::exists(root + "/dl/sandgate-hello_1.0_all.deb")) << download.out;
  EXPECT_TRUE(w.allowed_line(from, false));

  // Each of an update's refused requests has its own line, told apart by its path.
  from = w.lines();
  const auto denied = apt(kToken, false, "update");
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_TRUE(has(denied.out, "403  " + w.denial_phrase(false))) << denied.out;
  EXPECT_TRUE(w.denied_line(from, false, "GET", "/apt/./InRelease"));
  const auto packages = w.daemon().wait_audit(
      [](const boost::json::object& l) {
        return json_string(l, "event.code") == "SANDBOX_NETWORK_DENIED" &&
               json_string(l, "url.path") == "/apt/./Packages";
      },
      3000ms, from);
  EXPECT_TRUE(packages.has_value());

  from = w.lines();
  const auto wrong = apt(kWrongToken, true, "update");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_TRUE(has(wrong.out, "407  " + w.auth_phrase(false))) << wrong.out;
  EXPECT_TRUE(w.wrong_token_line(from));
}

// npm view against a registry on the origin (one packument).
TEST(Clients, Npm) {
  WORLD();
  w.put("site/npm/sandgate-hello",
        R"({"name":"sandgate-hello","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":)"
        R"({"name":"sandgate-hello","version":"1.0.0","dist":{"tarball":")" +
            w.base(true, false) + R"(/npm/sandgate-hello/-/sandgate-hello-1.0.0.tgz"}}}})");
  w.put("npmrc", "");
  const auto npm = [&](const std::string& token, bool allowed) {
    return run_clean(w,
                     {"npm_config_cache=" + w.dir().file("npm-cache"),
                      "npm_config_userconfig=" + w.dir().file("npmrc")},
                     {"npm", "--no-update-notifier", "--fetch-retries=0", "--fetch-timeout=10000",
                      "--proxy", w.proxy(token), "--registry", w.base(allowed, false) + "/npm/",
                      "view", "sandgate-hello", "version"});
  };
  std::size_t from = w.lines();
  const auto ok = npm(kToken, true);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(ok.out, "1.0.0\n");
  EXPECT_TRUE(w.allowed_line(from, false));

  from = w.lines();
  const auto denied = npm(kToken, false);
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_TRUE(has(denied.out, "npm error 403 403 " + w.denial_phrase(false) + " - GET " +
                                  w.base(false, false) + "/npm/sandgate-hello"))
      << denied.out;
  EXPECT_TRUE(w.denied_line(from, false, "GET", "/npm/sandgate-hello"));

  from = w.lines();
  const auto wrong = npm(kWrongToken, true);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_TRUE(has(wrong.out, "npm error 407 " + w.auth_phrase(false))) << wrong.out;
  EXPECT_TRUE(w.wrong_token_line(from));
}

// A Go program with net/http's default client: HTTP_PROXY / HTTPS_PROXY with credentials.
// A refused CONNECT is an error whose text is the reason phrase.
TEST(Clients, Go) {
  WORLD();
  const std::string bin = w.dir().file("go-get");
  const std::vector<std::string> go_env = {"GOCACHE=" + w.dir().file("go-cache"),
                                           "GOPATH=" + w.dir().file("go-path"), "GO111MODULE=off",
                                           "GOTOOLCHAIN=local"};
  const auto build =
      run_clean(w, go_env, {"go", "build", "-o", bin, kClientsDir + "/get.go"}, 120s);
  ASSERT_EQ(build.exit_code, 0) << build.out;
  for (const bool https : {false, true}) {
    SCOPED_TRACE(https ? "https" : "http");
    const auto get = [&](const std::string& token, bool allowed) {
      return run_clean(w,
                       {"HTTP_PROXY=" + w.proxy(token), "HTTPS_PROXY=" + w.proxy(token),
                        "SSL_CERT_FILE=" + w.ca()},
                       {bin, w.base(allowed, https) + "/hello?q=1"});
    };
    std::size_t from = w.lines();
    const auto ok = get(kToken, true);
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
    EXPECT_EQ(ok.out, "200 OK\nhello from the origin\n");
    EXPECT_TRUE(w.allowed_line(from, https));

    from = w.lines();
    const auto denied = get(kToken, false);
    EXPECT_NE(denied.exit_code, 0);
    const std::string shown =
        https ? "Get \"" + w.base(false, true) + "/hello?q=1\": " + w.denial_phrase(true)
              : "403 " + w.denial_phrase(false);
    EXPECT_TRUE(has(denied.out, shown)) << denied.out;
    EXPECT_TRUE(w.denied_line(from, https, "GET", "/hello"));

    from = w.lines();
    const auto wrong = get(kWrongToken, true);
    EXPECT_NE(wrong.exit_code, 0);
    EXPECT_TRUE(has(wrong.out, w.auth_phrase(https))) << wrong.out;
    EXPECT_TRUE(w.wrong_token_line(from));
  }
}

// Java's HttpClient (source launcher, one JVM for every case): it asks without credentials
// first and answers the 407 from its Authenticator; over CONNECT only with
// -Djdk.http.auth.tunneling.disabledSchemes= (Basic is disabled for tunnels by default).
// It has no reason phrase to show: a refusal of plain HTTP is a response with its status, a
// refused CONNECT an IOException.
TEST(Clients, JavaHttpClient) {
  WORLD();
  std::vector<std::string> argv = {"java",
                                   "-Djdk.http.auth.tunneling.disabledSchemes=",
                                   kClientsDir + "/Get.java",
                                   "127.0.0.1",
                                   w.proxy_port(),
                                   kId,
                                   w.ca()};
  for (const bool https : {false, true}) {
    for (const auto& [allowed, token] : std::vector<std::pair<bool, std::string>>{
             {true, kToken}, {false, kToken}, {true, kWrongToken}}) {
      argv.push_back(w.base(allowed, https) + "/hello?q=1");
      argv.push_back(token);
    }
  }
  const std::size_t from = w.lines();
  const auto r = run_clean(w, {}, argv, 120s);
  // The output of each case, after its "== URL" line.
  std::vector<std::string> cases;
  for (std::size_t at = r.out.find("== "); at != std::string::npos;) {
    const std::size_t next = r.out.find("\n== ", at);
    cases.push_back(r.out.substr(at, next == std::string::npos ? next : next - at));
    at = next == std::string::npos ? next : next + 1;
  }
  ASSERT_EQ(cases.size(), 6u) << r.out;
  const auto result = [&](std::size_t i) { return cases[i]; };
  for (const bool https : {false, true}) {
    SCOPED_TRACE(https ? "https" : "http");
    const std::size_t base = https ? 3 : 0;
    EXPECT_TRUE(has(result(base), "status 200\nhello from the origin")) << r.out;
    const std::string denied = result(base + 1);
    if (https) {
      EXPECT_TRUE(has(denied, "java.io.IOException: Tunnel failed, got: 403")) << denied;
    } else {
      EXPECT_TRUE(has(denied, "status 403\nx-sandgate-error SANDBOX_NETWORK_DENIED")) << denied;
    }
    EXPECT_TRUE(has(result(base + 2), "too many authentication attempts")) << r.out;
  }
  EXPECT_TRUE(w.challenged(from));
  EXPECT_TRUE(w.allowed_line(from, false));
  EXPECT_TRUE(w.allowed_line(from, true));
  EXPECT_TRUE(w.denied_line(from, false, "GET", "/hello"));
  EXPECT_TRUE(w.wrong_token_line(from));
  // Without the property Java never offers Basic to a CONNECT's 407: it hands the 407 over.
  const auto plain_java = run_clean(w, {},
                                    {"java", kClientsDir + "/Get.java", "127.0.0.1", w.proxy_port(),
                                     kId, w.ca(), w.base(true, true) + "/hello", kToken},
                                    120s);
  EXPECT_NE(plain_java.exit_code, 0);
  EXPECT_TRUE(has(plain_java.out, "status 407\nx-sandgate-error PROXY_AUTH_REQUIRED"))
      << plain_java.out;
  const auto tunnel_denied = w.daemon().wait_audit(
      [](const boost::json::object& l) {
        return json_string(l, "event.code") == "SANDBOX_NETWORK_DENIED" &&
               json_string(l, "network.protocol") == "connect";
      },
      3000ms, from);
  EXPECT_TRUE(tunnel_denied.has_value());
}

}  // namespace
}  // namespace sandgate::test
