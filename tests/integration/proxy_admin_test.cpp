// The admin listener (/healthz, /readyz, /metrics, /sandboxes), metrics that move with traffic
// and pass `promtool check metrics`, and no secret in any log line, metric or error body.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

const std::string kToken1 = "tok-admin-one-Jx3tQ9";
const std::string kToken2 = "tok-admin-two-Gm6rZ4";

class ProxyAdmin : public ::testing::Test {
 protected:
  void SetUp() override {
    SandgateOptions options;
    options.audit_to_file = true;  // the `[log] audit = PATH` form
    options.tables = R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]

[profiles.local]
allow = ["origin.test:)" +
                     std::to_string(origin_.port()) + R"("]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.sb1]
profile = "local"
token = ")" + kToken1 +
                     R"("

[sandboxes.sb2]
profile = "local"
token = ")" + kToken2 +
                     R"("
)";
    tables_ = options.tables;
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::optional<HttpResponse> admin(const std::string& path, const std::string& method = "GET") {
    RawClient c(daemon_->admin_port());
    c.send(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    return c.read_response(3000ms, method == "HEAD" ? ResponseTo::head : ResponseTo::other);
  }
  std::string metrics() {
    const auto r = admin("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->body : std::string();
  }
  std::string authority() const { return "origin.test:" + std::to_string(origin_.port()); }

  // One request on a fresh connection; returns the response.
  HttpResponse request(const std::string& bytes) {
    RawClient c(daemon_->explicit_port());
    c.send(bytes);
    auto r = c.read_response();
    EXPECT_TRUE(r);
    return r ? *r : HttpResponse{};
  }

  HttpOrigin origin_;
  std::unique_ptr<SandgateProcess> daemon_;
  std::string tables_;
};

TEST_F(ProxyAdmin, HealthAndReadinessAnswer200) {
  auto r = admin("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  r = admin("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ready\n");
  r = admin("/nothing-here");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = admin("/metrics", "POST");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
}

TEST_F(ProxyAdmin, SandboxesAreListed) {
  auto r = admin("/sandboxes");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto list = parse_object(r->body);
  ASSERT_TRUE(list) << r->body;
  std::set<std::string> ids;
  for (const auto& v : json_at(*list, "sandboxes")->as_array())
    ids.insert(std::string(v.as_string()));
  EXPECT_EQ(ids, (std::set<std::string>{"sb1", "sb2"}));

  r = admin("/sandboxes/sb1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto one = parse_object(r->body);
  ASSERT_TRUE(one) << r->body;
  EXPECT_EQ(json_string(*one, "id"), "sb1");
  EXPECT_EQ(json_string(*one, "profile"), "local");

  r = admin("/sandboxes/nobody");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

// GET /sandboxes/ID says how the config's reloads went, so that a launcher waiting for its
// sandbox learns at once that the daemon refused the config (docs/launcher.md): `failed` with
// the daemon's error lines after a bad reload, cleared by the next good one.
TEST_F(ProxyAdmin, SandboxStatusCarriesTheLastReloadsErrors) {
  auto reload_of = [&](const std::string& path) {
    const auto r = admin(path);
    EXPECT_TRUE(r);
    const auto doc = r ? parse_object(r->body) : std::nullopt;
    EXPECT_TRUE(doc) << (r ? r->body : "");
    return doc ? doc->at("reload").as_object() : boost::json::object{};
  };
  auto status = reload_of("/sandboxes/sb1");
  EXPECT_EQ(status.at("failed"), false);
  EXPECT_EQ(status.at("errors"), boost::json::array{});
  const auto started = status.at("started").as_int64();

  std::string error;
  EXPECT_FALSE(daemon_->reload(tables_ + "\n[sandboxes.broken]\nallow = [\"x.test\"]\n", &error));
  status = reload_of("/sandboxes/nobody");  // 404s carry it too
  EXPECT_EQ(status.at("failed"), true);
  EXPECT_GT(status.at("started").as_int64(), started);
  EXPECT_EQ(status.at("finished"), status.at("started"));
  ASSERT_FALSE(status.at("errors").as_array().empty());
  EXPECT_NE(std::string(status.at("errors").as_array()[0].as_string()).find("sandboxes.broken"),
            std::string::npos)
      << boost::json::serialize(status);
  // The tokens of the config never appear.
  EXPECT_EQ(boost::json::serialize(status).find(kToken1), std::string::npos);

  ASSERT_TRUE(daemon_->reload(tables_, &error)) << error;  // control
  status = reload_of("/sandboxes/sb1");
  EXPECT_EQ(status.at("failed"), false);
  EXPECT_EQ(status.at("errors"), boost::json::array{});
}

TEST_F(ProxyAdmin, MetricsMoveWithTrafficAndPassPromtool) {
  const std::string before = metrics();
  const auto value = [](const std::string& text, const std::string& name,
                        const std::map<std::string, std::string>& labels) {
    return metric_value(text, name, labels).value_or(-1);
  };
  EXPECT_EQ(value(before, "sandgate_denials_total", {{"reason", "no_matching_rule"}}), 0);
  EXPECT_GE(value(before, "sandgate_build_info", {}), 1);

  EXPECT_EQ(request(proxy_get(authority(), "/", "sb1", kToken1)).status, 200);
  EXPECT_EQ(request(proxy_get("denied.test:80", "/", "sb1", kToken1)).status, 403);
  EXPECT_EQ(request(proxy_get(authority(), "/", "sb1", "wrong")).status, 407);
  EXPECT_EQ(request("GET http://" + authority() + "/ HTTP/1.1\r\nHost: x\r\n\r\n").status, 400);
  {
    RawClient tunnel(daemon_->explicit_port());
    tunnel.send(proxy_connect(authority(), "sb2", kToken2));
    const auto r = tunnel.read_response(3000ms, ResponseTo::connect);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    tunnel.send("GET /in-tunnel HTTP/1.1\r\nHost: " + authority() + "\r\n\r\n");
    EXPECT_TRUE(tunnel.read_response());
  }
  ASSERT_TRUE(daemon_->wait_audit_code("connection_closed"));

  const std::string after = metrics();
  EXPECT_EQ(value(after, "sandgate_denials_total", {{"reason", "no_matching_rule"}}), 1);
  EXPECT_EQ(
      value(after, "sandgate_errors_total", {{"code", "PROXY_AUTH_REQUIRED"}, {"side", "client"}}),
      1);
  EXPECT_EQ(value(after, "sandgate_errors_total", {{"code", "HOST_MISMATCH"}, {"side", "client"}}),
            1);
  EXPECT_EQ(value(after, "sandgate_requests_total", {{"mode", "http"}, {"outcome", "allowed"}}), 1);
  EXPECT_EQ(value(after, "sandgate_connections_total", {{"mode", "http"}, {"outcome", "denied"}}),
            1);
  EXPECT_EQ(
      value(after, "sandgate_connections_total", {{"mode", "connect"}, {"outcome", "allowed"}}), 1);
  EXPECT_GT(value(after, "sandgate_bytes_total", {{"direction", "downstream"}}),
            value(before, "sandgate_bytes_total", {{"direction", "downstream"}}));
  EXPECT_GT(value(after, "sandgate_bytes_total", {{"direction", "upstream"}}),
            value(before, "sandgate_bytes_total", {{"direction", "upstream"}}));
  EXPECT_EQ(value(after, "sandgate_active_tunnels", {}), 0);
  EXPECT_EQ(value(after, "sandgate_errors_total", {{"code", "INTERNAL_ERROR"}}), 0);
  // SandgateProcess checks the same sample at the end of every test; make sure it can.
  EXPECT_TRUE(metric_value(daemon_->metrics_text(), "sandgate_errors_total",
                           {{"code", "INTERNAL_ERROR"}, {"side", "internal"}}));
  // Every connection above is closed: the gauge must come back to zero (no leaked count).
  EXPECT_TRUE(daemon_->wait_no_connections());

  // Every sample is a sandgate_ metric; counters end in _total.
  for (std::size_t pos = 0; pos < after.size();) {
    const auto eol = after.find('\n', pos);
    const std::string line = after.substr(pos, eol - pos);
    pos = eol == std::string::npos ? after.size() : eol + 1;
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      EXPECT_EQ(name.rfind("sandgate_", 0), 0u) << line;
      if (rest.ends_with(" counter")) {
        EXPECT_TRUE(name.ends_with("_total")) << line;
      }
    } else if (line[0] != '#') {
      EXPECT_EQ(line.rfind("sandgate_", 0), 0u) << line;
    }
  }

  const CommandResult promtool = run_command({"promtool", "check", "metrics"}, 20s, after);
  EXPECT_EQ(promtool.exit_code, 0) << promtool.out << promtool.err;
}

// GET /sandboxes/ID/denials counts each sandbox's refusals by (protocol, host, port, reason),
// at most 256 keys per sandbox (the rest in `overflow`); a reload without the sandbox drops
// its counts, and they start again (a new epoch) when it is back.
TEST_F(ProxyAdmin, SandboxDenialsAreCountedBoundedAndDroppedWithTheSandbox) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(request(proxy_get("denied.test:80", "/", "sb1", kToken1)).status, 403);
  }
  EXPECT_EQ(request(proxy_connect("denied.test:443", "sb1", kToken1)).status, 403);
  EXPECT_EQ(request(proxy_get("denied.test:80", "/", "sb1", "wrong")).status, 407);  // not sb1's
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(request(proxy_get("h" + std::to_string(i) + ".test:80", "/", "sb1", kToken1)).status,
              403);
  }
  auto r = admin("/sandboxes/sb1/denials");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto doc = parse_object(r->body);
  ASSERT_TRUE(doc) << r->body;
  EXPECT_EQ(json_string(*doc, "id"), "sb1");
  EXPECT_EQ(doc->at("total").as_int64(), 304);
  const auto& entries = doc->at("denials").as_array();
  EXPECT_EQ(entries.size(), 256U);
  EXPECT_EQ(doc->at("overflow").as_int64(), 304 - 256 - 2);  // denied.test's 4 are 2 keys
  const auto epoch = doc->at("epoch").as_int64();
  EXPECT_GT(epoch, 0);
  int found = 0;
  for (const auto& v : entries) {
    const auto& e = v.as_object();
    if (e.at("host") != "denied.test") continue;
    ++found;
    EXPECT_EQ(e.at("reason"), "no_matching_rule");
    if (e.at("protocol") == "http") {
      EXPECT_EQ(e.at("port"), 80);
      EXPECT_EQ(e.at("count"), 3);
      // The audit line's suggestion, placed where sb1 is defined.
      EXPECT_EQ(e.at("suggestion"), "[sandboxes.sb1] allow = [\"denied.test:80\"]");
    } else {
      EXPECT_EQ(e.at("protocol"), "connect");
      EXPECT_EQ(e.at("port"), 443);
      EXPECT_EQ(e.at("count"), 1);
      EXPECT_EQ(e.at("suggestion"), "[sandboxes.sb1] allow = [\"denied.test:443\"]");
    }
  }
  EXPECT_EQ(found, 2) << r->body;

  r = admin("/sandboxes/sb2/denials");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"id\":\"sb2\",\"epoch\":0,\"total\":0,\"overflow\":0,\"denials\":[]}\n");
  r = admin("/sandboxes/nobody/denials");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);

  // Without sb1 its counts go; back again, they start from zero.
  std::string without = tables_;
  const auto at = without.find("[sandboxes.sb1]");
  const auto end = without.find("[sandboxes.sb2]");
  ASSERT_NE(at, std::string::npos);
  without.erase(at, end - at);
  std::string error;
  ASSERT_TRUE(daemon_->reload(without, &error)) << error;
  r = admin("/sandboxes/sb1/denials");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  ASSERT_TRUE(daemon_->reload(tables_, &error)) << error;
  EXPECT_EQ(request(proxy_get("denied.test:80", "/", "sb1", kToken1)).status, 403);
  r = admin("/sandboxes/sb1/denials");
  ASSERT_TRUE(r);
  doc = parse_object(r->body);
  ASSERT_TRUE(doc) << r->body;
  EXPECT_EQ(doc->at("total").as_int64(), 1);
  EXPECT_EQ(doc->at("overflow").as_int64(), 0);
  EXPECT_GT(doc->at("epoch").as_int64(), epoch);
}

