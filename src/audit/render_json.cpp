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

void render_json(const Report& r, std::ostream& out) {
  // Written piece by piece: one group at a time is a tree, never the whole report, so the
  // output costs memory for one group whatever the number of groups.
  const auto field = [&](std::string_view key, const json::value& v, bool first = false) {
    out << (first ? "" : ",") << json::serialize(json::string_view(key.data(), key.size())) << ":"
        << json::serialize(v);
  };
  out << "{";
  field("schema", "sandgate-audit-report/1", true);
  json::array inputs;
  for (const InputSummary& in : r.inputs) {
    json::object o{
        {"name", in.name}, {"lines", in.lines}, {"bytes", in.bytes}, {"compressed", in.compressed}};
    if (!in.error.empty()) o["error"] = in.error;
    inputs.push_back(std::move(o));
  }
  field("inputs", inputs);
  field("lines", r.lines);
  field("matched", r.matched);
  field("malformed", r.malformed);
  field("too_long", r.too_long);
  field("first_seen", time_or_null(r.first_ms, r.matched > 0));
  field("last_seen", time_or_null(r.last_ms, r.matched > 0));

  // Denial groups nested under their sandbox (both lists are sorted by sandbox id).
  out << ",\"sandboxes\":[";
  std::size_t g = 0;
  for (std::size_t i = 0; i < r.sandboxes.size(); ++i) {
    const SandboxSummary& s = r.sandboxes[i];
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
    std::string head = json::serialize(o);
    head.pop_back();  // the closing brace: the denials follow
    out << (i == 0 ? "" : ",") << head << ",\"denials\":[";
    while (g < r.denials.size() && r.denials[g].sandbox < s.sandbox) ++g;  // an overflowed sandbox
    for (bool first = true; g < r.denials.size() && r.denials[g].sandbox == s.sandbox; ++g) {
      const DenialGroup& d = r.denials[g];
      json::object group{{"host", d.host},
                         {"port", d.port},
                         {"reason", d.reason},
                         {"rule", d.rule},
                         {"count", d.count},
                         {"first_seen", format_rfc3339_ms(d.first_ms)},
                         {"last_seen", format_rfc3339_ms(d.last_ms)},
                         {"protocols", strings(d.protocols)},
                         {"suggestion_source", source_name(d.suggestion_source)}};
      group["suggestion"] = d.suggestion.empty() ? json::value(nullptr) : json::value(d.suggestion);
      out << (first ? "" : ",") << json::serialize(group);
      first = false;
    }
    out << "]}";
  }
  out << "]";

  json::array suggestions;
  for (const SuggestionBlock& b : r.suggestions) {
    suggestions.push_back(json::object{{"target", b.target},
                                       {"kind", b.kind},
                                       {"lines", strings(b.lines)},
                                       {"blocks", strings(b.blocks)},
                                       {"sandboxes", strings(b.sandboxes)},
                                       {"denials", b.denials}});
  }
  field("suggestions", suggestions);

  field("destinations", json::object{{"distinct", r.destinations},
                                     {"top", r.top},
                                     {"by_bytes", destinations_json(r.top_by_bytes)},
                                     {"by_connections", destinations_json(r.top_by_connections)}});

  std::map<std::string, std::uint64_t> by_side;
  for (const ErrorGroup& e : r.errors) by_side[e.side] += e.count;
  json::object sides;
  for (const auto& [side, n] : by_side) sides[side] = n;
  field("errors_by_side", sides);
  out << ",\"errors\":[";
  for (std::size_t i = 0; i < r.errors.size(); ++i) {
    const ErrorGroup& e = r.errors[i];
    out << (i == 0 ? "" : ",")
        << json::serialize(json::object{{"side", e.side},
                                        {"code", e.code},
                                        {"sandbox", e.sandbox},
                                        {"count", e.count},
                                        {"first_seen", format_rfc3339_ms(e.first_ms)},
                                        {"last_seen", format_rfc3339_ms(e.last_ms)}});
  }
  out << "],\"credentials\":[";
  for (std::size_t i = 0; i < r.credentials.size(); ++i) {
    const CredentialGroup& c = r.credentials[i];
    out << (i == 0 ? "" : ",")
        << json::serialize(json::object{{"host", c.host},
                                        {"name", c.name},
                                        {"fingerprint", c.fingerprint},
                                        {"count", c.count},
                                        {"first_seen", format_rfc3339_ms(c.first_ms)},
                                        {"last_seen", format_rfc3339_ms(c.last_ms)}});
  }
  out << "]";

  json::array series;
  for (const DenialSeries& s : r.series) {
    json::array counts;
    for (const std::uint64_t n : s.counts) counts.push_back(n);
    series.push_back(json::object{{"sandbox", s.sandbox}, {"counts", std::move(counts)}});
  }
  field("denials_over_time",
        json::object{{"start", time_or_null(r.series_start_ms, r.series_width_ms > 0)},
                     {"bucket_ms", r.series_width_ms},
                     {"series", std::move(series)}});

  field("not_shown", json::object{{"denials", overflow_json(r.denial_overflow)},
                                  {"destinations", overflow_json(r.destination_overflow)},
                                  {"errors", overflow_json(r.error_overflow)},
                                  {"credentials", overflow_json(r.credential_overflow)},
                                  {"sandboxes", overflow_json(r.sandbox_overflow)}});
  out << "}\n";
}

}  // namespace sandgate::audit
