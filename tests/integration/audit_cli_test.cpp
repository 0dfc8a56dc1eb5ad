// `sandgate audit` end to end: the real daemon refuses and forwards requests from sandboxes
// defined three ways (the main file, a launcher-made drop-in with a profile, a hand-written
// drop-in), then the real binary reports on its audit file, a gzip-rotated copy of it and
// the same lines on stdin. Asserts the JSON report against the lines the daemon wrote.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

namespace json = boost::json;

const std::string kToken = "tok-audit-9f8e7d";

CommandResult audit(const std::vector<std::string>& args, const std::string& stdin_data = {}) {
  std::vector<std::string> argv{sandgate_binary(), "audit"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, std::chrono::seconds(20), stdin_data);
}

json::object audit_json(const std::vector<std::string>& args, const std::string& stdin_data = {}) {
  std::vector<std::string> with_format{"--format", "json"};
  with_format.insert(with_format.end(), args.begin(), args.end());
  const CommandResult r = audit(with_format, stdin_data);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto report = parse_object(r.out);
  EXPECT_TRUE(report) << r.out;
  return report ? *report : json::object();
}

// The denial groups of one sandbox in a report, by "host:port reason".
std::map<std::string, json::object> denials_of(const json::object& report,
                                               const std::string& sandbox) {
  std::map<std::string, json::object> out;
  for (const json::value& s : report.at("sandboxes").as_array()) {
    if (s.at("sandbox").as_string() != sandbox) continue;
    for (const json::value& d : s.at("denials").as_array()) {
      const json::object& o = d.as_object();
      out[std::string(o.at("host").as_string()) + ":" +
          std::to_string(o.at("port").to_number<int>()) + " " +
          std::string(o.at("reason").as_string())] = o;
    }
  }
  return out;
}

class AuditCli : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = std::to_string(origin_.port());
    drop_ins_.write("launched.toml",
                    "# written by sandgate-launch; removed by `sandgate-launch down`\n"
                    "id = \"launched\"\nprofile = \"dev\"\ntoken = \"" +
                        kToken + "\"\nallow = []\n");
    drop_ins_.write("ci.toml", "id = \"ci\"\ntoken = \"" + kToken + "\"\nallow = []\n");
    SandgateOptions options;
    options.audit_to_file = true;
    options.sandboxes_dir = drop_ins_.path().string();
    options.tables = R"(
[dns.hosts]
"origin.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]

[profiles.dev]
allow_cidrs = ["127.0.0.0/8"]

[sandboxes.sb1]
token = ")" + kToken +
                     R"("
allow = ["origin.test:)" +
                     port_ + R"("]
allow_cidrs = ["127.0.0.0/8"]
)";
    daemon_ = std::make_unique<SandgateProcess>(options);
  }

  std::string audit_file() const { return daemon_->dir().file("audit.log"); }

  // One request through the explicit proxy as `sandbox`; returns the HTTP status.
  int get(const std::string& sandbox, const std::string& url, std::string* body = nullptr) {
    const CurlResult r = run_curl({"-x", daemon_->proxy_url(sandbox, kToken), url});
    if (body != nullptr) *body = r.body;
    return r.http_code != 0 ? r.http_code : r.connect_code;
  }

  // Sends the traffic every test reports on and waits until its lines are written.
  void make_traffic() {
    std::string body;
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(get("sb1", "http://denied.test:" + port_ + "/x", &body), 403);
    denial_body_ = parse_object(body).value_or(json::object());
    for (int i = 0; i < 2; ++i) ASSERT_EQ(get("sb1", "http://origin.test:" + port_ + "/"), 200);
    ASSERT_EQ(get("sb1", "https://evil.test/"), 403);  // CONNECT
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(get("launched", "http://denied.test:" + port_ + "/"), 403);
    ASSERT_EQ(get("ci", "http://denied.test:" + port_ + "/"), 403);
    // 7 denials and 2 forwarded requests.
    ASSERT_TRUE(daemon_->wait_audit(
        [&](const json::object&) { return daemon_->audit_lines().size() >= 9; }));
    lines_ = daemon_->audit_lines();
    ASSERT_EQ(lines_.size(), 9u) << daemon_->audit_text();
  }

  // First and last @timestamp of the daemon's lines about one denial group.
  std::pair<std::string, std::string> span(const std::string& sandbox, const std::string& host) {
    std::string first, last;
    for (const json::object& l : lines_) {
      if (json_string(l, "labels.sandbox_id") != sandbox ||
          json_string(l, "destination.address") != host ||
          json_string(l, "event.code") != "SANDBOX_NETWORK_DENIED") {
        continue;
      }
      const std::string t = *json_string(l, "@timestamp");
      if (first.empty() || t < first) first = t;
      if (last.empty() || t > last) last = t;
    }
    return {first, last};
  }

  HttpOrigin origin_;
  std::string port_;
  TempDir drop_ins_;
  std::unique_ptr<SandgateProcess> daemon_;
  std::vector<json::object> lines_;
  json::object denial_body_;
};

