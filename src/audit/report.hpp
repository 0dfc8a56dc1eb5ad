#pragma once

#include <boost/unordered/unordered_flat_map.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "audit/event.hpp"
#include "audit/input.hpp"
#include "policy/suggestion.hpp"

namespace sandgate::audit {

// Which lines a report covers. Empty lists match everything.
struct Filter {
  std::vector<std::string> sandboxes;  // labels.sandbox_id, exactly ("" = lines without one)
  std::vector<std::string> codes;      // event.code, exactly
  // Host patterns as in a config: "example.com" exactly, "*.example.com" any subdomain
  // (compared lowercased; no port).
  std::vector<std::string> hosts;
  std::optional<std::int64_t> since_ms;  // @timestamp >= since
  std::optional<std::int64_t> until_ms;  // @timestamp < until
  bool denied_only = false;              // SANDBOX_NETWORK_DENIED lines only

  bool accepts(const AuditEvent& e) const;
};

// Bounds on what an Aggregator keeps, whatever the size of the log.
struct Limits {
  // Distinct groups kept per table (denials, destinations, errors, credentials, sandboxes).
  // Lines of a group first seen past the limit are counted in that table's overflow.
  std::size_t max_groups = 50'000;
  // Buckets of the denials-over-time series; their width doubles as the span grows.
  std::size_t max_time_buckets = 96;
};

// Where a sandbox is defined (config::home_of over the --config the report was given), to
// place the suggestions the report derives itself.
using Placer = std::function<policy::SandboxHome(std::string_view sandbox)>;

// Where a denial group's suggestion came from.
enum class SuggestionSource {
  none,     // no config line can allow it (or nothing could be derived)
  log,      // the line's labels.suggestion, written by the daemon
  config,   // derived from the line, placed with the --config the report was given
  derived,  // derived from the line, placed as "[sandboxes.ID]" (no config to say better)
};
std::string_view source_name(SuggestionSource s);

// One (sandbox, host, port, reason) of SANDBOX_NETWORK_DENIED lines.
struct DenialGroup {
  std::string sandbox;
  std::string host;
  std::uint16_t port = 0;
  std::string reason;
  std::string rule;  // rule.name of the first line
  std::uint64_t count = 0;
  std::int64_t first_ms = 0;
  std::int64_t last_ms = 0;
  std::vector<std::string> protocols;  // network.protocol values seen, at most 8
  std::string suggestion;              // placed config line, "" when none
  SuggestionSource suggestion_source = SuggestionSource::none;
};

// One (host, port) destination.
struct DestinationGroup {
  std::string host;
  std::uint16_t port = 0;
  std::uint64_t connections = 0;  // connection_closed and http_request lines
  std::uint64_t denied = 0;       // SANDBOX_NETWORK_DENIED lines
  std::uint64_t errors = 0;       // lines of any other code
  std::uint64_t bytes_up = 0;     // source.bytes
  std::uint64_t bytes_down = 0;   // destination.bytes
  std::uint64_t bytes() const { return bytes_up + bytes_down; }
};

// One (sandbox, code) of failure lines: denials (side "policy") and error codes.
struct ErrorGroup {
  std::string sandbox;
  std::string code;
  std::string side;  // policy | client | upstream | internal | unknown
  std::uint64_t count = 0;
  std::int64_t first_ms = 0;
  std::int64_t last_ms = 0;
};

// One credential attached to requests for a host (credential.name, credential.fingerprint).
struct CredentialGroup {
  std::string host;
  std::string name;
  std::string fingerprint;
  std::uint64_t count = 0;
  std::int64_t first_ms = 0;
  std::int64_t last_ms = 0;
};

// Per sandbox totals ("" = lines without a sandbox id).
struct SandboxSummary {
  std::string sandbox;
  std::uint64_t lines = 0;
  std::uint64_t connections = 0;
  std::uint64_t denied = 0;
  std::uint64_t errors = 0;
  std::uint64_t suppressed = 0;  // DNS lines summarised away (labels.suppressed_lines)
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  std::int64_t first_ms = 0;
  std::int64_t last_ms = 0;
};

// Groups a table could not keep: lines counted, distinct groups estimated.
struct Overflow {
  std::uint64_t lines = 0;
  std::uint64_t groups = 0;  // estimate (linear counting over a fixed bitmap)
};

// Paste-ready config lines for one place: a sandbox or profile table, a drop-in file, or the
// launcher's flags.
struct SuggestionBlock {
  std::string target;  // "[profiles.default]", "[sandboxes.ci]", a file path, "sandgate-launch"
  std::string kind;    // table | file | launcher | other
  std::vector<std::string> lines;      // merged: one `allow = [...]` per key
  std::vector<std::string> sandboxes;  // whose denials these lines open
  std::uint64_t denials = 0;           // lines they would have allowed
  // `[[...]]` array-of-tables blocks (http_rules, git), each whole with its header: they go
  // at the end of the file (the drop-in for a file target), never inside the table.
  std::vector<std::string> blocks;
};

// Denials per time bucket of one sandbox: counts[i] covers [start + i*width, +width).
struct DenialSeries {
  std::string sandbox;
  std::vector<std::uint64_t> counts;
};

// Everything a renderer needs, sorted; made by Aggregator::report().
struct Report {
  std::uint64_t lines = 0;      // lines parsed as audit events
  std::uint64_t matched = 0;    // of those, accepted by the filter
  std::uint64_t malformed = 0;  // not JSON, not an object, or without @timestamp/event.code
  std::uint64_t too_long = 0;   // over the line limit, skipped unread
  std::int64_t first_ms = 0;    // first and last @timestamp of matched lines
  std::int64_t last_ms = 0;
  std::vector<SandboxSummary> sandboxes;  // by sandbox id
  std::vector<DenialGroup> denials;       // by sandbox, then count (most first)
  std::vector<SuggestionBlock> suggestions;
  std::vector<DestinationGroup> top_by_bytes;        // at most `top`
  std::vector<DestinationGroup> top_by_connections;  // at most `top`
  std::size_t destinations = 0;                      // distinct destinations kept
  std::vector<ErrorGroup> errors;                    // by side, code, sandbox
  std::vector<CredentialGroup> credentials;          // by host, name, fingerprint
  std::int64_t series_start_ms = 0;
  std::int64_t series_width_ms = 0;
  std::vector<DenialSeries> series;  // sandboxes with denials, most first, at most `top`
  Overflow denial_overflow, destination_overflow, error_overflow, credential_overflow,
      sandbox_overflow;
  std::size_t top = 0;
  std::size_t max_groups = 0;        // Limits::max_groups the groups were kept under
  std::vector<InputSummary> inputs;  // filled by the caller that read them
};

// A group's key: its fields, each after its length. Kept inline up to kInline bytes (most
// keys), so comparing a probed slot's key reads the slot itself, not a heap buffer
// elsewhere (a cache miss per line with std::string keys).
class GroupKey {
 public:
  static constexpr std::size_t kInline = 88;
  void clear() {
    size_ = 0;
    long_.clear();
  }
  void append(std::string_view part);
  std::string_view view() const {
    return size_ <= kInline ? std::string_view(inline_, size_) : std::string_view(long_);
  }
  bool operator==(const GroupKey& other) const { return view() == other.view(); }

