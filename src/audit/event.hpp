#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace sandgate::audit {

// The fields of one audit line (docs/errors.md, "The audit log") that `sandgate audit`
// reports on. Every view points into the LineParser that produced it and is valid until its
// next parse(); an absent field is empty (or 0).
struct AuditEvent {
  std::int64_t time_ms = 0;                 // @timestamp, milliseconds since the Unix epoch (UTC)
  std::string_view code;                    // event.code: SANDBOX_NETWORK_DENIED, http_request, ...
  std::string_view outcome;                 // event.outcome
  std::string_view reason;                  // event.reason
  std::string_view sandbox;                 // labels.sandbox_id
  std::string_view suggestion;              // labels.suggestion: the placed config line (denials)
  std::string_view host;                    // destination.address (as requested, maybe shortened)
  std::string_view destination_ip;          // destination.ip
  std::uint16_t port = 0;                   // destination.port
  std::string_view rule;                    // rule.name
  std::string_view protocol;                // network.protocol
  std::uint64_t bytes_up = 0;               // source.bytes
  std::uint64_t bytes_down = 0;             // destination.bytes
  std::uint64_t suppressed = 0;             // labels.suppressed_lines (a DNS burst summary)
  std::string_view credential_name;         // credential.name
  std::string_view credential_fingerprint;  // credential.fingerprint
};

// Why a line was not an event.
enum class LineError {
  not_json,        // not one JSON value (a torn line, garbage)
  not_an_object,   // JSON, but not an object
  missing_fields,  // no valid @timestamp or no event.code
};

// Parses audit lines one at a time with Boost.JSON's SAX parser (basic_parser): no tree is
// built; a handler follows the path of each value and copies only the fields AuditEvent
// names into buffers owned here, which keep their capacity from line to line, so a steady
// stream of lines allocates nothing once the first few have sized them. The JSON is still
// checked whole (syntax, UTF-8, depth at most 32). Pure (bytes in, fields out). Not
// thread-safe.
class LineParser {
 public:
  LineParser();
  ~LineParser();
  LineParser(const LineParser&) = delete;
  LineParser& operator=(const LineParser&) = delete;

  // One line without its '\n'. The event's views are valid until the next call. On failure
  // `error` says why.
  std::optional<AuditEvent> parse(std::string_view line, LineError& error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandgate::audit
