// Held destinations (issue 39 part 1; docs/policy.md, "Held destinations"): through the real
// daemon's explicit proxy, a CONNECT and an HTTP request to a host no rule names wait for an
// operator's answer on the admin API: allowed once, allowed for the sandbox (a runtime grant
// /sandboxes/ID shows), denied with a message the client reads, or expired with a refusal of
// its own. Two sandboxes hold the same host apart; a write call without the token is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/raw_client.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

using namespace std::chrono_literals;

const std::string kToken1 = "tok-holds-one-Qw8e";
const std::string kToken2 = "tok-holds-two-Lz3r";
const std::string kAdminToken = "admin-holds-token-Vb7n";

class ProxyHolds : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("admin.token", kAdminToken + "\n");
    ::chmod(dir_.file("admin.token").c_str(), 0600);
    SandgateOptions o;
    o.audit_to_file = true;
    o.listeners = "admin_token_file = \"" + dir_.file("admin.token") + "\"";
    o.tables = tables();
    daemon_ = std::make_unique<SandgateProcess>(o);
  }

  // The config's tables: profile `asks` holds what it does not name; sb1's own lines
  // (`sb1_lines`), and sb2 unless left out.
  std::string tables(const std::string& sb1_lines = {}, bool with_sb2 = true) const {
    const std::string port = std::to_string(origin_.port());
    std::string t =
        "[limits]\nhold_timeout_ms = 4000\n\n[dns.hosts]\n\"allowed.test\" = "
        "[\"127.0.0.1\"]\n\"held.test\" = [\"127.0.0.1\"]\n\"other.test\" = "
        "[\"127.0.0.1\"]\n\n"
        "[profiles.asks]\nunlisted = \"hold\"\nports = [" +
        port + "]\nallow = [\"allowed.test\"]\nallow_cidrs = [\"127.0.0.0/8\"]\n\n" +
        "[sandboxes.sb1]\nprofile = \"asks\"\ntoken = \"" + kToken1 + "\"\n" + sb1_lines + "\n";
    if (with_sb2) t += "[sandboxes.sb2]\nprofile = \"asks\"\ntoken = \"" + kToken2 + "\"\n";
    return t;
  }

  std::string held() const { return "held.test:" + std::to_string(origin_.port()); }

  // sb1's grants, as /sandboxes/sb1 lists them.
  boost::json::array grants() {
    const auto status = admin("GET", "/sandboxes/sb1", {}, {});
    EXPECT_TRUE(status && status->status == 200);
    if (!status || status->status != 200) return {};
    return boost::json::parse(status->body).at("granted").as_array();
  }

  // A request sent now whose response is awaited in the background.
  std::future<std::optional<HttpResponse>> send_async(std::string bytes,
                                                      ResponseTo to = ResponseTo::other) {
    return std::async(std::launch::async, [this, bytes = std::move(bytes), to] {
      RawClient c(daemon_->explicit_port());
      c.send(bytes);
      return c.read_response(8000ms, to);
    });
  }

  std::optional<HttpResponse> admin(const std::string& method, const std::string& path,
                                    const std::string& body = {},
                                    const std::string& token = kAdminToken) {
    RawClient c(daemon_->admin_port());
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    c.send(request);
    return c.read_response(3000ms);
  }

  // The pending holds, once `count` of them are listed.
  boost::json::array holds(std::size_t count) {
    boost::json::array out;
    EXPECT_TRUE(eventually([&] {
      const auto r = admin("GET", "/holds", {}, {});
      if (!r || r->status != 200) return false;
      out = boost::json::parse(r->body).at("holds").as_array();
      return out.size() == count;
    })) << "expected "
        << count << " holds";
    return out;
  }
  static std::string id_of(const boost::json::value& hold) {
    return std::to_string(hold.at("id").as_int64());
  }
  std::vector<boost::json::object> audit(std::string_view event) const {
    std::vector<boost::json::object> out;
    for (auto& line : daemon_->audit_lines()) {
      if (json_string(line, "event.code") == event) out.push_back(std::move(line));
    }
    return out;
  }

  TempDir dir_;
  HttpOrigin origin_;
  std::unique_ptr<SandgateProcess> daemon_;
};

