// Held destinations (issue 39 part 1; docs/policy.md, "Held destinations"): through the real
// daemon's explicit proxy, a CONNECT and an HTTP request to a host no rule names wait for an
// operator's answer on the admin API: allowed once, allowed for the sandbox (a runtime grant
// /sandboxes/ID shows), denied with a message the client reads, or expired with a refusal of
// its own. Two sandboxes hold the same host apart; a write call without the token is refused.
// GET /holds/events streams the same holds as Server-Sent Events (held, then answered).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

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

// One event of GET /holds/events.
struct StreamEvent {
  std::string id;
  std::string name;
  boost::json::object data;
};

// A reader of GET /holds/events (`query`: "" or "?sandbox=ID") over a raw socket, with a
// framing parser of the test's own.
class EventReader {
 public:
  EventReader(std::uint16_t port, const std::string& query) : client_(port) {
    client_.send("GET /holds/events" + query +
                 " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n");
  }
  // The response head once it has come ("" on timeout): the reader is subscribed by then.
  std::string head(std::chrono::milliseconds timeout = 3000ms) {
    if (!fill_until("\r\n\r\n", timeout)) return {};
    const std::size_t end = buffer_.find("\r\n\r\n") + 4;
    std::string out = buffer_.substr(0, end);
    buffer_.erase(0, end);
    return out;
  }
  // The next event (comments skipped), or nullopt when none comes within `timeout`.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (!fill_until("\n\n", deadline - std::chrono::steady_clock::now())) return std::nullopt;
      const std::size_t end = buffer_.find("\n\n");
      const std::string block = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (block.starts_with(":")) continue;
      StreamEvent e;
      std::istringstream lines(block);
      for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("id: ")) e.id = line.substr(4);
        if (line.starts_with("event: ")) e.name = line.substr(7);
        if (line.starts_with("data: ")) e.data = boost::json::parse(line.substr(6)).as_object();
      }
      return e;
    }
  }
  bool closed(std::chrono::milliseconds timeout = 3000ms) { return client_.wait_closed(timeout); }
  // Whether a keep-alive comment comes within `timeout` (what came before it is dropped).
  bool keep_alive(std::chrono::milliseconds timeout) {
    constexpr std::string_view kKeepAlive = ": keep-alive\n\n";
    if (!fill_until(kKeepAlive, timeout)) return false;
    buffer_.erase(0, buffer_.find(kKeepAlive) + kKeepAlive.size());
    return true;
  }

 private:
  bool fill_until(std::string_view mark, std::chrono::steady_clock::duration left) {
    const auto deadline = std::chrono::steady_clock::now() + left;
    while (buffer_.find(mark) == std::string::npos) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      buffer_ += client_.read_some(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + 1ms, 5ms);
    }
    return true;
  }
  RawClient client_;
  std::string buffer_;
};

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

  // A GET of `path` from `sandbox` that is held, allowed for the sandbox by the operator, and
  // then answered 200: the sandbox holds a grant for held().
  void grant_held(const std::string& path, const std::string& sandbox, const std::string& token) {
    auto request = send_async(proxy_get(held(), path, sandbox, token));
    const auto pending = holds(1);
    ASSERT_EQ(pending.size(), 1u);
    const auto answered =
        admin("POST", "/holds/" + id_of(pending[0]), R"({"action": "allow_sandbox"})");
    ASSERT_TRUE(answered && answered->status == 200);
    const auto r = request.get();
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  }

  // Whether the audit log has an `event` line whose `key` is `value` and whose `then` is
  // `expected` (the first line with that key value decides).
  bool audit_says(std::string_view event, const std::string& key, std::string_view value,
                  const std::string& then, std::string_view expected) {
    return eventually([&] {
      for (const auto& line : audit(event)) {
        if (json_string(line, key) == value) return json_string(line, then) == expected;
      }
      return false;
    });
  }

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
  EXPECT_TRUE(audit_says("SANDBOX_NETWORK_DENIED", "labels.operator_message",
                         "ask #infra before new hosts", "event.reason", "denied_by_operator"))
      << daemon_->audit_text();
}

