#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <map>

#include "audit/render.hpp"
#include "audit/time.hpp"

namespace sandgate::audit {

namespace json = boost::json;

namespace {

json::value time_or_null(std::int64_t ms, bool present) {
  if (!present) return nullptr;
  return json::value(format_rfc3339_ms(ms));
}

json::object overflow_json(const Overflow& o) {
  return {{"lines", o.lines}, {"groups", o.groups}};
}

json::array destinations_json(const std::vector<DestinationGroup>& list) {
  json::array out;
  for (const DestinationGroup& d : list) {
    out.push_back(json::object{{"host", d.host},
                               {"port", d.port},
                               {"connections", d.connections},
                               {"denied", d.denied},
                               {"errors", d.errors},
                               {"bytes_up", d.bytes_up},
                               {"bytes_down", d.bytes_down},
                               {"bytes", d.bytes()}});
  }
  return out;
}

json::array strings(const std::vector<std::string>& list) {
  json::array out;
  for (const std::string& s : list) out.emplace_back(s);
  return out;
}

}  // namespace

std::string render_json(const Report& r) {
  json::object root;
  root["schema"] = "sandgate-audit-report/1";
  json::array inputs;
  for (const InputSummary& in : r.inputs) {
    json::object o{
        {"name", in.name}, {"lines", in.lines}, {"bytes", in.bytes}, {"compressed", in.compressed}};
    if (!in.error.empty()) o["error"] = in.error;
    inputs.push_back(std::move(o));
  }
  root["inputs"] = std::move(inputs);
  root["lines"] = r.lines;
  root["matched"] = r.matched;
  root["malformed"] = r.malformed;
  root["too_long"] = r.too_long;
  root["first_seen"] = time_or_null(r.first_ms, r.matched > 0);
  root["last_seen"] = time_or_null(r.last_ms, r.matched > 0);

  // Denial groups nested under their sandbox.
  std::map<std::string, json::array> denials;
  for (const DenialGroup& g : r.denials) {
    json::object o{{"host", g.host},
                   {"port", g.port},
                   {"reason", g.reason},
                   {"rule", g.rule},
                   {"count", g.count},
                   {"first_seen", format_rfc3339_ms(g.first_ms)},
                   {"last_seen", format_rfc3339_ms(g.last_ms)},
                   {"protocols", strings(g.protocols)},
                   {"suggestion_source", source_name(g.suggestion_source)}};
    o["suggestion"] = g.suggestion.empty() ? json::value(nullptr) : json::value(g.suggestion);
    denials[g.sandbox].push_back(std::move(o));
  }
  json::array sandboxes;
  for (const SandboxSummary& s : r.sandboxes) {
    json::object o{{"sandbox", s.sandbox},
                   {"lines", s.lines},
                   {"connections", s.connections},
                   {"denied", s.denied},
                   {"errors", s.errors},
                   {"suppressed", s.suppressed},
                   {"bytes_up", s.bytes_up},
                   {"bytes_down", s.bytes_down},
                   {"first_seen", format_rfc3339_ms(s.first_ms)},
                   {"last_seen", format_rfc3339_ms(s.last_ms)}};
    auto it = denials.find(s.sandbox);
    o["denials"] = it == denials.end() ? json::array() : std::move(it->second);
    sandboxes.push_back(std::move(o));
  }
  root["sandboxes"] = std::move(sandboxes);

  json::array suggestions;
  for (const SuggestionBlock& b : r.suggestions) {
    suggestions.push_back(json::object{{"target", b.target},
                                       {"kind", b.kind},
                                       {"lines", strings(b.lines)},
                                       {"sandboxes", strings(b.sandboxes)},
                                       {"denials", b.denials}});
  }
  root["suggestions"] = std::move(suggestions);

  root["destinations"] = json::object{{"distinct", r.destinations},
                                      {"top", r.top},
                                      {"by_bytes", destinations_json(r.top_by_bytes)},
                                      {"by_connections", destinations_json(r.top_by_connections)}};

  json::array errors;
  std::map<std::string, std::uint64_t> by_side;
  for (const ErrorGroup& e : r.errors) {
    by_side[e.side] += e.count;
    errors.push_back(json::object{{"side", e.side},
                                  {"code", e.code},
                                  {"sandbox", e.sandbox},
                                  {"count", e.count},
                                  {"first_seen", format_rfc3339_ms(e.first_ms)},
                                  {"last_seen", format_rfc3339_ms(e.last_ms)}});
  }
  json::object sides;
  for (const auto& [side, n] : by_side) sides[side] = n;
  root["errors_by_side"] = std::move(sides);
  root["errors"] = std::move(errors);

  json::array credentials;
  for (const CredentialGroup& c : r.credentials) {
    credentials.push_back(json::object{{"host", c.host},
                                       {"name", c.name},
                                       {"fingerprint", c.fingerprint},
                                       {"count", c.count},
                                       {"first_seen", format_rfc3339_ms(c.first_ms)},
                                       {"last_seen", format_rfc3339_ms(c.last_ms)}});
  }
  root["credentials"] = std::move(credentials);

  json::array series;
  for (const DenialSeries& s : r.series) {
    json::array counts;
    for (const std::uint64_t n : s.counts) counts.push_back(n);
    series.push_back(json::object{{"sandbox", s.sandbox}, {"counts", std::move(counts)}});
  }
  root["denials_over_time"] =
      json::object{{"start", time_or_null(r.series_start_ms, r.series_width_ms > 0)},
                   {"bucket_ms", r.series_width_ms},
                   {"series", std::move(series)}};

  root["not_shown"] = json::object{{"denials", overflow_json(r.denial_overflow)},
                                   {"destinations", overflow_json(r.destination_overflow)},
                                   {"errors", overflow_json(r.error_overflow)},
                                   {"credentials", overflow_json(r.credential_overflow)},
                                   {"sandboxes", overflow_json(r.sandbox_overflow)}};
  return json::serialize(root) + "\n";
}

}  // namespace sandgate::audit
