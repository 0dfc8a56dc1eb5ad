// Monitoring as deployed: a real Prometheus (Debian's `prometheus`) on loopback scrapes a real
// sandgate every second, loads deploy/prometheus/sandgate-rules.yml, answers PromQL about the
// refusals this test caused, and fires the alert those refusals call for. And the rules and
// the Grafana dashboard use only metrics and label values a real scrape has.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kSourceDir = SANDGATE_DEFAULT_SOURCE_DIR;
const std::string kToken = "tok-prometheus-Vb7n";

const std::string kTables = R"(
[profiles.default]
allow = ["allowed.test"]

[sandboxes.agent]
profile = "default"
token = "tok-prometheus-Vb7n"
)";

// A port nobody listens on now (Prometheus takes no port 0); the start is retried if another
// process takes it first.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Prometheus on 127.0.0.1 with its config and TSDB in a temp dir, killed and reaped (and the
// dir removed) at the end of the test; it dies with the test process too.
class PrometheusProcess {
 public:
  PrometheusProcess(std::uint16_t sandgate_admin_port, const std::string& rules) {
    dir_.write("rules.yml", rules);
    dir_.write("prometheus.yml",
               "global:\n"
               "  scrape_interval: 1s\n"
               "  evaluation_interval: 1s\n"
               "rule_files: [rules.yml]\n"
               "scrape_configs:\n"
               "  - job_name: sandgate\n"
               "    scrape_timeout: 900ms\n"
               "    static_configs:\n"
               "      - targets: ['127.0.0.1:" +
                   std::to_string(sandgate_admin_port) + "']\n");
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      if (start()) return;
      stop();
    }
    throw std::runtime_error("prometheus did not start; its log:\n" + log());
  }
  ~PrometheusProcess() { stop(); }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  std::string log() const { return read_file(dir_.file("prometheus.log")); }

  // GET /api/v1/PATH?query=..., the "data" member of a successful answer.
  std::optional<boost::json::value> api(const std::string& path, const std::string& query = {}) {
    std::vector<std::string> args = {"curl", "-q", "-sS", "--noproxy", "*", "--max-time", "3"};
    if (!query.empty()) {
      args.insert(args.end(), {"-G", "--data-urlencode", "query=" + query});
    }
    args.push_back("http://127.0.0.1:" + std::to_string(port_) + "/api/v1/" + path);
    const auto r = run_command(args, 5s);
    if (r.exit_code != 0) return std::nullopt;
    boost::system::error_code ec;
    auto v = boost::json::parse(r.out, ec);
    if (ec || !v.is_object() || v.as_object().if_contains("status") == nullptr ||
        v.at("status") != "success") {
      return std::nullopt;
    }
    return v.at("data");
  }

  // The instant vector of `query` as labels -> value.
  std::vector<std::pair<std::map<std::string, std::string>, double>> query(
      const std::string& promql) {
    std::vector<std::pair<std::map<std::string, std::string>, double>> out;
    const auto data = api("query", promql);
    if (!data || data->at("resultType") != "vector") return out;
    for (const auto& sample : data->at("result").as_array()) {
      std::map<std::string, std::string> labels;
      for (const auto& [k, v] : sample.at("metric").as_object()) {
        labels[std::string(k)] = std::string(v.as_string());
      }
      out.emplace_back(labels,
                       std::stod(std::string(sample.at("value").as_array()[1].as_string())));
    }
    return out;
  }

 private:
  bool start() {
    const std::string config = dir_.file("prometheus.yml");
    const std::string data = dir_.file("data");
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    const std::string log_path = dir_.file("prometheus.log");
    std::vector<std::string> args = {
        "prometheus", "--config.file=" + config, "--storage.tsdb.path=" + data,
        listen,       "--log.level=warn",        "--storage.tsdb.retention.time=1h"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (out >= 0) {
        ::dup2(out, STDOUT_FILENO);
        ::dup2(out, STDERR_FILENO);
      }
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    // Ready once its API answers (a fresh TSDB opens in well under a second).
    return eventually(
               [&] {
                 int status = 0;
                 if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                   pid_ = -1;
                   return true;  // exited: fails below
                 }
                 return api("status/buildinfo").has_value();
               },
               15000ms, 100ms) &&
           pid_ > 0;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const bool gone =
        eventually([&] { return ::waitpid(pid_, nullptr, WNOHANG) == pid_; }, 5000ms, 20ms);
    if (!gone) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

  TempDir dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

int refused(const SandgateProcess& daemon, const std::string& url) {
  return run_curl({"-x", daemon.proxy_url("agent", kToken), url}).http_code;
}

TEST(PrometheusEndToEnd, ScrapesSandgateAnswersPromqlAndFiresTheRulesAlert) {
  SandgateOptions options;
  options.tables = kTables;
  SandgateProcess daemon(options);
  const std::string rules = read_file(kSourceDir + "/deploy/prometheus/sandgate-rules.yml");
  ASSERT_FALSE(rules.empty());
  PrometheusProcess prom(daemon.admin_port(), rules);

  // A scrape before the traffic, so that the counters' rise is seen (the rules use increase()).
  ASSERT_TRUE(eventually(
      [&] {
        const auto up = prom.query(R"(up{job="sandgate"})");
        return up.size() == 1 && up[0].second == 1.0;
      },
      15000ms, 200ms))
      << prom.log();

  // 3 refusals of the metadata address, 2 of a host no rule allows.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(refused(daemon, "http://169.254.169.254/latest/"), 403);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(refused(daemon, "http://refused.example/"), 403);

  std::map<std::string, double> by_reason;
  const bool counted = eventually(
      [&] {
        by_reason.clear();
        for (const auto& [labels, value] :
             prom.query(R"(sum by (reason) (sandgate_denials_total{job="sandgate"}) > 0)")) {
          by_reason[labels.at("reason")] = value;
        }
        return by_reason.size() == 2 && by_reason["always_denied_address"] == 3.0 &&
               by_reason["no_matching_rule"] == 2.0;
      },
      15000ms, 200ms);
  EXPECT_TRUE(counted) << ::testing::PrintToString(by_reason) << "\n" << prom.log();

  // Every rule of the file loads and evaluates against the real series.
  const auto loaded = prom.api("rules");
  ASSERT_TRUE(loaded);
  std::size_t n_rules = 0;
  for (const auto& group : loaded->at("groups").as_array()) {
    for (const auto& rule : group.at("rules").as_array()) {
      ++n_rules;
      EXPECT_EQ(rule.at("health"), "ok") << boost::json::serialize(rule);
    }
  }
  EXPECT_EQ(n_rules, 12u);

  // Three metadata refusals in ten minutes: SandgateSuspiciousDenials fires (no `for:`).
  const bool fired = eventually(
      [&] {
        const auto alerts = prom.api("alerts");
        if (!alerts) return false;
        for (const auto& a : alerts->at("alerts").as_array()) {
          const auto& labels = a.at("labels").as_object();
          if (labels.at("alertname") == "SandgateSuspiciousDenials" &&
              labels.at("reason") == "always_denied_address" && a.at("state") == "firing") {
            return true;
          }
        }
        return false;
      },
      15000ms, 200ms);
  EXPECT_TRUE(fired) << (prom.api("alerts") ? boost::json::serialize(*prom.api("alerts")) : "");
  // The other reason had only two: no alert for it.
  const auto alerts = prom.query(R"(ALERTS{alertname="SandgateSuspiciousDenials"})");
  for (const auto& [labels, value] : alerts)
    EXPECT_EQ(labels.at("reason"), "always_denied_address");

  // The daemon going away is seen as up == 0.
  daemon.stop();
  EXPECT_TRUE(eventually(
      [&] {
        const auto up = prom.query(R"(up{job="sandgate"})");
        return up.size() == 1 && up[0].second == 0.0;
      },
      10000ms, 200ms));
}

// The scrape the reference check runs against: every family present (a credential configured,
// traffic of each kind the test can make offline).
std::string full_scrape(const TempDir& dir) {
  const std::string token_file = dir.write("npm-token", "tok-static-Xq2w\n");
  std::filesystem::permissions(
      token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  SandgateOptions options;
  options.tables = "[credentials]\nplaceholder_key_file = \"" + dir.file("placeholder.key") +
                   "\"\n\n[credentials.npm]\nprovider = \"static\"\nfile = \"" + token_file +
                   "\"\n" + kTables;
  SandgateProcess daemon(options);
  EXPECT_EQ(refused(daemon, "http://refused.example/"), 403);
  const std::string text = daemon.metrics_text();
  EXPECT_FALSE(text.empty());
  return text;
}

TEST(DeployMonitoring, RulesAndDashboardUseOnlyMetricsTheDaemonExports) {
  TempDir dir;
  const std::string scrape = dir.write("scrape.txt", full_scrape(dir));
  const std::vector<std::string> base = {
      "python3",    kSourceDir + "/tests/deploy/check_metric_refs.py", "--metrics", scrape,
      "--declared", kSourceDir + "/src/telemetry/metrics.cpp"};
  auto check = [&](const std::string& rules, const std::string& dashboard) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--rules", rules, "--dashboard", dashboard});
    return run_command(args, 30s);
  };
  const std::string rules = kSourceDir + "/deploy/prometheus/sandgate-rules.yml";
  const std::string dashboard = kSourceDir + "/deploy/grafana/sandgate-dashboard.json";
  const auto r = check(rules, dashboard);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  // The check can fail: a misspelt metric, a label value the daemon never uses, an undefined
  // dashboard variable.
  const std::string text_rules = read_file(rules);
  const std::string text_dash = read_file(dashboard);
  const std::vector<std::pair<std::string, std::string>> broken = {
      {std::regex_replace(text_rules, std::regex("sandgate_audit_log_write_failures_total"),
                          "sandgate_audit_write_failures_total"),
       text_dash},
      {std::regex_replace(text_rules, std::regex("proxy_loop"), "proxy_loops"), text_dash},
      {text_rules, std::regex_replace(text_dash, std::regex("\\$instance"), "$host")},
      {text_rules, std::regex_replace(text_dash, std::regex("direction"), "dir")},
  };
  for (const auto& [bad_rules, bad_dash] : broken) {
    const auto b =
        check(dir.write("bad-rules.yml", bad_rules), dir.write("bad-dashboard.json", bad_dash));
    EXPECT_EQ(b.exit_code, 1) << b.out << b.err;
  }
}

// What docs/deployment.md's capacity model counts: the series one host exports.
TEST(DeployMonitoring, SeriesPerHostStayBounded) {
  TempDir dir;
  const std::string scrape = full_scrape(dir);
  std::size_t series = 0;
  std::size_t pos = 0;
  while (pos < scrape.size()) {
    const auto nl = std::min(scrape.find('\n', pos), scrape.size());
    if (scrape.compare(pos, 9, "sandgate_") == 0) ++series;
    pos = nl + 1;
  }
  std::cout << "sandgate series per host (1 credential): " << series << "\n";
  // No label grows with sandboxes, hosts or addresses: a fixed few hundred.
  EXPECT_GT(series, 100u);
  EXPECT_LT(series, 400u);
}

}  // namespace
}  // namespace sandgate::test