TEST_F(ProxyHolds, AHeldConnectOpensOnceAnOperatorAllowsItAndWaitsAgainNextTime) {
  // Control: a host the profile allows is never held.
  {
    RawClient c(daemon_->explicit_port());
    c.send(proxy_connect("allowed.test:" + std::to_string(origin_.port()), "sb1", kToken1));
    const auto r = c.read_response(3000ms, ResponseTo::connect);
    ASSERT_TRUE(r && r->status == 200);
  }
  EXPECT_TRUE(holds(0).empty());
  auto tunnel = send_async(proxy_connect(held(), "sb1", kToken1), ResponseTo::connect);
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].at("sandbox").as_string(), "sb1");
  EXPECT_EQ(pending[0].at("host").as_string(), "held.test");
  EXPECT_EQ(pending[0].at("port").as_int64(), origin_.port());
  EXPECT_EQ(pending[0].at("mode").as_string(), "connect");
  const auto answered = admin("POST", "/holds/" + id_of(pending[0]), R"({"action": "allow_once"})");
  ASSERT_TRUE(answered && answered->status == 200) << (answered ? answered->body : "");
  const auto r = tunnel.get();
  ASSERT_TRUE(r && r->status == 200) << "the held CONNECT was not opened once allowed";
  EXPECT_TRUE(holds(0).empty());
  // Allowed once: the next CONNECT is held again; unanswered, it expires with its own reason.
  const auto started = std::chrono::steady_clock::now();
  auto again = send_async(proxy_connect(held(), "sb1", kToken1), ResponseTo::connect);
  EXPECT_EQ(holds(1).size(), 1u);
  const auto expired = again.get();
  ASSERT_TRUE(expired);
  EXPECT_TRUE(IsSandgateError(*expired, 403, "SANDBOX_NETWORK_DENIED", false)) << expired->body;
  EXPECT_NE(expired->body.find("hold_expired"), std::string::npos) << expired->body;
  EXPECT_GE(std::chrono::steady_clock::now() - started, 3500ms);
  EXPECT_TRUE(holds(0).empty());
  EXPECT_TRUE(eventually([&] {
    for (const auto& line : audit("SANDBOX_NETWORK_DENIED")) {
      if (json_string(line, "event.reason") == "hold_expired") return true;
    }
    return false;
  })) << daemon_->audit_text();
  EXPECT_EQ(audit("destination_held").size(), 2u);
  EXPECT_EQ(audit("hold_answered").size(), 1u);
  const auto metrics = admin("GET", "/metrics", {}, {});
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("sandgate_holds_answered_total{action=\"allow_once\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("sandgate_held_requests 0"), std::string::npos);
  EXPECT_NE(metrics->body.find("sandgate_denials_total{reason=\"hold_expired\"} 1"),
            std::string::npos);
}

TEST_F(ProxyHolds, AHeldRequestDeniedWithAMessageTellsTheClientWhy) {
  auto response = send_async(proxy_get(held(), "/report", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].at("method").as_string(), "GET");
  EXPECT_EQ(pending[0].at("path").as_string(), "/report");
  const auto answered = admin("POST", "/holds/" + id_of(pending[0]),
                              R"({"action": "deny", "message": "ask #infra before new hosts"})");
  ASSERT_TRUE(answered && answered->status == 200);
  const auto r = response.get();
  ASSERT_TRUE(r);
  EXPECT_TRUE(IsSandgateError(*r, 403, "SANDBOX_NETWORK_DENIED", false)) << r->body;
  EXPECT_NE(r->body.find("denied_by_operator"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("ask #infra before new hosts"), std::string::npos) << r->body;
  EXPECT_EQ(origin_.request_count(), 0u);
  // The audit line says it too.
  EXPECT_TRUE(eventually([&] {
    for (const auto& line : audit("SANDBOX_NETWORK_DENIED")) {
      if (json_string(line, "labels.operator_message") == "ask #infra before new hosts") {
        return json_string(line, "event.reason") == "denied_by_operator";
      }
    }
    return false;
  })) << daemon_->audit_text();
}

TEST_F(ProxyHolds, AllowedForTheSandboxIsAGrantItUsesAtOnceAndOnlyIt) {
  auto first = send_async(proxy_get(held(), "/a", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(pending[0]), R"({"action": "allow_sandbox"})")->status,
            200);
  const auto r = first.get();
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  // Granted: the next request goes at once, no hold.
  RawClient c(daemon_->explicit_port());
  c.send(proxy_get(held(), "/b", "sb1", kToken1));
  const auto second = c.read_response(1500ms);
  ASSERT_TRUE(second && second->status == 200);
  EXPECT_EQ(origin_.request_count(), 2u);
  const auto status = admin("GET", "/sandboxes/sb1", {}, {});
  ASSERT_TRUE(status && status->status == 200);
  const auto granted = boost::json::parse(status->body).at("granted").as_array();
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_EQ(granted[0].at("destination").as_string(), held());
  // The other sandbox holds the same host on its own.
  auto other = send_async(proxy_get(held(), "/c", "sb2", kToken2));
  const auto theirs = holds(1);
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0].at("sandbox").as_string(), "sb2");
  ASSERT_EQ(admin("POST", "/holds/" + id_of(theirs[0]), R"({"action": "deny"})")->status, 200);
  const auto refused = other.get();
  ASSERT_TRUE(refused && refused->status == 403);
}