TEST_F(ProxyHolds, AllowedForTheSandboxIsAGrantItUsesAtOnceAndOnlyIt) {
  grant_held("/a", "sb1", kToken1);
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
  EXPECT_TRUE(audit_says("http_request", "url.path", "/decided", "rule.name",
                         "sandboxes.sb2.allow:held.test"))
      << daemon_->audit_text();
  // sb1's grant stayed through both reloads.
  ASSERT_EQ(grants().size(), 1u);

  // Ended: a reload that removes sb2 ends its hold at once (its connections close), and its
  // grants with it: back again, it has none.
  ASSERT_TRUE(daemon_->reload(tables(), &error)) << error;
  grant_held("/granted", "sb2", kToken2);
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
  grant_held("/a", "sb1", kToken1);
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
  grant_held("/a", "sb1", kToken1);
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

// GET /holds/events: a `held` event (the same object GET /holds lists) when a CONNECT waits,
// then `answered` once an operator allowed it. Control: a host the profile allows makes none.
TEST_F(ProxyHolds, TheEventStreamTellsWhenAHoldBeginsAndHowItEnds) {
  EventReader reader(daemon_->admin_port(), "");
  const std::string head = reader.head();
  ASSERT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  {
    RawClient c(daemon_->explicit_port());
    c.send(proxy_connect("allowed.test:" + std::to_string(origin_.port()), "sb1", kToken1));
    ASSERT_EQ(c.read_response(3000ms, ResponseTo::connect)->status, 200);
  }
  auto tunnel = send_async(proxy_connect(held(), "sb1", kToken1), ResponseTo::connect);
  const auto held_event = reader.next();
  ASSERT_TRUE(held_event);
  EXPECT_EQ(held_event->name, "held");
  EXPECT_FALSE(held_event->id.empty());
  EXPECT_EQ(held_event->data.at("sandbox").as_string(), "sb1");
  EXPECT_EQ(held_event->data.at("host").as_string(), "held.test");
  EXPECT_EQ(held_event->data.at("port").as_int64(), origin_.port());
  EXPECT_EQ(held_event->data.at("mode").as_string(), "connect");
  const auto listed = holds(1);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(boost::json::value(held_event->data), listed[0]);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(listed[0]), R"({"action": "allow_once"})")->status,
            200);
  const auto answered = reader.next();
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->name, "answered");
  EXPECT_EQ(answered->data.at("id"), listed[0].at("id"));
  EXPECT_EQ(answered->data.at("sandbox").as_string(), "sb1");
  EXPECT_EQ(answered->data.at("host").as_string(), "held.test");
  EXPECT_EQ(answered->data.at("outcome").as_string(), "allowed");
  EXPECT_EQ(tunnel.get()->status, 200);
  EXPECT_FALSE(reader.next(500ms)) << "the allowed host made an event";
}

