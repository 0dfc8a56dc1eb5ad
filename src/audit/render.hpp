#pragma once

#include <ostream>
#include <string>

#include "audit/report.hpp"

namespace sandgate::audit {

// The three forms of a Report (docs/cli.md, "sandgate audit"). Pure: they write to the stream
// they are given and read nothing else.

// For a terminal: aligned columns; control characters from the log are shown escaped
// (\x1b), so a hostile host name cannot drive the terminal.
void render_table(const Report& r, std::ostream& out);

// For scripts: one JSON document (schema "sandgate-audit-report/1"), then '\n'.
void render_json(const Report& r, std::ostream& out);

// One self-contained HTML page: inline CSS and SVG, no script, no external reference (a
// Content-Security-Policy of default-src 'none' says so to the browser too). Every string
// from the log is HTML-escaped.
void render_html(const Report& r, std::ostream& out);

// Helpers shared by the renderers.
std::string html_escape(std::string_view s);
std::string terminal_safe(std::string_view s);
std::string human_bytes(std::uint64_t n);

}  // namespace sandgate::audit
