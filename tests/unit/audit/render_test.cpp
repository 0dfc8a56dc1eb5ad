// The renderers on a report with hostile strings in it: HTML escapes them and fetches
// nothing; the terminal form shows control characters escaped; JSON parses back.
#include "audit/render.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <sstream>
#include <string>

namespace sandgate::audit {
namespace {

constexpr std::int64_t kT0 = 1'796'169'600'000;
const std::string kHostile = "<img src=x onerror=alert(1)>\"'&.evil\x1b[2J.example";

Report hostile_report() {
  Aggregator a{Filter{}};
  AuditEvent e;
  e.time_ms = kT0;
  e.code = "SANDBOX_NETWORK_DENIED";
  e.sandbox = "<b>sb</b>";
  e.host = kHostile;
  e.port = 443;
  e.reason = "invalid_host";
  e.suggestion = "[sandboxes.x] allow = [\"</pre><script>x()</script>\"]";
  a.add(e);
  e.code = "connection_closed";
  e.bytes_down = 99;
  a.add(e);
  Report r = a.take_report(10);
  InputSummary input;
  input.name = "<in>.log";
  input.lines = 2;
  r.inputs.push_back(input);
  return r;
}

TEST(AuditRender, HtmlEscapesTheLogAndReferencesNothing) {
  std::ostringstream out;
  render_html(hostile_report(), out);
  const std::string html = out.str();
  for (const char* absent : {"<img", "<script", "<b>", "</pre><", "http://", "https://", "url(",
                             "src=\"", "href", "@import", "\x1b"}) {
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;.evil\\x1b[2J.example"),
            std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;sb&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
}

TEST(AuditRender, TableEscapesControlCharacters) {
  std::ostringstream out;
  render_table(hostile_report(), out);
  const std::string text = out.str();
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("\\x1b[2J"), std::string::npos);
  EXPECT_EQ(terminal_safe("a\x07"
                          "b\xC2\x9B"
                          "c\xE2\x80\xAE"
                          "d\xC3\xA9"),
            "a\\x07b\\u009bc\\u202ed\xC3\xA9");
}

TEST(AuditRender, JsonParsesBackWithTheHostileStringsIntact) {
  std::ostringstream out;
  render_json(hostile_report(), out);
  const boost::json::value v = boost::json::parse(out.str());
  const auto& sandbox = v.at("sandboxes").at(0);
  EXPECT_EQ(sandbox.at("sandbox").as_string(), "<b>sb</b>");
  EXPECT_EQ(sandbox.at("denials").at(0).at("host").as_string(), kHostile);
  EXPECT_EQ(v.at("schema").as_string(), "sandgate-audit-report/1");
}

TEST(AuditRender, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(5ULL << 30), "5.0 GiB");
}

}  // namespace
}  // namespace sandgate::audit
