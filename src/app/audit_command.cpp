#include "app/audit_command.hpp"

#include <charconv>
#include <chrono>
#include <iostream>

#include "audit/event.hpp"
#include "audit/input.hpp"
#include "audit/render.hpp"
#include "audit/time.hpp"
#include "config/config.hpp"
#include "telemetry/audit_chain.hpp"

namespace sandgate::app {

namespace {

std::optional<std::size_t> parse_count(const std::string& text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0) return std::nullopt;
  return value;
}

// Feeds lines through the parser into the aggregator.
class Feed final : public audit::LineSink {
 public:
  explicit Feed(audit::Aggregator& aggregator) : aggregator_(aggregator) {}
  void line(std::string_view text) override {
    audit::LineError error{};
    if (const auto event = parser_.parse(text, error)) {
      // The chain's own records (checkpoints) are no egress events.
      if (!event->code.starts_with(telemetry::kChainCodePrefix)) aggregator_.add(*event);
    } else {
      aggregator_.add_malformed();
    }
  }
  void too_long() override { aggregator_.add_too_long(); }

 private:
  audit::Aggregator& aggregator_;
  audit::LineParser parser_;
};

}  // namespace

std::optional<AuditOptions> parse_audit_args(const std::vector<std::string>& args,
                                             std::string& error) {
  AuditOptions o;
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "-" || !a.starts_with("--")) {
      o.inputs.push_back(a);
      continue;
    }
    if (a == "--denied-only") {
      o.filter.denied_only = true;
      continue;
    }
    if (!has_value) {
      error = "audit: " + a + (a == "--help" ? " is not an option of audit" : " needs a value");
      return std::nullopt;
    }
    const std::string& v = args[++i];
    if (a == "--sandbox") {
      o.filter.sandboxes.push_back(v);
    } else if (a == "--code") {
      o.filter.codes.push_back(v);
    } else if (a == "--host") {
      o.filter.hosts.push_back(v);
    } else if (a == "--since" || a == "--until") {
      const auto t = audit::parse_time_arg(v, now_ms);
      if (!t) {
        error = "audit: " + a + " \"" + v +
                "\" is neither an RFC 3339 time (2026-12-02T13:00:00Z) nor a duration (90m, 2h, "
                "7d)";
        return std::nullopt;
      }
      (a == "--since" ? o.filter.since_ms : o.filter.until_ms) = *t;
    } else if (a == "--format") {
      if (v != "table" && v != "json" && v != "html") {
        error = "audit: --format is table, json or html, not \"" + v + "\"";
        return std::nullopt;
      }
      o.format = v;
    } else if (a == "--top" || a == "--max-groups" || a == "--max-line-bytes") {
      const auto n = parse_count(v);
      if (!n) {
        error = "audit: " + a + " needs a positive number, not \"" + v + "\"";
        return std::nullopt;
      }
      if (a == "--top") o.top = *n;
      if (a == "--max-groups") o.limits.max_groups = *n;
      if (a == "--max-line-bytes") o.max_line_bytes = *n;
    } else if (a == "--config") {
      o.config_path = v;
    } else {
      error = "audit: unknown option \"" + a + "\"";
      return std::nullopt;
    }
  }
  if (o.inputs.empty()) o.inputs.emplace_back("-");
  return o;
}

int run_audit(const AuditOptions& options) {
  std::optional<config::Config> cfg;
  if (!options.config_path.empty()) {
    try {
      cfg = config::load_config(options.config_path);
    } catch (const config::ConfigErrors& e) {
      for (const auto& error : e.errors()) std::cerr << error.to_string() << "\n";
      std::cerr << options.config_path << ": " << e.errors().size() << " error(s)\n";
      return 2;
    }
  }
  audit::Placer placer;
  if (cfg) {
    placer = [&cfg](std::string_view sandbox) { return config::home_of(*cfg, sandbox); };
  }
  audit::Aggregator aggregator(options.filter, options.limits, placer);
  Feed feed(aggregator);
  std::vector<audit::InputSummary> inputs;
  int status = 0;
  for (const std::string& path : options.inputs) {
    audit::InputSummary summary = audit::read_lines(path, options.max_line_bytes, feed);
    if (!summary.error.empty()) {
      std::cerr << "sandgate audit: " << path << ": " << summary.error << "\n";
      status = 1;
    }
    inputs.push_back(std::move(summary));
  }
  audit::Report report = aggregator.take_report(options.top);
  std::ios::sync_with_stdio(false);  // the report is many small writes
  report.inputs = std::move(inputs);
  if (options.format == "json") {
    audit::render_json(report, std::cout);
  } else if (options.format == "html") {
    audit::render_html(report, std::cout);
  } else {
    audit::render_table(report, std::cout);
  }
  std::cout.flush();
  return std::cout.good() ? status : 1;
}

}  // namespace sandgate::app
