// The HTML form: one page, nothing fetched. Charts are SVG drawn here; hover text is SVG
// <title>, so no script is needed (and the page's CSP forbids any).
#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "audit/render.hpp"
#include "audit/time.hpp"

namespace sandgate::audit {

namespace {

constexpr std::string_view kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:1.2em 0 .3em}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
th{border-bottom:1px solid #999}td.n{text-align:right;font-variant-numeric:tabular-nums}
td.host,code{font-family:ui-monospace,monospace;word-break:break-all}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto}
.note{color:#666}.chart{display:block;margin:.3em 0}
.bar{fill:#c0392b}.bar2{fill:#2e6da4}.axis{stroke:#999}.lbl{font-size:11px;fill:#444}
)";

std::string num(std::uint64_t n) {
  return std::to_string(n);
}

std::string shown_sandbox(const std::string& s) {
  return s.empty() ? "(none)" : s;
}

std::string fixed(double v) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.1f", v);
  return buf.data();
}

// Denials per time bucket as bars, with the peak and the span labelled.
std::string series_svg(const DenialSeries& s, std::int64_t start, std::int64_t width_ms) {
  constexpr double kWidth = 900, kHeight = 90, kTop = 12, kBottom = 16;
  const std::uint64_t peak = *std::max_element(s.counts.begin(), s.counts.end());
  const double slot = kWidth / static_cast<double>(s.counts.size());
  std::string out = "<svg class=\"chart\" width=\"" + fixed(kWidth) + "\" height=\"" +
                    fixed(kHeight) + "\" viewBox=\"0 0 " + fixed(kWidth) + " " + fixed(kHeight) +
                    "\" role=\"img\" aria-label=\"denials over time\">";
  const double plot = kHeight - kTop - kBottom;
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    if (s.counts[i] == 0) continue;
    const double h = std::max(1.0, plot * static_cast<double>(s.counts[i]) /
                                       static_cast<double>(std::max<std::uint64_t>(peak, 1)));
    const std::int64_t from = start + static_cast<std::int64_t>(i) * width_ms;
    out += "<rect class=\"bar\" x=\"" + fixed(static_cast<double>(i) * slot) + "\" y=\"" +
           fixed(kTop + plot - h) + "\" width=\"" + fixed(std::max(1.0, slot - 1)) +
           "\" height=\"" + fixed(h) + "\"><title>" + num(s.counts[i]) + " denials from " +
           format_rfc3339_ms(from) + "</title></rect>";
  }
  const std::int64_t end = start + static_cast<std::int64_t>(s.counts.size()) * width_ms;
  out += "<line class=\"axis\" x1=\"0\" y1=\"" + fixed(kTop + plot) + "\" x2=\"" + fixed(kWidth) +
         "\" y2=\"" + fixed(kTop + plot) + "\"/>";
  out += "<text class=\"lbl\" x=\"0\" y=\"10\">peak " + num(peak) + " per " +
         num(static_cast<std::uint64_t>(width_ms / 1000)) + " s</text>";
  out += "<text class=\"lbl\" x=\"0\" y=\"" + fixed(kHeight - 3) + "\">" +
         format_rfc3339_ms(start) + "</text>";
  out += "<text class=\"lbl\" x=\"" + fixed(kWidth) + "\" y=\"" + fixed(kHeight - 3) +
         "\" text-anchor=\"end\">" + format_rfc3339_ms(end) + "</text>";
  return out + "</svg>";
}

// Horizontal bars, one per destination, labelled with the host and the value.
template <class Measure, class Label>
std::string bars_svg(const std::vector<DestinationGroup>& list, Measure measure, Label label,
                     std::string_view css) {
  constexpr double kWidth = 900, kRow = 20, kLabel = 360;
  if (list.empty()) return "<p class=\"note\">none</p>";
  std::uint64_t peak = 1;
  for (const auto& d : list) peak = std::max<std::uint64_t>(peak, measure(d));
  const double height = kRow * static_cast<double>(list.size()) + 4;
  std::string out = "<svg class=\"chart\" width=\"" + fixed(kWidth) + "\" height=\"" +
                    fixed(height) + "\" viewBox=\"0 0 " + fixed(kWidth) + " " + fixed(height) +
                    "\" role=\"img\">";
  for (std::size_t i = 0; i < list.size(); ++i) {
    const DestinationGroup& d = list[i];
    const double y = kRow * static_cast<double>(i);
    const double w = std::max(
        1.0, (kWidth - kLabel - 200) * static_cast<double>(measure(d)) / static_cast<double>(peak));
    std::string name = d.host + ":" + num(d.port);
    std::string shown = name;
    if (name.size() > 48) {
      std::size_t from = name.size() - 47;
      while (from < name.size() && (static_cast<unsigned char>(name[from]) & 0xC0U) == 0x80U) {
        ++from;  // not inside a UTF-8 sequence
      }
      shown = "\xE2\x80\xA6" + name.substr(from);
    }
    out += "<text class=\"lbl\" x=\"" + fixed(kLabel - 6) + "\" y=\"" + fixed(y + 14) +
           "\" text-anchor=\"end\">" + html_escape(shown) + "<title>" + html_escape(name) +
           "</title></text>";
    out += "<rect class=\"" + std::string(css) + "\" x=\"" + fixed(kLabel) + "\" y=\"" +
           fixed(y + 3) + "\" width=\"" + fixed(w) + "\" height=\"" + fixed(kRow - 6) + "\"/>";
    out += "<text class=\"lbl\" x=\"" + fixed(kLabel + w + 6) + "\" y=\"" + fixed(y + 14) + "\">" +
           html_escape(label(d)) + "</text>";
  }
  return out + "</svg>";
}