TEST_F(ProxyAdmin, NoSecretAppearsInTheAuditLogMetricsOrErrorBodies) {
  const std::string wrong = "wrong-Secret-Vk2pL8";
  std::vector<HttpResponse> responses;
  responses.push_back(request(proxy_get(authority(), "/?t=" + kToken1, "sb1", kToken1)));
  responses.push_back(request(proxy_get("denied.test:80", "/", "sb1", kToken1)));
  responses.push_back(request(proxy_get(authority(), "/", "sb1", wrong)));
  responses.push_back(request(proxy_get(authority(), "/", "sb2", kToken1)));
  responses.push_back(request(proxy_connect("denied.test:443", "sb2", kToken2)));
  responses.push_back(request(proxy_connect(authority(), "sb1", wrong)));
  responses.push_back(request("GET http://" + authority() + "/ HTTP/1.1\r\nHost: evil.test\r\n" +
                              proxy_auth_line("sb1", kToken1) + "\r\n"));
  responses.push_back(request("GET http://" + authority() + "/ HTTP/1.1\r\nHost: " + authority() +
                              "\r\nProxy-Authorization: Basic " +
                              base64("sb1:" + kToken1 + "\x01") + "\r\n\r\n"));
  ASSERT_TRUE(daemon_->wait_audit([](const boost::json::object& o) {
    return json_string(o, "event.code") == "HOST_MISMATCH";
  }));

  std::string everything = daemon_->audit_text() + daemon_->stderr_text() + metrics();
  for (const auto& path : {"/sandboxes", "/sandboxes/sb1", "/sandboxes/sb2"}) {
    if (auto r = admin(path)) everything += r->body;
  }
  for (const auto& r : responses) {
    if (r.status != 200) everything += r.body;  // a 200 body is the origin's, not sandgate's
    for (const auto& [k, v] : r.headers) everything += k + ": " + v + "\n";
  }
  ASSERT_FALSE(daemon_->audit_text().empty());
  for (const std::string& secret : {kToken1, kToken2, wrong, base64("sb1:" + kToken1),
                                    base64("sb2:" + kToken2), base64("sb1:" + wrong)}) {
    EXPECT_EQ(everything.find(secret), std::string::npos) << secret << " leaked:\n" << everything;
  }
}