TEST_F(ProxyHolds, TwoSandboxesHoldTheSameHostApartAndOneRequestWaitsOnOneHold) {
  auto a1 = send_async(proxy_get(held(), "/1", "sb1", kToken1));
  auto a2 = send_async(proxy_get(held(), "/2", "sb1", kToken1));
  auto b = send_async(proxy_get(held(), "/3", "sb2", kToken2));
  const auto pending = holds(2);
  ASSERT_EQ(pending.size(), 2u);
  const boost::json::value* sb1 = nullptr;
  for (const auto& hold : pending) {
    if (hold.at("sandbox").as_string() == "sb1") sb1 = &hold;
  }
  ASSERT_NE(sb1, nullptr);
  ASSERT_TRUE(eventually([&] {
    for (const auto& hold : holds(2)) {
      if (hold.at("sandbox").as_string() == "sb1") return hold.at("waiting").as_int64() == 2;
    }
    return false;
  }));
  ASSERT_EQ(admin("POST", "/holds/" + id_of(*sb1), R"({"action": "allow_once"})")->status, 200);
  EXPECT_EQ(a1.get()->status, 200);
  EXPECT_EQ(a2.get()->status, 200);
  // sb2's hold is untouched by sb1's answer.
  const auto left = holds(1);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].at("sandbox").as_string(), "sb2");
  ASSERT_EQ(admin("POST", "/holds/" + id_of(left[0]), R"({"action": "deny"})")->status, 200);
  EXPECT_EQ(b.get()->status, 403);
}

