#pragma once

// The one builder of the config lines sandgate suggests for a refusal: the 403 body's
// `suggestion`, the audit line's `labels.suggestion`, `sandgate decide` and `sandgate audit`
// all print what suggest() returns. Pure: the caller says where the sandbox is defined.
//
// What must hold (tests/unit/config/config_suggestion_property_test.cpp): a suggestion,
// applied where it says (a `KEY = [...]` line into its table, merged into that key when the
// table has it; a `[[...]]` block at the end of the file; the launcher's flag on its next
// run), loads, and the same question is then allowed. Where no config line can allow the
// destination, suggest() says why instead.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy {

// Where a sandbox's rules are written, as far as a suggestion needs to know (config::home_of
// fills it in from the loaded config; policy knows no files).
struct SandboxHome {
  enum class Kind {
    table,     // a [sandboxes.ID] table of the main file
    file,      // a hand-written drop-in: its keys are top level
    launched,  // a drop-in sandgate-launch wrote; it rewrites and removes it, so never the target
    unknown,   // not in the config at hand (a log read later): placed as a launched one
  };
  Kind kind = Kind::table;
  std::string id;
  std::string file;                           // file: the drop-in's path
  std::string profile;                        // launched: its profile, "" for none
  std::vector<std::uint16_t> ports{80, 443};  // the sandbox's `ports` (rules without :PORT)
};

// What to paste and where.
struct Suggestion {
  enum class Place {
    none,      // no config line allows it: `why_none` says why
    table,     // `toml` goes in table `target` ("[sandboxes.ci]", "[profiles.dev]")
    file,      // `toml` goes at the top level of the drop-in `target` (its path)
    launcher,  // `toml` is a flag for sandgate-launch's next run/up (`--allow "x.org:443"`)
  };
  Place place = Place::none;
  std::string target;
  // A `KEY = [ITEM]` line (merge ITEM into KEY when the table already has it: TOML allows a
  // key once per table; for a raw stream on a web port, an `opaque = [ITEM]` line follows it,
  // after a newline), or with `block` a `[[...]]` array-of-tables block with its own
  // header, which goes at the end of the file (the main file for a table target) and works
  // whether or not the table already has such entries.
  std::string toml;
  bool block = false;
  // A launched sandbox without a profile, for a line the launcher has no flag for: `target` is
  // "[profiles.NAME]", a profile to make, and the sandbox is run with this flag.
  std::string profile_flag;  // "--profile NAME"
  // For a launched sandbox, the launcher's flag that allows it as well, when one does:
  // `sandgate-launch --allow "x.org:443"`.
  std::string launcher_allow;
  std::string why_none;

  explicit operator bool() const { return place != Place::none; }
  // The one-string form the 403 body, the audit line and `sandgate decide` carry:
  // "[sandboxes.ci] allow = [\"x.org:443\"]", "FILE: allow = [...]",
  // "sandgate-launch --allow \"x.org:443\"", "[profiles.NAME] LINE (sandgate-launch --profile
  // NAME)", or a block as it is pasted ("[[sandboxes.ci.http_rules]]\nhosts = ...").
  std::string text() const;
};

// The suggestion for refusal `d` of `host` (for an address reason, the address refused) on
// `port` (nullopt: a DNS question, which names no port) to the sandbox defined at `home`.
// An audit-mode refusal (d.allowed and d.audit) gets the line that would allow it once the rule
// is enforced. For no_matching_http_rule the method and path no rule matched come from
// `d.refused_method`, `d.refused_path`; for git_not_allowed the operation from `d.git`.
// `mode`: how the sandbox reached sandgate; a transparent stream on port 80 or 443 that
// carries neither HTTP nor TLS (EntryMode::tcp) also needs an `opaque` entry.
Suggestion suggest(const SandboxHome& home, const Host& host, std::optional<std::uint16_t> port,
                   const Decision& d, EntryMode mode = EntryMode::http);

// A TOML basic string: "text" with quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view text);

// `key` as TOML writes it in a table header: bare when it can be, else quoted.
std::string toml_key(std::string_view key);

}  // namespace sandgate::policy