TEST(ProxyLifecycle, SigtermStopsTheDaemonCleanly) {
  SandgateProcess daemon(SandgateOptions{R"(
[sandboxes.sb1]
token = ")" + kToken1 + R"("
)"});
  EXPECT_EQ(daemon.stop(std::chrono::milliseconds(3000)), 0);
  EXPECT_NE(daemon.stderr_text().find(R"({"event":"stopped"})"), std::string::npos)
      << daemon.stderr_text();
}

TEST(ProxyLifecycle, SigtermWithAnIdleKeptAliveClientStillStopsWithinTheGracePeriod) {
  HttpOrigin origin;
  SandgateProcess daemon(SandgateOptions{R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken1 + R"("
allow = ["origin.test:)" + std::to_string(origin.port()) +
                                         R"("]
allow_cidrs = ["127.0.0.0/8"]
)"});
  RawClient idle(daemon.explicit_port());
  idle.send(proxy_get("origin.test:" + std::to_string(origin.port()), "/", "sb1", kToken1));
  ASSERT_TRUE(idle.read_response());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon.stop(std::chrono::milliseconds(8000)), 0);
  EXPECT_LE(std::chrono::steady_clock::now() - start, 7000ms);  // grace is 5 s
  EXPECT_TRUE(idle.wait_closed(1000ms));
}

TEST(ProxyLifecycle, Sigusr1ReopensTheAuditFileForRotation) {
  HttpOrigin origin;
  SandgateOptions options;
  options.audit_to_file = true;
  options.tables = R"(
[sandboxes.sb1]
token = ")" + kToken1 +
                   R"("
)";
  SandgateProcess daemon(options);
  RawClient(daemon.explicit_port()).send(proxy_get("first.test:80", "/", "sb1", kToken1));
  ASSERT_TRUE(daemon.wait_audit_code("SANDBOX_NETWORK_DENIED"));
  const std::string log = daemon.dir().file("audit.log");
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  ::kill(daemon.pid(), SIGUSR1);
  bool reopened = false;
  for (int i = 0; i < 100 && !reopened; ++i) {
    RawClient c(daemon.explicit_port());
    c.send(proxy_get("second.test:80", "/", "sb1", kToken1));
    c.read_response();
    reopened = read_file(log).find("second.test") != std::string::npos;
  }
  EXPECT_TRUE(reopened) << "no line reached the new audit file";
  EXPECT_NE(read_file(log + ".1").find("first.test"), std::string::npos);
  EXPECT_EQ(read_file(log).find("first.test"), std::string::npos);
}