TEST_F(ProxyHolds, AnAnswerWithoutTheAdminTokenIsRefused) {
  auto response = send_async(proxy_get(held(), "/x", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  const std::string path = "/holds/" + id_of(pending[0]);
  const std::string allow = R"({"action": "allow_once"})";
  for (const std::string& token : {std::string(), std::string("wrong-token"), kToken1}) {
    const auto r = admin("POST", path, allow, token);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << "token '" << token << "'";
    EXPECT_EQ(r->body.find(kAdminToken), std::string::npos);
  }
  EXPECT_EQ(holds(1).size(), 1u);  // still waiting
  // Control: the token answers it.
  ASSERT_EQ(admin("POST", path, allow)->status, 200);
  EXPECT_EQ(response.get()->status, 200);
  // A hold that is gone cannot be answered again.
  EXPECT_EQ(admin("POST", path, allow)->status, 404);
  EXPECT_EQ(daemon_->audit_text().find(kAdminToken), std::string::npos);
}

// `sandgate holds` for a person at a terminal: the list, then a denial with a message.
TEST_F(ProxyHolds, SandgateHoldsListsAndAnswersFromATerminal) {
  const std::string config = daemon_->config_path();
  const std::string at = "127.0.0.1:" + std::to_string(daemon_->admin_port());
  const auto empty = run_command({sandgate_binary(), "holds", "--config", config, "--admin", at});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "no destination is held\n");
  auto response = send_async(proxy_get(held(), "/pkg", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  const auto listed = run_command({sandgate_binary(), "holds", "--config", config, "--admin", at});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(id_of(pending[0]) + "\tsb1\t" + held() + "\thttp\tGET /pkg\t1\t"),
            std::string::npos)
      << listed.out;
  const auto denied = run_command({sandgate_binary(), "holds", "--config", config, "--admin", at,
                                   "deny", id_of(pending[0]), "--message", "not this one"});
  ASSERT_EQ(denied.exit_code, 0) << denied.err;
  const auto r = response.get();
  ASSERT_TRUE(r && r->status == 403);
  EXPECT_NE(r->body.find("not this one"), std::string::npos) << r->body;
  // Gone: answering it again fails, and says so.
  const auto again = run_command(
      {sandgate_binary(), "holds", "--config", config, "--admin", at, "allow", id_of(pending[0])});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("404"), std::string::npos) << again.err;
}

// A reload while a request waits: a hold the new rules do not decide waits on for its answer;
// one they now allow goes on at once; one whose sandbox the reload removed ends. Grants stay
// through a reload until an operator revokes them.
TEST_F(ProxyHolds, AReloadDuringAHoldKeepsItDecidesItOrEndsIt) {
  // Kept: an unrelated change leaves the hold waiting, and its answer still counts.
  auto kept = send_async(proxy_get(held(), "/kept", "sb1", kToken1));
  const auto before = holds(1);
  ASSERT_EQ(before.size(), 1u);
  std::string error;
  ASSERT_TRUE(daemon_->reload(
      tables() + "[sandboxes.sb3]\nprofile = \"asks\"\ntoken = \"tok-holds-three-Kp4x\"\n", &error))
      << error;
  const auto after = holds(1);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(id_of(after[0]), id_of(before[0]));
  ASSERT_EQ(admin("POST", "/holds/" + id_of(after[0]), R"({"action": "allow_sandbox"})")->status,
            200);
  ASSERT_EQ(kept.get()->status, 200);
  ASSERT_EQ(grants().size(), 1u);

  // Decided: sb2 waits; a reload that allows it for sb2 lets it go well before its deadline.
  auto waiting = send_async(proxy_get(held(), "/decided", "sb2", kToken2));
  ASSERT_EQ(holds(1).size(), 1u);
  const auto started = std::chrono::steady_clock::now();
  std::string sb2_allows = tables();
  sb2_allows += "allow = [\"held.test\"]\n";
  ASSERT_TRUE(daemon_->reload(sb2_allows, &error)) << error;
  const auto decided = waiting.get();
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->status, 200) << decided->body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3000ms);
  EXPECT_TRUE(holds(0).empty());
  EXPECT_TRUE(eventually([&] {
    for (const auto& line : audit("http_request")) {
      if (json_string(line, "url.path") == "/decided") {
        return json_string(line, "rule.name") == "sandboxes.sb2.allow:held.test";
      }
    }
    return false;
  })) << daemon_->audit_text();
  // sb1's grant stayed through both reloads.
  ASSERT_EQ(grants().size(), 1u);

  // Ended: a reload that removes sb2 ends its hold at once (its connections close), and its
  // grants with it: back again, it has none.
  ASSERT_TRUE(daemon_->reload(tables(), &error)) << error;
  auto granted = send_async(proxy_get(held(), "/granted", "sb2", kToken2));
  const auto to_grant = holds(1);
  ASSERT_EQ(to_grant.size(), 1u);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(to_grant[0]), R"({"action": "allow_sandbox"})")->status,
            200);
  ASSERT_EQ(granted.get()->status, 200);
  const std::string other = "other.test:" + std::to_string(origin_.port());
  auto removed = send_async(proxy_get(other, "/removed", "sb2", kToken2));
  ASSERT_EQ(holds(1).size(), 1u);
  const auto ending = std::chrono::steady_clock::now();
  ASSERT_TRUE(daemon_->reload(tables({}, false), &error)) << error;
  const auto gone = removed.get();
  EXPECT_LT(std::chrono::steady_clock::now() - ending, 3000ms);
  EXPECT_TRUE(!gone || gone->status != 200);
  EXPECT_TRUE(holds(0).empty());
  ASSERT_TRUE(daemon_->reload(tables(), &error)) << error;
  const auto back = admin("GET", "/sandboxes/sb2", {}, {});
  ASSERT_TRUE(back && back->status == 200);
  EXPECT_TRUE(boost::json::parse(back->body).at("granted").as_array().empty()) << back->body;
  EXPECT_EQ(origin_.request_count(), 3u);
}

