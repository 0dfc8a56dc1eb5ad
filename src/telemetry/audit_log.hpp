#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "telemetry/audit_chain.hpp"

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
  resources,       // sandgate ran out of a local resource (descriptors)
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
  std::string_view url_scheme;      // url.scheme: "https" inside an intercepted stream
  std::string_view http_version;    // http.version of the client's request ("1.1", "2")
  // labels.would_deny: the reason an audit-mode rule (rule.name) would have refused this
  // allowed request with, were it enforced.
  std::string_view would_deny;
  // credential.name and credential.fingerprint: the credential sandgate attached to this
  // request (never the token: the fingerprint is the first 12 hex digits of its SHA-256).
  std::string_view credential_name;
  std::string_view credential_fingerprint;
  // credential.endpoint.status_code and credential.endpoint.error: on a CREDENTIAL_UNAVAILABLE
  // line, the HTTP status the token endpoint answered the failed mint with (0 = omit) and the
  // error code its body named (bounded and sanitized by the provider; never a secret).
  int credential_endpoint_status = 0;
  std::string_view credential_endpoint_error;
  // labels.redactions: occurrences of the attached token that sandgate removed from the
  // response before the sandbox saw it.
  std::uint64_t redactions = 0;
  std::string_view tls_sni;  // tls.client.server_name, when a ClientHello was read
  // labels.suggestion: on a denial, the config line that would allow it, placed where the
  // sandbox is defined (the 403 body's `suggestion`); empty when no config can.
  std::string_view suggestion;
  // labels.operator_message: what an operator told the sandbox when answering a held
  // destination (a denial's message).
  std::string_view operator_message;
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

// @timestamp's text: RFC 3339 UTC with milliseconds ("2026-11-29T10:00:00.123Z").
std::string format_audit_timestamp(std::chrono::system_clock::time_point t);

// Builds one ECS JSON line with Boost.JSON, ending in '\n'. Empty optional fields are
// omitted; invalid UTF-8 becomes U+FFFD so every line parses as JSON.
std::string format_audit_line(const AuditRecord& r);

// Writes audit lines to stdout, stderr, a file, or nowhere ("off").
//
// write() formats the line on the caller's thread and hands it to a bounded queue; one
// writer thread owned by this object drains it with few write(2) calls of whole lines, so
// lines never interleave and a stalled reader (a full pipe, a slow disk) never blocks the data
// path. When the queue is full the line is dropped and counted as a write failure.
//
// A line is written whole or not at all:
// - a regular file (the file target, or stdout/stderr redirected to a file): when a write is
//   cut short (ENOSPC, EDQUOT, EFBIG, EIO) the file is truncated back to the end of the last
//   whole line it holds, so no fragment stays behind and the next line starts clean. The
//   file is taken to be sandgate's own: a line another process appended during that one
//   write would be cut with it.
// - a pipe, FIFO, socket or terminal: what a reader has taken cannot be taken back, so each
//   write(2) is whole lines of at most PIPE_BUF bytes, which a pipe takes whole or not at
//   all. Only a line longer than PIPE_BUF is written in pieces; if the writer gives up on it
//   (the shutdown deadline, see flush_until(), with a reader that stopped reading) or the
//   sink fails midway, it stays without its '\n', and the next line written, if any, begins
//   with a '\n' so it parses on its own.
// Lines the sink did not take are counted, exactly (write_failures()). Writing starts
// failing and recovering are reported on stderr (rate-limited, not when the log itself is
// stderr); the writer retries with each new line, so writing resumes by itself.
//
// Waiting on the sink never blocks for ever: a pipe, FIFO or terminal is written through a
// non-blocking description of its own (re-opened through /proc/self/fd, so the flags of the
// process's shared stdout are left alone), anything else (a socket) after poll(2) says it is
// writable. Regular files are written directly, in chunks of up to kMaxWriteBytes.
//
// A regular file target with `chain.enabled` is hash-chained (see audit_chain.hpp): the writer
// thread adds each line's chain field as it writes the line, so the chain follows the order of
// the file; it ends the old file with a checkpoint at reopen() and the chain goes on in the new
// one. A line that was chained but not taken by the file shows as dropped to `audit verify`,
// as it should; a line dropped on a full queue never joins the chain (it is counted only).
class AuditLog {
 public:
  static constexpr std::size_t kDefaultMaxQueuedLines = 16384;
  // Upper bound of one write(2) of gathered whole lines.
  static constexpr std::size_t kMaxWriteBytes = 64 * 1024;
  // How long the writer lets lines gather after the first one arrives (flush() may wait
  // this much longer).
  static constexpr std::chrono::milliseconds kGatherTime{2};
  // The destructor gives a sink that does not take lines this long before dropping them.
  static constexpr std::chrono::milliseconds kCloseTimeout{1000};
  // A sink that does not take a line for this long is reported as stalled on stderr.
  static constexpr std::chrono::milliseconds kStallWarning{1000};
  // At most one "failing" warning on stderr per this interval (each is followed by one
  // "recovered" when a line is written again).
  static constexpr std::chrono::seconds kWarningInterval{10};