// A daemon killed outright (a crash, the OOM killer) comes back on the same ports at once,
// though its connections left sockets in TIME_WAIT behind.
TEST(ProxyLifecycle, AKilledDaemonRestartsOnTheSamePortsAtOnce) {
  HttpOrigin origin;
  const std::string tables = R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]

[sandboxes.sb1]
token = ")" + kToken1 + R"("
allow = ["origin.test:)" + std::to_string(origin.port()) +
                             R"("]
allow_cidrs = ["127.0.0.0/8"]
)";
  std::uint16_t explicit_port = 0;
  std::uint16_t admin_port = 0;
  {
    SandgateProcess first(SandgateOptions{tables});
    explicit_port = first.explicit_port();
    admin_port = first.admin_port();
    EXPECT_TRUE(GoodRequestSucceeds(first, origin, "origin.test", "sb1", kToken1));
    first.kill_now();
  }
  SandgateOptions again{tables};
  again.explicit_listen = "127.0.0.1:" + std::to_string(explicit_port);
  again.admin_listen = "127.0.0.1:" + std::to_string(admin_port);
  again.ready_timeout = 3000ms;
  const auto start = std::chrono::steady_clock::now();
  SandgateProcess second(again);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3000ms);
  EXPECT_EQ(second.explicit_port(), explicit_port);
  EXPECT_TRUE(GoodRequestSucceeds(second, origin, "origin.test", "sb1", kToken1));
}