TEST_F(AuditCli, ReportsDenialsWithCountsTimesAndTheDaemonsSuggestions) {
  make_traffic();
  const json::object report = audit_json({audit_file()});
  EXPECT_EQ(report.at("lines").to_number<int>(), 9);
  EXPECT_EQ(report.at("matched").to_number<int>(), 9);
  EXPECT_EQ(report.at("malformed").to_number<int>(), 0);

  const std::string denied = "denied.test:" + port_;
  auto sb1 = denials_of(report, "sb1");
  ASSERT_EQ(sb1.size(), 2u) << json::serialize(report);
  const json::object& group = sb1[denied + " no_matching_rule"];
  EXPECT_EQ(group.at("count").to_number<int>(), 3);
  const auto [first, last] = span("sb1", "denied.test");
  EXPECT_EQ(group.at("first_seen").as_string(), first);
  EXPECT_EQ(group.at("last_seen").as_string(), last);
  EXPECT_LT(std::string(first), std::string(last).append("~"));
  // The suggestion is the one the client got in its 403 body, carried by the audit line.
  EXPECT_EQ(group.at("suggestion").as_string(), denial_body_.at("suggestion").as_string());
  EXPECT_EQ(group.at("suggestion").as_string(), "[sandboxes.sb1] allow = [\"" + denied + "\"]");
  EXPECT_EQ(group.at("suggestion_source").as_string(), "log");
  EXPECT_EQ(group.at("protocols").at(0).as_string(), "http");
  EXPECT_EQ(sb1["evil.test:443 no_matching_rule"].at("count").to_number<int>(), 1);
  EXPECT_EQ(sb1["evil.test:443 no_matching_rule"].at("protocols").at(0).as_string(), "connect");

  // A launcher-made sandbox's suggestion names its profile; a drop-in's names its file.
  auto launched = denials_of(report, "launched");
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(launched[denied + " no_matching_rule"].at("count").to_number<int>(), 2);
  EXPECT_EQ(launched[denied + " no_matching_rule"].at("suggestion").as_string(),
            "[profiles.dev] allow = [\"" + denied + "\"]");
  auto ci = denials_of(report, "ci");
  ASSERT_EQ(ci.size(), 1u);
  EXPECT_EQ(ci[denied + " no_matching_rule"].at("suggestion").as_string(),
            drop_ins_.file("ci.toml") + ": allow = [\"" + denied + "\"]");

  // Paste-ready blocks, one per place.
  std::map<std::string, json::object> blocks;
  for (const json::value& b : report.at("suggestions").as_array()) {
    blocks[std::string(b.at("target").as_string())] = b.as_object();
  }
  ASSERT_EQ(blocks.size(), 3u) << json::serialize(report.at("suggestions"));
  EXPECT_EQ(json::serialize(blocks["[sandboxes.sb1]"].at("lines")),
            json::serialize(json::array{"allow = [\"" + denied + "\", \"evil.test:443\"]"}));
  EXPECT_EQ(blocks["[sandboxes.sb1]"].at("denials").to_number<int>(), 4);
  EXPECT_EQ(json::serialize(blocks["[profiles.dev]"].at("sandboxes")),
            json::serialize(json::array{"launched"}));
  EXPECT_EQ(blocks[drop_ins_.file("ci.toml")].at("kind").as_string(), "file");

  // Bytes and connections: the two forwarded requests to the origin.
  const json::array& by_connections = report.at("destinations").at("by_connections").as_array();
  ASSERT_EQ(by_connections.size(), 1u);
  EXPECT_EQ(by_connections[0].at("host").as_string(), "origin.test");
  EXPECT_EQ(by_connections[0].at("connections").to_number<int>(), 2);
  std::uint64_t down = 0;
  for (const json::object& l : lines_) {
    if (json_string(l, "event.code") == "http_request") down += *json_int(l, "destination.bytes");
  }
  EXPECT_GT(down, 0u);
  EXPECT_EQ(by_connections[0].at("bytes_down").to_number<std::uint64_t>(), down);
  EXPECT_EQ(report.at("errors_by_side").at("policy").to_number<int>(), 7);
}

