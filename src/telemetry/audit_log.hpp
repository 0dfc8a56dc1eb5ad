#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace sandgate::telemetry {

// How an exchange or a tunnel ended (labels.termination), in the manner of HAProxy's
// termination state: who ended it and how. `unset`: the line is not about an exchange.
enum class Ended {
  unset,
  completed,       // the response was delivered whole (HTTP)
  client_close,    // the client closed (FIN) first, or left before the response was whole
  client_reset,    // the client reset the connection
  upstream_close,  // the destination closed first (a tunnel), or cut its response short
  upstream_reset,  // the destination reset the connection
  timeout,         // a deadline passed (connect, idle)
  shutdown,        // sandgate was stopping, or the sandbox was removed by a reload
  refused,         // sandgate refused something inside the exchange (a tunnel's next request)
  malformed,       // the client sent bytes sandgate could not frame (a bad chunk)
};
// The phase it ended in (labels.termination_phase).
enum class Phase {
  unset,
  connect,  // dialling the destination
  request,  // sending the request (head and body) upstream
  headers,  // waiting for the response head
  body,     // the response body, or a tunnel's bytes
};
std::string_view ended_name(Ended e);
std::string_view phase_name(Phase p);

// One audit event: a refusal, a finished allowed connection, or a failure. Every field is a
// view the caller keeps alive for the duration of AuditLog::write(); nothing is retained.
//
// Contract note: PRODUCT.md says a refusal has `"event":"SANDBOX_NETWORK_DENIED"`. The line
// follows Elastic Common Schema, where `event` is an object, so our contract's `event` is
// ECS `event.code` (`{"event":{"code":"SANDBOX_NETWORK_DENIED",...}}`).
struct AuditRecord {
  std::string_view event;       // event.code: "SANDBOX_NETWORK_DENIED", "connection_closed",
                                // or an error code such as "UPSTREAM_CONNECT_FAILED"
  std::string_view outcome;     // event.outcome: "failure" | "success"
  std::string_view sandbox_id;  // labels.sandbox_id; empty when unauthenticated
  std::string_view source_ip;   // source.ip
  std::uint16_t source_port = 0;
  std::string_view protocol;  // network.protocol: http | connect | tls | tcp | dns
  // destination.address, plus destination.domain if a name; shown by shown_host(), with
  // labels.host_shortened and labels.host_bytes when it had to be shortened
  std::string_view host;
  std::uint16_t port = 0;           // destination.port
  std::string_view destination_ip;  // destination.ip: the address dialled, empty if none
  std::string_view reason;          // event.reason
  std::string_view rule;            // rule.name
  std::string_view method;          // http.request.method (http only)
  std::string_view url_path;        // url.path; any query or fragment is cut off
  std::string_view tls_sni;         // tls.client.server_name, when a ClientHello was read
  // labels.original_destination: "ip:port" a transparent connection was addressed to (what
  // the sandbox dialled; recorded, never used for routing).
  std::string_view original_destination;
  int http_status = 0;  // http.response.status_code; 0 = omit
  // labels.suppressed_lines: a burst summary, the lines of this kind left out; 0 = omit.
  std::uint64_t suppressed_lines = 0;
  Ended ended = Ended::unset;                    // labels.termination
  Phase phase = Phase::unset;                    // labels.termination_phase
  std::uint64_t bytes_up = 0;                    // source.bytes (client -> upstream)
  std::uint64_t bytes_down = 0;                  // destination.bytes (upstream -> client)
  std::chrono::nanoseconds duration{0};          // event.duration in ns; 0 = omit
  std::chrono::system_clock::time_point time{};  // @timestamp; default (epoch) = now
};

// Every string field is cut to this many bytes (on a UTF-8 boundary) so a hostile host or
// path cannot bloat the log.
inline constexpr std::size_t kMaxAuditFieldBytes = 1024;

// A host longer than this (no valid name is: at most 253 bytes) is shown shortened, in the
// audit log and by `sandgate decide`.
inline constexpr std::size_t kMaxShownHostBytes = 300;

// How a host is shown: itself, or, when longer than kMaxShownHostBytes, "…" (U+2026) followed
// by its rightmost whole labels that fit, so that padding a name on the left cannot hide the
// labels that say who owns it. A tail with no dot is cut on a UTF-8 boundary instead.
struct ShownHost {
  std::string text;
  bool shortened = false;
  std::size_t original_bytes = 0;
};
ShownHost shown_host(std::string_view host);

// Builds one ECS JSON line with Boost.JSON, ending in '\n'. Empty optional fields are
// omitted; invalid UTF-8 becomes U+FFFD so every line parses as JSON.
std::string format_audit_line(const AuditRecord& r);

// Writes audit lines to stdout, stderr, a file, or nowhere ("off").
//
// write() formats the line on the caller's thread and hands it to a bounded queue; one
// writer thread owned by this object drains it with one write(2) per line, so lines never
// interleave and a stalled reader (a full pipe, a slow disk) never blocks the data path.
// When the queue is full the line is dropped and counted as a write failure.
class AuditLog {
 public:
  static constexpr std::size_t kDefaultMaxQueuedLines = 16384;
  // Upper bound of one write(2) of gathered whole lines.
  static constexpr std::size_t kMaxWriteBytes = 64 * 1024;
  // How long the writer lets lines gather after the first one arrives (flush() may wait
  // this much longer).
  static constexpr std::chrono::milliseconds kGatherTime{2};

  // target: "stdout", "stderr", "off", or a file path (opened O_APPEND|O_CREAT|O_CLOEXEC,
  // mode 0640). Throws std::runtime_error if the path can't be opened.
  explicit AuditLog(std::string target, std::size_t max_queued_lines = kDefaultMaxQueuedLines);
  // Writes what is queued, then stops the writer thread.
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Thread-safe. Never throws; a line that can't be queued or written is counted.
  void write(const AuditRecord& r) noexcept;
  // Log rotation (SIGUSR1): lines written before the call go to the old file, later ones to
  // the path reopened. A failed reopen keeps the old file and counts one write failure.
  // No-op for stdout/stderr.
  // Thread-safe, but not async-signal-safe: call it from a signal_set handler.
  void reopen() noexcept;
  // Blocks until every line queued before the call has been written (or failed).
  void flush() noexcept;
  // Lines lost: dropped on a full queue or failed write(2), plus failed reopens.
  std::uint64_t write_failures() const noexcept;

 private:
  void run();
  bool write_line(const std::string& lines);
  void reopen_file();

  enum class Sink { off, stdout_stream, stderr_stream, file };

  const std::string target_;
  const Sink sink_;
  const std::size_t max_queued_;
  int fd_ = -1;  // after construction, touched only by the writer thread (and ~AuditLog)
  std::atomic<std::uint64_t> failures_{0};

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // writer: work queued or stop requested
  std::condition_variable drained_;  // flush(): a batch finished
  std::deque<std::string> queue_;    // lines; an empty entry asks for a reopen
  std::uint64_t enqueued_ = 0;       // entries ever accepted into queue_
  std::uint64_t written_ = 0;        // entries ever taken out of queue_ and handled
  bool stop_ = false;
  std::thread writer_;  // last: started after everything above is initialised
};

}  // namespace sandgate::telemetry
