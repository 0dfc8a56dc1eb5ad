#include "launcher/outcome.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>

namespace sandgate::launcher {
namespace {

namespace json = boost::json;

json::object parsed(const RunOutcome& o) {
  const std::string line = outcome_json(o);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line
  return json::parse(line).as_object();
}

TEST(LauncherOutcome, CommandThatRanToItsEnd) {
  RunOutcome o;
  o.sandbox = "agent-1";
  o.started = true;
  o.status = 3;
  o.exit_code = 3;
  o.duration = std::chrono::milliseconds(1234);
  o.denials = DenialSnapshot{7,
                             3,
                             0,
                             {{"http", "denied.test", 80, "no_rule_matched", 2},
                              {"dns", "x.test", 0, "no_rule_matched", 1}}};
  classify(o, false);
  const json::object j = parsed(o);
  EXPECT_EQ(j.at("sandbox"), "agent-1");
  EXPECT_TRUE(j.at("error").is_null());
  EXPECT_TRUE(j.at("retryable").is_null());
  EXPECT_EQ(j.at("status"), 3);
  EXPECT_EQ(j.at("exit_code"), 3);
  EXPECT_TRUE(j.at("signal").is_null());
  EXPECT_EQ(j.at("duration_ms"), 1234);
  EXPECT_EQ(j.at("denials_total"), 3);
  const json::array& d = j.at("denials").as_array();
  ASSERT_EQ(d.size(), 2U);
  EXPECT_EQ(d[0].at("host"), "denied.test");
  EXPECT_EQ(d[0].at("port"), 80);
  EXPECT_EQ(d[0].at("count"), 2);
  EXPECT_TRUE(d[1].at("port").is_null());
}

TEST(LauncherOutcome, TimeoutComesBeforeOom) {
  RunOutcome o;
  o.sandbox = "s";
  o.started = true;
  o.status = 137;
  o.signal = 9;
  o.timeout = std::chrono::milliseconds(500);
  o.memory_bytes = 1 << 20;
  o.oom_kills = 1;
  classify(o, true);
  json::object j = parsed(o);
  EXPECT_EQ(j.at("error"), "SANDBOX_COMMAND_TIMEOUT");
  EXPECT_EQ(j.at("status"), kTimeoutExit);
  EXPECT_EQ(j.at("retryable"), false);
  EXPECT_EQ(j.at("signal"), 9);
  EXPECT_EQ(j.at("signal_name"), "SIGKILL");
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_EQ(j.at("limits").at("timeout_ms"), 500);

  RunOutcome oom = o;
  oom.error.clear();
  oom.status = 137;
  classify(oom, false);
  j = parsed(oom);
  EXPECT_EQ(j.at("error"), "SANDBOX_OOM");
  EXPECT_EQ(j.at("status"), 137);  // the command's own
  EXPECT_EQ(j.at("oom_kills"), 1);
  EXPECT_TRUE(j.at("denials").is_null());

  RunOutcome none = o;
  none.error.clear();
  none.oom_kills = 0;
  none.status = 137;
  classify(none, false);
  EXPECT_TRUE(parsed(none).at("error").is_null());
}

TEST(LauncherOutcome, DenialsBetweenSnapshots) {
  const DenialSnapshot start{
      4,
      5,
      1,
      {{"http", "a.test", 80, "no_rule_matched", 3}, {"dns", "b.test", 0, "no_rule_matched", 2}}};
  const DenialSnapshot end{4,
                           9,
                           2,
                           {{"http", "a.test", 80, "no_rule_matched", 3},
                            {"dns", "b.test", 0, "no_rule_matched", 4},
                            {"tls", "c.test", 443, "deny_rule", 1}}};
  const DenialSnapshot d = denials_between(start, end);
  EXPECT_EQ(d.total, 4U);
  EXPECT_EQ(d.overflow, 1U);
  EXPECT_EQ(d.denials, (std::vector<DenialCount>{{"dns", "b.test", 0, "no_rule_matched", 2},
                                                 {"tls", "c.test", 443, "deny_rule", 1}}));
  // Counts that began again (another epoch) are taken as they are.
  DenialSnapshot again = end;
  again.epoch = 5;
  EXPECT_EQ(denials_between(start, again).denials, again.denials);
  EXPECT_EQ(denials_between(start, again).total, 9U);
}

TEST(LauncherOutcome, ParsesTheDaemonsDenialsAnswer) {
  std::string error;
  const auto s = parse_denials(
      R"({"id":"x","epoch":2,"total":3,"overflow":0,"denials":[)"
      R"({"protocol":"dns","host":"a.test","port":null,"reason":"no_rule_matched","count":3}]})",
      &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->epoch, 2U);
  EXPECT_EQ(s->denials, (std::vector<DenialCount>{{"dns", "a.test", 0, "no_rule_matched", 3}}));
  for (const char* bad : {"", "[]", R"({"epoch":1})",
                          R"({"epoch":1,"total":1,"overflow":0,"denials":[{"host":1}]})"}) {
    error.clear();
    EXPECT_FALSE(parse_denials(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  // The daemon's suggestion, when it has one.
  const auto with = parse_denials(
      R"({"epoch":2,"total":1,"overflow":0,"denials":[{"protocol":"http","host":"a.test",)"
      R"("port":80,"reason":"no_matching_rule","count":1,"suggestion":"allow = [\"a.test:80\"]"}]})",
      &error);
  ASSERT_TRUE(with) << error;
  EXPECT_EQ(with->denials.at(0).suggestion, "allow = [\"a.test:80\"]");
}

TEST(LauncherOutcome, DenialSummaryNamesEachDestinationOnce) {
  EXPECT_EQ(denial_summary("sb", DenialSnapshot{}), "");
  const DenialSnapshot d{
      1,
      6,
      0,
      {{"dns", "a.test", 0, "no_matching_rule", 1, ""},
       {"http", "b.test", 80, "no_matching_rule", 2, "sandgate-launch --allow \"b.test:80\""},
       {"connect", "b.test", 80, "port_not_allowed", 1, ""},
       {"tls", "c\x1b[2J.test", 443, "no_matching_rule", 2, ""}}};
  EXPECT_EQ(denial_summary("sb", d),
            "sandgate-launch: sandbox \"sb\": the network refused 3 destinations (6 times):\n"
            "  b.test:80 (connect,http, 3x): no_matching_rule,port_not_allowed; to allow: "
            "sandgate-launch --allow \"b.test:80\"\n"
            "  c?[2J.test:443 (tls, 2x): no_matching_rule\n"
            "  a.test (dns, 1x): no_matching_rule\n");
}

TEST(LauncherOutcome, DenialSummaryIsBounded) {
  DenialSnapshot d{1, 0, 4, {}};
  for (int i = 0; i < 30; ++i) {
    d.denials.push_back({"dns", "n" + std::to_string(i) + ".test", 0, "no_matching_rule", 1, ""});
    ++d.total;
  }
  d.total += 4;
  const std::string s = denial_summary("sb", d, 20);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 20) << s;
  EXPECT_NE(s.find("the network refused 30 destinations (34 times)"), std::string::npos) << s;
  EXPECT_NE(s.find("\n  and 12 more, and 4 refusals not itemized (sandgate-launch run --json "
                   "lists them)\n"),
            std::string::npos)
      << s;
  // Few destinations, but some refusals past the daemon's key cap.
  const DenialSnapshot capped{1, 5, 4, {{"dns", "a.test", 0, "no_matching_rule", 1, ""}}};
  EXPECT_NE(denial_summary("sb", capped).find("  and 4 refusals not itemized"), std::string::npos);
}

}  // namespace
}  // namespace sandgate::launcher
