#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "audit/render.hpp"
#include "audit/time.hpp"

namespace sandgate::audit {

namespace {

constexpr std::size_t kMaxCell = 64;

// Width on a terminal, roughly: code points, not bytes.
std::size_t width(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0U) != 0x80U ? 1 : 0;
  return n;
}

// At most kMaxCell code points, "…" marking a cut.
std::string cell(std::string_view s) {
  if (width(s) <= kMaxCell) return std::string(s);
  std::size_t points = 0;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0U) != 0x80U && ++points == kMaxCell) break;
  }
  return std::string(s.substr(0, i)) + "\xE2\x80\xA6";
}

// Columns padded to their widest cell; the last one is not padded.
class Columns {
 public:
  explicit Columns(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) {
    for (std::string& c : row) c = cell(terminal_safe(c));
    rows_.push_back(std::move(row));
  }
  void print(std::ostream& out, std::string_view indent = "  ") const {
    std::vector<std::size_t> widths(rows_.front().size(), 0);
    for (const auto& row : rows_) {
      for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width(row[i]));
    }
    for (const auto& row : rows_) {
      out << indent;
      for (std::size_t i = 0; i < row.size(); ++i) {
        out << row[i];
        if (i + 1 < row.size()) out << std::string(widths[i] - width(row[i]) + 2, ' ');
      }
      out << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string num(std::uint64_t n) {
  return std::to_string(n);
}

std::string shown_sandbox(const std::string& s) {
  return s.empty() ? "(none)" : s;
}

void not_shown(std::ostream& out, const Overflow& o, std::string_view what, std::size_t limit) {
  if (o.lines == 0) return;
  out << "  ... about " << o.groups << " more " << what << " groups not shown (" << o.lines
      << " lines; past the limit of " << limit << " groups, --max-groups)\n";
}

// A suggestion in one table cell: a [[...]] block's lines joined by spaces.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

std::string terminal_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::array<char, 16> buf{};
    if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf.data(), buf.size(), "\\x%02x", c);
      out += buf.data();
      continue;
    }
    // C1 controls (U+0080-U+009F) and bidi overrides (U+202A-U+202E, U+2066-U+2069).
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      out += buf.data();
      ++i;
      continue;
    }
    if (c == 0xE2 && i + 2 < s.size()) {
      const auto b1 = static_cast<unsigned char>(s[i + 1]);
      const auto b2 = static_cast<unsigned char>(s[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)) {
        const unsigned cp = 0x2000U + ((b1 & 0x3FU) << 6U) + (b2 & 0x3FU);
        std::snprintf(buf.data(), buf.size(), "\\u%04x", cp);
        out += buf.data();
        i += 2;
        continue;
      }
    }
    out += static_cast<char>(c);
  }
  return out;
}