// ?sandbox=ID shows that sandbox's holds only (a reader of every sandbox sees both); a query
// that is not one sandbox is refused.
TEST_F(ProxyHolds, TheSandboxFilterHidesAnotherSandboxesHolds) {
  for (const std::string bad : {"?sandbox=", "?other=1", "?sandbox=sb1&x=2", "?sandbox=a%20b"}) {
    const auto r = admin("GET", "/holds/events" + bad, {}, {});
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
  }
  EventReader everything(daemon_->admin_port(), "");
  EventReader theirs(daemon_->admin_port(), "?sandbox=sb2");
  ASSERT_NE(everything.head().find(" 200 "), std::string::npos);
  ASSERT_NE(theirs.head().find(" 200 "), std::string::npos);
  auto mine = send_async(proxy_get(held(), "/mine", "sb1", kToken1));
  const auto seen = everything.next();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->data.at("sandbox").as_string(), "sb1");
  auto other = send_async(proxy_get(held(), "/theirs", "sb2", kToken2));
  const auto first = theirs.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->name, "held");
  EXPECT_EQ(first->data.at("sandbox").as_string(), "sb2");
  EXPECT_EQ(first->data.at("path").as_string(), "/theirs");
  ASSERT_EQ(admin("POST", "/holds/" + id_of(seen->data), R"({"action": "deny"})")->status, 200);
  ASSERT_EQ(admin("POST", "/holds/" + id_of(first->data), R"({"action": "deny"})")->status, 200);
  const auto ended = theirs.next();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->name, "answered");
  EXPECT_EQ(ended->data.at("sandbox").as_string(), "sb2");
  EXPECT_EQ(ended->data.at("outcome").as_string(), "denied");
  EXPECT_FALSE(theirs.next(300ms)) << "sb1's answer reached the sb2 reader";
  EXPECT_EQ(mine.get()->status, 403);
  EXPECT_EQ(other.get()->status, 403);
}

// A hold pending when a reader comes is its first event; unanswered, it ends as expired.
TEST_F(ProxyHolds, AHoldPendingAtSubscribeComesFirstAndEndsAsExpired) {
  auto waiting = send_async(proxy_get(held(), "/slow", "sb1", kToken1));
  const auto listed = holds(1);
  ASSERT_EQ(listed.size(), 1u);
  EventReader reader(daemon_->admin_port(), "?sandbox=sb1");
  ASSERT_NE(reader.head().find(" 200 "), std::string::npos);
  const auto first = reader.next(1000ms);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->name, "held");
  EXPECT_EQ(first->data.at("id"), listed[0].at("id"));
  EXPECT_EQ(first->data.at("path").as_string(), "/slow");
  const auto expired = reader.next(6000ms);
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->name, "answered");
  EXPECT_EQ(expired->data.at("id"), listed[0].at("id"));
  EXPECT_EQ(expired->data.at("outcome").as_string(), "expired");
  EXPECT_EQ(waiting.get()->status, 403);
}

// Readers are bounded: the 33rd is served and the oldest is closed to make room for it; the
// others (the second oldest among them) go on reading.
TEST_F(ProxyHolds, TheThirtyThirdReaderIsServedAndTheOldestClosed) {
  std::vector<std::unique_ptr<EventReader>> readers;
  for (int i = 0; i < 32; ++i) {
    readers.push_back(std::make_unique<EventReader>(daemon_->admin_port(), ""));
    ASSERT_NE(readers.back()->head().find(" 200 "), std::string::npos) << "reader " << i;
  }
  EXPECT_FALSE(readers[0]->closed(200ms)) << "32 readers fit";
  EventReader newcomer(daemon_->admin_port(), "");
  ASSERT_NE(newcomer.head().find(" 200 "), std::string::npos);
  EXPECT_TRUE(readers[0]->closed(3000ms)) << "the oldest reader was not closed";
  EXPECT_FALSE(readers[1]->closed(200ms));
  auto request = send_async(proxy_get(held(), "/n", "sb1", kToken1));
  for (EventReader* r : {&newcomer, readers[1].get(), readers[31].get()}) {
    const auto e = r->next();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->name, "held");
  }
  ASSERT_EQ(admin("POST", "/holds/" + id_of(holds(1)[0]), R"({"action": "deny"})")->status, 200);
  EXPECT_EQ(request.get()->status, 403);
}

// A reader is no session the daemon waits for: SIGTERM stops it at once, and the reader sees
// its stream end.
TEST_F(ProxyHolds, TheDaemonStopsPromptlyWithAReaderOpen) {
  EventReader reader(daemon_->admin_port(), "");
  ASSERT_NE(reader.head().find(" 200 "), std::string::npos);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_->stop(5000ms), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2000ms);
  EXPECT_TRUE(reader.closed(1000ms));
}