// Rotation under load: the file is renamed and reopened (SIGUSR1) three times while denials
// stream in; every one of them has its line in one of the files, whole.
TEST(ProxyLifecycle, RotationUnderLoadLosesNoLine) {
  SandgateOptions options;
  options.audit_to_file = true;
  options.workers = 2;
  options.tables = R"(
[sandboxes.sb1]
token = ")" + kToken1 +
                   R"("
)";
  SandgateProcess daemon(options);
  const std::string log = daemon.dir().file("audit.log");
  constexpr int kRequests = 600;
  std::atomic<int> sent{0};
  std::thread load([&] {
    for (int i = 0; i < kRequests; ++i) {
      RawClient c(daemon.explicit_port());
      c.send(proxy_get("load-" + std::to_string(i) + ".test:80", "/", "sb1", kToken1));
      c.read_response();
      ++sent;
    }
  });
  for (int r = 1; r <= 3; ++r) {
    ASSERT_TRUE(eventually([&] { return sent >= r * kRequests / 4; }, 20000ms));
    ASSERT_EQ(::rename(log.c_str(), (log + "." + std::to_string(r)).c_str()), 0);
    ::kill(daemon.pid(), SIGUSR1);
  }
  load.join();
  const auto count = [&] {
    std::set<std::string> hosts;
    for (const std::string& file : {log, log + ".1", log + ".2", log + ".3"}) {
      const std::string text = read_file(file);
      for (std::size_t at = 0, eol; (eol = text.find('\n', at)) != std::string::npos;
           at = eol + 1) {  // whole lines only: the last may still be being written
        const std::string line = text.substr(at, eol - at);
        const auto o = parse_object(line);
        EXPECT_TRUE(o) << "a torn line in " << file << ": " << line;
        if (o) hosts.insert(json_string(*o, "destination.address").value_or(""));
      }
    }
    return hosts.size();
  };
  EXPECT_TRUE(eventually([&] { return count() == kRequests; }, 5000ms)) << count();
}

}  // namespace
}  // namespace sandgate::test