TEST_F(AuditCli, ReadsAGzipRotatedCopyAndStdinTogether) {
  make_traffic();
  const std::string gz = daemon_->dir().file("audit.log.1.gz");
  const CommandResult zipped =
      run_command({"sh", "-c", "gzip -c '" + audit_file() + "' > '" + gz + "'"});
  ASSERT_EQ(zipped.exit_code, 0) << zipped.err;
  const json::object report = audit_json({gz, "-"}, read_file(audit_file()));
  EXPECT_EQ(report.at("lines").to_number<int>(), 18);
  const json::array& inputs = report.at("inputs").as_array();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_TRUE(inputs[0].at("compressed").as_bool());
  EXPECT_EQ(inputs[1].at("name").as_string(), "-");
  EXPECT_FALSE(inputs[1].at("compressed").as_bool());
  auto sb1 = denials_of(report, "sb1");
  const json::object& group = sb1["denied.test:" + port_ + " no_matching_rule"];
  EXPECT_EQ(group.at("count").to_number<int>(), 6);
  const auto [first, last] = span("sb1", "denied.test");
  EXPECT_EQ(group.at("first_seen").as_string(), first);
  EXPECT_EQ(group.at("last_seen").as_string(), last);

  // No FILE at all reads stdin.
  const json::object from_stdin = audit_json({}, read_file(audit_file()));
  EXPECT_EQ(from_stdin.at("lines").to_number<int>(), 9);
}

TEST_F(AuditCli, Filters) {
  make_traffic();
  const auto matched = [&](const std::vector<std::string>& args) {
    std::vector<std::string> all = args;
    all.push_back(audit_file());
    return audit_json(all).at("matched").to_number<int>();
  };
  EXPECT_EQ(matched({"--sandbox", "sb1"}), 6);
  EXPECT_EQ(matched({"--sandbox", "launched", "--sandbox", "ci"}), 3);
  EXPECT_EQ(matched({"--code", "http_request"}), 2);
  EXPECT_EQ(matched({"--denied-only"}), 7);
  EXPECT_EQ(matched({"--host", "evil.test"}), 1);
  EXPECT_EQ(matched({"--host", "*.test"}), 9);
  EXPECT_EQ(matched({"--since", "1h"}), 9);  // relative: the daemon wrote them just now
  EXPECT_EQ(matched({"--until", "1h"}), 0);
  // RFC 3339 bounds: since is inclusive, until exclusive.
  const auto [first, last] = span("ci", "denied.test");
  EXPECT_EQ(first, last);
  EXPECT_GE(matched({"--since", first}), 1);
  const json::object only_ci =
      audit_json({"--since", first, "--until", first.substr(0, 19) + ".999Z", "--sandbox", "ci",
                  audit_file()});
  EXPECT_EQ(only_ci.at("matched").to_number<int>(), 1);
  const json::object none = audit_json({"--until", first, "--sandbox", "ci", audit_file()});
  EXPECT_EQ(none.at("matched").to_number<int>(), 0);
  EXPECT_EQ(none.at("lines").to_number<int>(), 9);
}

TEST_F(AuditCli, CountsMalformedAndTooLongLinesWithoutStopping) {
  make_traffic();
  const std::string text = read_file(audit_file());
  const std::string mixed = "not json\n" + text.substr(0, text.size() / 2) + "\n" +
                            std::string(5000, 'x') + "\n{\"a\":1}\n" + text;
  const json::object report = audit_json({"--max-line-bytes", "4096", "-"}, mixed);
  // The whole lines of the first half count too.
  EXPECT_GE(report.at("lines").to_number<int>(), 9 + 1);
  EXPECT_EQ(report.at("too_long").to_number<int>(), 1);
  EXPECT_GE(report.at("malformed").to_number<int>(), 2);
  const int total = report.at("lines").to_number<int>() + report.at("malformed").to_number<int>() +
                    report.at("too_long").to_number<int>();
  EXPECT_EQ(static_cast<std::size_t>(total),
            static_cast<std::size_t>(std::count(mixed.begin(), mixed.end(), '\n')));
}