std::string td(std::string_view text, std::string_view css = {}) {
  std::string out = css.empty() ? "<td>" : "<td class=\"" + std::string(css) + "\">";
  return out + html_escape(text) + "</td>";
}

std::string tr(std::initializer_list<std::string> cells) {
  std::string out = "<tr>";
  for (const std::string& c : cells) out += c;
  return out + "</tr>";
}

std::string th(std::initializer_list<std::string_view> names) {
  std::string out = "<tr>";
  for (const std::string_view n : names) out += "<th>" + std::string(n) + "</th>";
  return out + "</tr>";
}

void overflow_note(std::ostream& out, const Overflow& o, std::string_view what, std::size_t limit) {
  if (o.lines == 0) return;
  out << "<p class=\"note\">About " << o.groups << " more " << what << " groups not shown ("
      << o.lines << " lines, past the limit of " << limit << " groups).</p>\n";
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in HTML text; show them as \xNN.
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) {
          std::array<char, 8> buf{};
          std::snprintf(buf.data(), buf.size(), "\\x%02x", static_cast<unsigned char>(c));
          out += buf.data();
        } else {
          out += c;
        }
    }
  }
  return out;
}

void render_html(const Report& r, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'\">\n"
         "<meta name=\"referrer\" content=\"no-referrer\">\n"
         "<title>sandgate audit report</title>\n<style>"
      << kStyle << "</style></head><body>\n<h1>sandgate audit report</h1>\n";
  out << "<p>" << r.lines + r.malformed + r.too_long << " lines read";
  if (r.malformed > 0) out << ", " << r.malformed << " malformed (skipped)";
  if (r.too_long > 0) out << ", " << r.too_long << " too long (skipped)";
  out << "; " << r.matched << " of " << r.lines << " events matched the filter.";
  if (r.matched > 0) {
    out << " From " << format_rfc3339_ms(r.first_ms) << " to " << format_rfc3339_ms(r.last_ms)
        << ".";
  }
  out << "</p>\n<p class=\"note\">Inputs: ";
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const InputSummary& in = r.inputs[i];
    out << (i == 0 ? "" : ", ") << "<code>" << html_escape(in.name) << "</code> (" << in.lines
        << " lines" << (in.compressed ? ", gzip" : "");
    if (!in.error.empty()) out << ", " << html_escape(in.error);
    out << ")";
  }
  out << "</p>\n";

  out << "<h2>Denials over time</h2>\n";
  if (r.series.empty()) out << "<p class=\"note\">No denials.</p>\n";
  for (const DenialSeries& s : r.series) {
    std::uint64_t total = 0;
    for (const std::uint64_t n : s.counts) total += n;
    out << "<h3>" << html_escape(shown_sandbox(s.sandbox)) << " &mdash; " << total
        << " denials</h3>\n"
        << series_svg(s, r.series_start_ms, r.series_width_ms) << "\n";
  }

  out << "<h2>Sandboxes</h2>\n<table>"
      << th({"sandbox", "lines", "connections", "denied", "errors", "bytes up", "bytes down",
             "first", "last"});
  for (const SandboxSummary& s : r.sandboxes) {
    out << tr({td(shown_sandbox(s.sandbox), "host"), td(num(s.lines), "n"),
               td(num(s.connections), "n"), td(num(s.denied), "n"), td(num(s.errors), "n"),
               td(human_bytes(s.bytes_up), "n"), td(human_bytes(s.bytes_down), "n"),
               td(format_rfc3339_ms(s.first_ms)), td(format_rfc3339_ms(s.last_ms))});
  }
  out << "</table>\n";
  overflow_note(out, r.sandbox_overflow, "sandbox", r.max_groups);

  out << "<h2>Denied destinations</h2>\n";
  if (r.denials.empty()) out << "<p class=\"note\">None.</p>\n";
  for (std::size_t i = 0; i < r.denials.size();) {
    const std::string& sandbox = r.denials[i].sandbox;
    out << "<h3>" << html_escape(shown_sandbox(sandbox)) << "</h3>\n<table>"
        << th({"host", "port", "reason", "count", "first", "last", "would allow it"});
    std::size_t shown = 0, more = 0;
    for (; i < r.denials.size() && r.denials[i].sandbox == sandbox; ++i) {
      const DenialGroup& g = r.denials[i];
      if (shown == r.top) {
        ++more;
        continue;
      }
      ++shown;
      out << tr({td(g.host, "host"), td(num(g.port), "n"), td(g.reason), td(num(g.count), "n"),
                 td(format_rfc3339_ms(g.first_ms)), td(format_rfc3339_ms(g.last_ms)),
                 td(g.suggestion.empty() ? "-" : g.suggestion, "host")});
    }
    out << "</table>\n";
    if (more > 0) {
      out << "<p class=\"note\">" << more << " more groups not shown (--top).</p>\n";
    }
  }
  overflow_note(out, r.denial_overflow, "denial", r.max_groups);

  out << "<h2>Config lines that would allow them</h2>\n";
  if (r.suggestions.empty()) out << "<p class=\"note\">None.</p>\n";
  for (const SuggestionBlock& b : r.suggestions) {
    std::string who;
    for (const std::string& s : b.sandboxes) who += (who.empty() ? "" : ", ") + shown_sandbox(s);
    out << "<p>" << html_escape(who) << ": " << b.denials << " denials";
    if (b.kind == "file") out << ", in <code>" << html_escape(b.target) << "</code>";
    out << "</p>\n<pre>";
    if (b.kind == "table") out << html_escape(b.target) << "\n";
    for (const std::string& line : b.lines) out << html_escape(line) << "\n";
    if (!b.blocks.empty()) {
      out << "# at the end of " << (b.kind == "file" ? "that file" : "the main file") << ":\n";
    }
    for (const std::string& block : b.blocks) out << html_escape(block) << "\n";
    out << "</pre>\n";
  }

  out << "<h2>Top destinations by bytes</h2>\n"
      << bars_svg(
             r.top_by_bytes, [](const DestinationGroup& d) { return d.bytes(); },
             [](const DestinationGroup& d) {
               return human_bytes(d.bytes()) + " (" + human_bytes(d.bytes_up) + " up)";
             },
             "bar2")
      << "\n<h2>Top destinations by connections</h2>\n"
      << bars_svg(
             r.top_by_connections, [](const DestinationGroup& d) { return d.connections; },
             [](const DestinationGroup& d) { return num(d.connections); }, "bar2")
      << "\n<p class=\"note\">" << r.destinations << " distinct destinations.</p>\n";
  overflow_note(out, r.destination_overflow, "destination", r.max_groups);

  out << "<h2>Errors by side</h2>\n";
  if (r.errors.empty()) {
    out << "<p class=\"note\">None.</p>\n";
  } else {
    out << "<table>" << th({"side", "code", "sandbox", "count", "first", "last"});
    for (const ErrorGroup& e : r.errors) {
      out << tr({td(e.side), td(e.code), td(shown_sandbox(e.sandbox), "host"),
                 td(num(e.count), "n"), td(format_rfc3339_ms(e.first_ms)),
                 td(format_rfc3339_ms(e.last_ms))});
    }
    out << "</table>\n";
  }
  overflow_note(out, r.error_overflow, "error", r.max_groups);

  out << "<h2>Credentials by host</h2>\n";
  if (r.credentials.empty()) {
    out << "<p class=\"note\">None in these lines.</p>\n";
  } else {
    out << "<table>" << th({"host", "name", "fingerprint", "uses", "first", "last"});
    for (const CredentialGroup& c : r.credentials) {
      out << tr({td(c.host, "host"), td(c.name), td(c.fingerprint, "host"), td(num(c.count), "n"),
                 td(format_rfc3339_ms(c.first_ms)), td(format_rfc3339_ms(c.last_ms))});
    }
    out << "</table>\n";
  }
  overflow_note(out, r.credential_overflow, "credential", r.max_groups);
  out << "</body></html>\n";
}

}  // namespace sandgate::audit