 private:
  std::uint32_t size_ = 0;
  char inline_[kInline];
  std::string long_;  // the key when longer than kInline
};
struct GroupKeyHash {
  std::size_t operator()(const GroupKey& k) const {
    return std::hash<std::string_view>{}(k.view());
  }
};

// The streaming core of `sandgate audit`: takes events one at a time and keeps only
// per-group state, bounded by Limits. Pure: no I/O. Not thread-safe.
class Aggregator {
 public:
  Aggregator(Filter filter, Limits limits = {}, Placer placer = {});

  // One parsed line (counted in Report::lines; kept if the filter accepts it).
  void add(const AuditEvent& e);
  // Lines the reader could not turn into an event.
  void add_malformed() { ++malformed_; }
  void add_too_long() { ++too_long_; }

  // The report: denials, errors, credentials and sandboxes whole (as kept); destinations
  // and series cut to the `top` largest. Moves the groups out: call it once, last.
  Report take_report(std::size_t top);

 private:
  struct Bitmap {
    std::vector<std::uint64_t> bits;
    void add(std::string_view key);
    std::uint64_t estimate() const;
  };
  struct Table {
    std::size_t limit = 0;
    Overflow overflow;
    Bitmap seen;
    bool has_room(std::size_t size, std::string_view key);
  };

  void add_denial(const AuditEvent& e);
  struct SandboxState;
  void add_series(SandboxState& sandbox, std::int64_t t);
  // A suggestion from the line itself (policy::suggest), placed by placer_ if there is one.
  std::pair<std::string, SuggestionSource> derive_suggestion(const AuditEvent& e) const;

  Filter filter_;
  Limits limits_;
  Placer placer_;
  std::uint64_t lines_ = 0, matched_ = 0, malformed_ = 0, too_long_ = 0;
  std::int64_t first_ms_ = 0, last_ms_ = 0;
  GroupKey key_;  // scratch key, reused

  // Open addressing (Boost's flat map): a lookup per line and table is most of the work.
  template <class V>
  using Map = boost::unordered_flat_map<GroupKey, V, GroupKeyHash>;
  // A sandbox's totals and its denials over time: counts per bucket (time / width). One
  // width for all sandboxes, doubled whenever the span of indices would exceed
  // max_time_buckets.
  struct SandboxState {
    SandboxSummary summary;
    std::int64_t series_base = 0;       // bucket index of series[0]
    std::vector<std::uint64_t> series;  // at most max_time_buckets long
  };
  Map<DenialGroup> denials_;
  Map<DestinationGroup> destinations_;
  Map<ErrorGroup> errors_;
  Map<CredentialGroup> credentials_;
  Map<SandboxState> sandboxes_;
  Table denial_table_, destination_table_, error_table_, credential_table_, sandbox_table_;

  std::int64_t width_ms_ = 60'000;
  std::optional<std::int64_t> min_bucket_, max_bucket_;
};

// Splits daemon suggestions into paste-ready blocks, one per target, items merged per key
// (`allow = ["a:443"]` and `allow = ["b:443"]` become `allow = ["a:443", "b:443"]`).
std::vector<SuggestionBlock> merge_suggestions(const std::vector<DenialGroup>& denials);

// The side a failure code is blamed on: "policy" for SANDBOX_NETWORK_DENIED, client,
// upstream or internal for the other codes (docs/errors.md), "unknown" for others.
std::string_view side_of_code(std::string_view code);

}  // namespace sandgate::audit