TEST_F(AuditCli, HtmlIsSelfContainedAndEscapesAHostileHost) {
  make_traffic();
  // A line with a hostile host (the log is written from what sandboxes send).
  json::object hostile = lines_.front();
  hostile["destination"].as_object()["address"] = "<script>alert(1)</script>\"><img src=x>.evil";
  hostile["labels"].as_object()["sandbox_id"] = "sb1</h3><style>";
  const std::string log = read_file(audit_file()) + json::serialize(hostile) + "\n";
  const CommandResult r = audit({"--format", "html", "-"}, log);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& html = r.out;
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_NE(html.find("<svg"), std::string::npos);
  for (const char* absent : {"http://", "https://", "<script", "<link", "url(", "@import", "<img",
                             "<iframe", "src=\"", "href=", "</h3><style>"}) {
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x&gt;.evil"),
            std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST_F(AuditCli, TableShowsTheGroupsAndTheLinesToPaste) {
  make_traffic();
  const CommandResult r = audit({audit_file()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Denied destinations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[profiles.dev]\n  allow = [\"denied.test:" + port_ + "\"]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(
      r.out.find("  [sandboxes.sb1]\n  allow = [\"denied.test:" + port_ + "\", \"evil.test:443\"]"),
      std::string::npos)
      << r.out;
}

// Issue 37: lines without the daemon's suggestion (an earlier sandgate's) get one from the same
// builder: a DNS line names the host without a port (never ":0"), and a sandbox the --config
// does not have (a launched one, gone with its drop-in) is never named by its id.
TEST(AuditCliDerived, DnsLinesAndSandboxesTheConfigDoesNotHave) {
  TempDir dir;
  const std::string config = dir.write("sandgate.toml", "[sandboxes.known]\ntoken = \"t\"\n");
  const auto line = [](const std::string& sandbox, const std::string& host, int port,
                       const std::string& protocol) {
    return R"({"@timestamp":"2026-12-02T13:00:00.000Z","event":{"code":"SANDBOX_NETWORK_DENIED",)"
           R"("outcome":"failure","reason":"no_matching_rule"},"labels":{"sandbox_id":")" +
           sandbox + R"("},"destination":{"address":")" + host + "\"" +
           (port != 0 ? ",\"port\":" + std::to_string(port) : std::string()) +
           R"(},"network":{"protocol":")" + protocol + "\"}}\n";
  };
  const std::string log = dir.write("audit.log", line("known", "dns.example", 0, "dns") +
                                                     line("gone", "dns.example", 0, "dns") +
                                                     line("gone", "web.example", 8443, "connect"));
  const json::object report = audit_json({"--config", config, log});
  auto known = denials_of(report, "known");
  EXPECT_EQ(known["dns.example:0 no_matching_rule"].at("suggestion").as_string(),
            "[sandboxes.known] allow = [\"dns.example\"]");
  auto gone = denials_of(report, "gone");
  EXPECT_EQ(gone["dns.example:0 no_matching_rule"].at("suggestion").as_string(),
            "sandgate-launch --allow \"dns.example\"");
  EXPECT_EQ(gone["web.example:8443 no_matching_rule"].at("suggestion").as_string(),
            "sandgate-launch --allow \"web.example:8443\"");
  EXPECT_EQ(gone["web.example:8443 no_matching_rule"].at("suggestion_source").as_string(),
            "config");
  EXPECT_EQ(json::serialize(report.at("suggestions")).find(":0\\\""), std::string::npos)
      << json::serialize(report.at("suggestions"));
}

TEST(AuditCliUsage, RefusesBadArgumentsAndReportsUnreadableInputs) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--format", "xml"},
                                             {"--since", "yesterday"},
                                             {"--top", "0"},
                                             {"--sandbox"},
                                             {"--frobnicate", "x"}}) {
    const CommandResult r = audit(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_NE(r.err.find("sandgate: audit: "), std::string::npos) << r.err;
  }
  TempDir dir;
  const CommandResult missing = audit({"--format", "json", dir.file("nope.log")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.log: No such file or directory"), std::string::npos)
      << missing.err;
  const auto report = parse_object(missing.out);
  ASSERT_TRUE(report) << missing.out;
  EXPECT_EQ(report->at("inputs").at(0).at("error").as_string(), "No such file or directory");
}

}  // namespace
}  // namespace sandgate::test