// `sandgate holds watch`: a line per hold that begins or ends (a pending one first), for one
// sandbox or, with --json, every sandbox; it ends (exit 0) when the daemon stops.
TEST_F(ProxyHolds, SandgateHoldsWatchPrintsALinePerEventUntilTheDaemonStops) {
  const std::string at = "127.0.0.1:" + std::to_string(daemon_->admin_port());
  auto pending = send_async(proxy_get(held(), "/first", "sb1", kToken1));
  const auto listed = holds(1);
  ASSERT_EQ(listed.size(), 1u);
  const auto watch = [&](const std::string& out, const std::string& options) {
    return std::async(std::launch::async, [=, this] {
      return run_command(
          {"sh", "-c",
           "exec " + sandgate_binary() + " holds --config " + daemon_->config_path() + " --admin " +
               at + " watch " + options + " > " + out},
          20s);
    });
  };
  const std::string mine = dir_.file("watch-sb1.out");
  const std::string all = dir_.file("watch-all.out");
  auto sb1 = watch(mine, "--sandbox sb1");
  auto json = watch(all, "--json");
  // Subscribed once the pending hold is printed.
  ASSERT_TRUE(eventually([&] {
    return read_file(mine).find("held\t") != std::string::npos &&
           read_file(all).find("\"held\"") != std::string::npos;
  }));
  auto other = send_async(proxy_get(held(), "/second", "sb2", kToken2));
  const auto both = holds(2);
  for (const auto& h : both) {
    ASSERT_EQ(admin("POST", "/holds/" + id_of(h), R"({"action": "deny"})")->status, 200);
  }
  EXPECT_EQ(pending.get()->status, 403);
  EXPECT_EQ(other.get()->status, 403);
  ASSERT_TRUE(eventually([&] { return read_file(all).find("sb2") != std::string::npos; }));
  ASSERT_TRUE(eventually([&] { return read_file(mine).find("answered\t") != std::string::npos; }));
  EXPECT_EQ(daemon_->stop(), 0);
  const auto ended = sb1.get();
  EXPECT_EQ(ended.exit_code, 0) << ended.err;
  EXPECT_EQ(json.get().exit_code, 0);
  const std::string id = id_of(listed[0]);
  EXPECT_EQ(read_file(mine), "held\t" + id + "\tsb1\t" + held() + "\thttp\tGET /first\nanswered\t" +
                                 id + "\tsb1\t" + held() + "\tdenied\n");
  std::istringstream lines(read_file(all));
  std::vector<boost::json::object> events;
  for (std::string line; std::getline(lines, line);) {
    events.push_back(boost::json::parse(line).as_object());
  }
  ASSERT_EQ(events.size(), 4u) << read_file(all);
  EXPECT_EQ(events[0].at("event").as_string(), "held");
  EXPECT_EQ(events[0].at("path").as_string(), "/first");
  EXPECT_EQ(events[1].at("event").as_string(), "held");
  EXPECT_EQ(events[1].at("sandbox").as_string(), "sb2");
  EXPECT_EQ(events[3].at("event").as_string(), "answered");
  EXPECT_EQ(events[3].at("outcome").as_string(), "denied");
}

// An idle stream gets a keep-alive comment every 15 s (idle proxies and clients keep it), and
// goes on serving events after it.
TEST_F(ProxyHolds, AnIdleStreamGetsAKeepAliveAndGoesOn) {
  EventReader reader(daemon_->admin_port(), "?sandbox=sb1");
  ASSERT_NE(reader.head().find(" 200 "), std::string::npos);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(reader.keep_alive(17000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 14000ms);
  auto request = send_async(proxy_get(held(), "/later", "sb1", kToken1));
  const auto e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "held");
  ASSERT_EQ(admin("POST", "/holds/" + id_of(e->data), R"({"action": "allow_once"})")->status, 200);
  EXPECT_EQ(request.get()->status, 200);
}

}  // namespace
}  // namespace sandgate::test