  // target: "stdout", "stderr", "off", or a file path (opened O_APPEND|O_CREAT|O_CLOEXEC,
  // mode 0640). Throws std::runtime_error if the path can't be opened.
  // With `chain` enabled, also throws when the chain's signing key or LOG.pub is unusable.
  explicit AuditLog(std::string target, std::size_t max_queued_lines = kDefaultMaxQueuedLines,
                    const AuditChainOptions& chain = {});
  // Writes what is queued (a sink that takes nothing gets kCloseTimeout, unless flush_until()
  // set an earlier deadline), then stops the writer thread.
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
  // Shutdown: like flush(), but from `deadline` on the writer waits for the sink no more:
  // lines the sink does not take at once (a reader that stopped reading) are dropped and
  // counted, and so is every line queued later. Returns by `deadline` (plus a moment for the
  // writer to count what it dropped), whatever the sink does.
  void flush_until(std::chrono::steady_clock::time_point deadline) noexcept;
  // Lines lost: dropped on a full queue, not taken by the sink (a failed or abandoned
  // write(2)), plus failed reopens.
  std::uint64_t write_failures() const noexcept;
  // CPU time (user and system) the writer thread has used so far; zero when there is none
  // ("off"). What the chain costs the writer, apart from the callers' formatting (bench/).
  std::chrono::nanoseconds writer_cpu_time() const noexcept;

 private:
  enum class Sink { off, stdout_stream, stderr_stream, file };
  // How the writer reaches fd_: see the class comment.
  enum class Kind { regular, nonblocking, polled };

  void run();
  void write_chained(std::string_view lines);
  void write_checkpoint();
  void write_batch(std::string_view lines);
  std::uint64_t write_lines(std::string_view chunk);
  int write_all(std::string_view data, std::size_t& done);
  bool wait_writable();
  void cut_fragment(std::size_t fragment_bytes);
  void adopt(int fd, bool owned);
  void reopen_file();
  void note_success();
  void note_failure(int error, std::uint64_t lost);
  void warn(std::string_view event, std::string_view error, std::uint64_t lost);

  const std::string target_;
  const Sink sink_;
  const std::size_t max_queued_;
  // After construction fd_, owned_, kind_ and the fields below them up to failures_ are
  // touched only by the writer thread (and ~AuditLog after it joined).
  int fd_ = -1;
  bool owned_ = false;  // fd_ is ours to close (the file, or a re-opened stdout pipe)
  Kind kind_ = Kind::regular;
  bool torn_ = false;    // the sink holds a fragment without its '\n' (see the class comment)
  bool warned_ = false;  // a "failing" warning is out and no "recovered" yet
  std::chrono::steady_clock::time_point last_warning_{};
  std::uint64_t lost_since_warning_ = 0;
  std::unique_ptr<AuditChain> chain_;  // null: lines are written as they are
  std::string sealed_;                 // the writer's lines with their chain fields
  int wake_fd_ = -1;  // eventfd: flush_until() and ~AuditLog wake a writer waiting in poll(2)
  // steady_clock nanoseconds from which the writer no longer waits for the sink; max = never.
  std::atomic<std::int64_t> give_up_at_{std::numeric_limits<std::int64_t>::max()};
  std::atomic<std::uint64_t> failures_{0};

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // writer: work queued or stop requested
  std::condition_variable drained_;  // flush(): a batch finished
  // The queue: whole lines back to back, appended by write() (no allocation per line once
  // the buffer has grown) and swapped out whole by the writer, which writes from it directly.
  std::string queue_;
  std::size_t queued_lines_ = 0;
  std::vector<std::size_t> reopens_;  // offsets in queue_ at which reopen() was called
  // No line and no reopen waits (with mutex_ held).
  bool queue_empty() const { return queued_lines_ == 0 && reopens_.empty(); }
  std::uint64_t enqueued_ = 0;  // lines and reopens ever accepted into the queue
  std::uint64_t written_ = 0;   // lines and reopens ever taken out of it and handled
  bool stop_ = false;
  std::thread writer_;        // last: started after everything above is initialised
  clockid_t writer_clock_{};  // the writer's CPU clock; 0 (CLOCK_REALTIME): unknown
};

}  // namespace sandgate::telemetry