std::string human_bytes(std::uint64_t n) {
  static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  std::size_t unit = 0;
  while (v >= 1024 && unit + 1 < kUnits.size()) {
    v /= 1024;
    ++unit;
  }
  std::array<char, 32> buf{};
  if (unit == 0) {
    std::snprintf(buf.data(), buf.size(), "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf.data(), buf.size(), "%.1f %s", v, kUnits[unit]);
  }
  return buf.data();
}

void render_table(const Report& r, std::ostream& out) {
  out << "sandgate audit: " << r.lines + r.malformed + r.too_long << " lines read";
  if (r.malformed > 0) out << ", " << r.malformed << " malformed (skipped)";
  if (r.too_long > 0) out << ", " << r.too_long << " too long (skipped)";
  out << "; " << r.matched << " of " << r.lines << " events matched the filter\n";
  if (r.matched > 0) {
    out << "  from " << format_rfc3339_ms(r.first_ms) << " to " << format_rfc3339_ms(r.last_ms)
        << "\n";
  }
  for (const InputSummary& in : r.inputs) {
    if (!in.error.empty()) out << "  " << terminal_safe(in.name) << ": " << in.error << "\n";
  }

  out << "\nSandboxes\n";
  Columns sandboxes({"SANDBOX", "LINES", "CONNECTIONS", "DENIED", "ERRORS", "BYTES UP",
                     "BYTES DOWN", "FIRST", "LAST"});
  for (const SandboxSummary& s : r.sandboxes) {
    sandboxes.add({shown_sandbox(s.sandbox), num(s.lines), num(s.connections), num(s.denied),
                   num(s.errors), human_bytes(s.bytes_up), human_bytes(s.bytes_down),
                   format_rfc3339_ms(s.first_ms), format_rfc3339_ms(s.last_ms)});
  }
  sandboxes.print(out);
  not_shown(out, r.sandbox_overflow, "sandbox", r.max_groups);

  out << "\nDenied destinations\n";
  if (r.denials.empty()) out << "  none\n";
  for (std::size_t i = 0; i < r.denials.size();) {
    const std::string& sandbox = r.denials[i].sandbox;
    out << "  " << terminal_safe(shown_sandbox(sandbox)) << "\n";
    Columns table({"HOST", "PORT", "REASON", "COUNT", "FIRST", "LAST", "SUGGESTION"});
    std::size_t shown = 0, more = 0;
    std::uint64_t more_lines = 0;
    for (; i < r.denials.size() && r.denials[i].sandbox == sandbox; ++i) {
      const DenialGroup& g = r.denials[i];
      if (shown == r.top) {
        ++more;
        more_lines += g.count;
        continue;
      }
      ++shown;
      table.add({g.host, num(g.port), g.reason, num(g.count), format_rfc3339_ms(g.first_ms),
                 format_rfc3339_ms(g.last_ms),
                 g.suggestion.empty() ? "-" : one_line(g.suggestion)});
    }
    table.print(out, "    ");
    if (more > 0) {
      out << "    ... " << more << " more groups not shown (" << more_lines
          << " denials; --top N, or --format json for all)\n";
    }
  }
  not_shown(out, r.denial_overflow, "denial", r.max_groups);

  out << "\nConfig lines that would allow them\n";
  if (r.suggestions.empty()) out << "  none\n";
  for (std::size_t i = 0; i < r.suggestions.size(); ++i) {
    const SuggestionBlock& b = r.suggestions[i];
    if (i > 0) out << "\n";
    std::string who;
    for (const std::string& s : b.sandboxes) who += (who.empty() ? "" : ", ") + shown_sandbox(s);
    out << "  # " << terminal_safe(who) << ": " << b.denials << " denials\n";
    if (b.kind == "table") out << "  " << terminal_safe(b.target) << "\n";
    if (b.kind == "file") out << "  # in " << terminal_safe(b.target) << "\n";
    for (const std::string& line : b.lines) out << "  " << terminal_safe(line) << "\n";
    if (!b.blocks.empty()) {
      out << "  # at the end of " << (b.kind == "file" ? "that file" : "the main file") << ":\n";
    }
    for (const std::string& block : b.blocks) {
      for (std::size_t at = 0; at <= block.size();) {
        const std::size_t end = std::min(block.find('\n', at), block.size());
        out << "  " << terminal_safe(std::string_view(block).substr(at, end - at)) << "\n";
        at = end + 1;
      }
    }
  }

  const auto destinations = [&](std::string_view title, const std::vector<DestinationGroup>& l) {
    out << "\n" << title << " (top " << r.top << " of " << r.destinations << ")\n";
    Columns table({"DESTINATION", "CONNECTIONS", "DENIED", "ERRORS", "BYTES UP", "BYTES DOWN"});
    for (const DestinationGroup& d : l) {
      table.add({d.host + ":" + num(d.port), num(d.connections), num(d.denied), num(d.errors),
                 human_bytes(d.bytes_up), human_bytes(d.bytes_down)});
    }
    table.print(out);
  };
  destinations("Top destinations by bytes", r.top_by_bytes);
  destinations("Top destinations by connections", r.top_by_connections);
  not_shown(out, r.destination_overflow, "destination", r.max_groups);

  out << "\nErrors by side\n";
  std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, std::size_t>> codes;
  for (const ErrorGroup& e : r.errors) {
    auto& [count, sandboxes_with] = codes[{e.side, e.code}];
    count += e.count;
    ++sandboxes_with;
  }
  Columns errors({"SIDE", "CODE", "COUNT", "SANDBOXES"});
  for (const auto& [key, value] : codes) {
    errors.add({key.first, key.second, num(value.first), num(value.second)});
  }
  if (codes.empty()) {
    out << "  none\n";
  } else {
    errors.print(out);
  }
  not_shown(out, r.error_overflow, "error", r.max_groups);

  out << "\nCredentials by host\n";
  Columns credentials({"HOST", "NAME", "FINGERPRINT", "USES", "FIRST", "LAST"});
  for (const CredentialGroup& c : r.credentials) {
    credentials.add({c.host, c.name, c.fingerprint, num(c.count), format_rfc3339_ms(c.first_ms),
                     format_rfc3339_ms(c.last_ms)});
  }
  if (r.credentials.empty()) {
    out << "  none\n";
  } else {
    credentials.print(out);
  }
  not_shown(out, r.credential_overflow, "credential", r.max_groups);
}

}  // namespace sandgate::audit