TEST_F(ProxyHolds, AGrantEndsWhenAnOperatorRevokesIt) {
  auto first = send_async(proxy_get(held(), "/a", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(pending[0]), R"({"action": "allow_sandbox"})")->status,
            200);
  ASSERT_EQ(first.get()->status, 200);
  ASSERT_EQ(grants().size(), 1u);
  // Refused without the token; an unknown sandbox is not found.
  for (const std::string& token : {std::string(), std::string("wrong"), kToken1}) {
    const auto r = admin("DELETE", "/sandboxes/sb1/grants", {}, token);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << "token '" << token << "'";
  }
  EXPECT_EQ(admin("DELETE", "/sandboxes/nobody/grants")->status, 404);
  ASSERT_EQ(grants().size(), 1u);
  // Another destination's revocation leaves it.
  const auto other = admin("DELETE", "/sandboxes/sb1/grants/other.test:443");
  ASSERT_TRUE(other && other->status == 200);
  EXPECT_EQ(boost::json::parse(other->body).at("revoked").as_int64(), 0);
  ASSERT_EQ(grants().size(), 1u);
  // With the token, through the CLI: gone, and the next request is held again.
  const std::string at = "127.0.0.1:" + std::to_string(daemon_->admin_port());
  const auto revoked = run_command({sandgate_binary(), "holds", "--config", daemon_->config_path(),
                                    "--admin", at, "revoke", "sb1", held()});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, "sandbox sb1: 1 grant(s) revoked\n");
  EXPECT_TRUE(grants().empty());
  auto again = send_async(proxy_get(held(), "/b", "sb1", kToken1));
  const auto held_again = holds(1);
  ASSERT_EQ(held_again.size(), 1u);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(held_again[0]), R"({"action": "deny"})")->status, 200);
  EXPECT_EQ(again.get()->status, 403);
  EXPECT_TRUE(eventually([&] { return audit("grants_revoked").size() == 2u; }))
      << daemon_->audit_text();
}

// `sandgate decide` says "hold" for what the sandbox would hold, and allow once the running
// daemon holds a grant for it.
TEST_F(ProxyHolds, DecideShowsAHoldAndTheGrantThatAllowsIt) {
  const std::string at = "127.0.0.1:" + std::to_string(daemon_->admin_port());
  const auto decide = [&] {
    return run_command({sandgate_binary(), "decide", "--config", daemon_->config_path(),
                        "--sandbox", "sb1", "--admin", at, held()});
  };
  const auto asked = decide();
  EXPECT_EQ(asked.exit_code, 3) << asked.err;
  const auto hold = boost::json::parse(asked.out).as_object();
  EXPECT_EQ(hold.at("decision").as_string(), "hold");
  EXPECT_EQ(hold.at("reason").as_string(), "no_matching_rule");
  EXPECT_EQ(hold.at("hold_timeout_ms").as_int64(), 4000);
  // Control: what the profile allows is allowed, with no grant asked for.
  const auto allowed =
      run_command({sandgate_binary(), "decide", "--config", daemon_->config_path(), "--sandbox",
                   "sb1", "allowed.test:" + std::to_string(origin_.port())});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out;
  auto first = send_async(proxy_get(held(), "/a", "sb1", kToken1));
  const auto pending = holds(1);
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(pending[0]), R"({"action": "allow_sandbox"})")->status,
            200);
  ASSERT_EQ(first.get()->status, 200);
  const auto granted = decide();
  EXPECT_EQ(granted.exit_code, 0) << granted.err;
  const auto allow = boost::json::parse(granted.out).as_object();
  EXPECT_EQ(allow.at("decision").as_string(), "allow");
  EXPECT_EQ(allow.at("reason").as_string(), "allowed_by_operator");
  EXPECT_EQ(allow.at("grant").at("destination").as_string(), held());
  // Without a daemon to ask, it says so and stays a hold.
  const auto unknown = run_command({sandgate_binary(), "decide", "--config", daemon_->config_path(),
                                    "--sandbox", "sb1", "--admin", "127.0.0.1:1", held()});
  EXPECT_EQ(unknown.exit_code, 3);
  const auto not_asked = boost::json::parse(unknown.out).as_object();
  EXPECT_EQ(not_asked.at("decision").as_string(), "hold");
  EXPECT_TRUE(not_asked.contains("grants_unknown"));
}

}  // namespace
}  // namespace sandgate::test
