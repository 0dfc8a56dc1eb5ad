// libFuzzer target for `sandgate audit`'s reader: the input is cut into lines, each parsed by
// audit::LineParser and added to an Aggregator with small limits, then the report is rendered
// in all three forms. Besides "no crash, no sanitizer report" it checks that every line is
// either an event or malformed, that the JSON form parses back as one object, and that the
// HTML form holds no markup from the input (no "<script", no "<img").
#include <boost/json/parse.hpp>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "audit/event.hpp"
#include "audit/render.hpp"
#include "audit/report.hpp"

namespace {

namespace audit = sandgate::audit;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  audit::Limits limits;
  limits.max_groups = 8;
  limits.max_time_buckets = 4;
  audit::Aggregator aggregator(audit::Filter{}, limits);
  audit::LineParser parser;
  std::uint64_t lines = 0;
  while (!input.empty()) {
    const std::size_t nl = input.find('\n');
    const std::string_view line = input.substr(0, nl);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    ++lines;
    audit::LineError error{};
    if (const auto event = parser.parse(line, error)) {
      aggregator.add(*event);
    } else {
      aggregator.add_malformed();
    }
  }
  const audit::Report report = aggregator.take_report(3);
  check(report.lines + report.malformed == lines);

  std::ostringstream json_out;
  audit::render_json(report, json_out);
  boost::system::error_code ec;
  const auto value = boost::json::parse(json_out.str(), ec);
  check(!ec && value.is_object());

  std::ostringstream html_out;
  audit::render_html(report, html_out);
  const std::string html = html_out.str();
  check(html.find("<script") == std::string::npos && html.find("<img") == std::string::npos);

  std::ostringstream table_out;
  audit::render_table(report, table_out);
  check(table_out.str().find('\x1b') == std::string::npos);
  return 0;
}
