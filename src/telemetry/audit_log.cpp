#include "telemetry/audit_log.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/serializer.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace sandgate::telemetry {

namespace json = boost::json;

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at the front of s, or 0 if it is malformed
// (truncated, overlong, a surrogate, or above U+10FFFF).
std::size_t utf8_sequence_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](std::size_t i) { return i < s.size() && (byte(i) & 0xC0U) == 0x80U; };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80U) return 1;
  if (b0 >= 0xC2U && b0 <= 0xDFU) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0U && b0 <= 0xEFU) {
    if (!cont(1) || !cont(2)) return 0;
    if (b0 == 0xE0U && byte(1) < 0xA0U) return 0;   // overlong
    if (b0 == 0xEDU && byte(1) >= 0xA0U) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xF0U && b0 <= 0xF4U) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b0 == 0xF0U && byte(1) < 0x90U) return 0;   // overlong
    if (b0 == 0xF4U && byte(1) >= 0x90U) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// Makes s safe to log: valid UTF-8 (bad bytes become U+FFFD, so the line stays valid JSON)
// and at most kMaxAuditFieldBytes long, cut on a character boundary. Returns s itself when it
// already is (the usual case), else the cleaned copy in `scratch`. Boost.JSON escapes quotes,
// backslashes and control characters when the value is written.
std::string_view clean(std::string_view s, std::string& scratch) {
  std::size_t valid = 0;
  while (valid < s.size() && valid < kMaxAuditFieldBytes) {
    const std::size_t n = utf8_sequence_length(s.substr(valid));
    if (n == 0 || valid + n > kMaxAuditFieldBytes) break;
    valid += n;
  }
  if (valid == s.size()) return s;
  scratch.assign(s.substr(0, valid));
  s.remove_prefix(valid);
  while (!s.empty()) {
    const std::size_t n = utf8_sequence_length(s);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(0, n);
    if (scratch.size() + piece.size() > kMaxAuditFieldBytes) break;
    scratch.append(piece);
    s.remove_prefix(n == 0 ? 1 : n);
  }
  return scratch;
}

// One JSON object written out as text, field by field in order: no tree is built. Keys are
// fixed ASCII names; string values are cleaned, then escaped by Boost.JSON's serializer.
class JsonLine {
 public:
  // The text goes into out_ at len_, within out_'s size, so a piece costs a bounds check and
  // a copy rather than std::string's append bookkeeping. One JsonLine per thread is reused
  // line after line (see format_line()): out_ keeps its size (at least 1 KiB; an allowed
  // request's line is about 600 bytes), so a line allocates nothing.
  JsonLine() { out_.resize(1024); }
  void start() {
    len_ = 0;
    first_ = true;
    put("{");
  }
  // Keys are string literals, so their copies have a constant size the compiler inlines.
  template <std::size_t N>
  void str(const char (&k)[N], std::string_view v) {
    if (plain_ascii(v)) {  // the usual value: nothing to clean or escape
      room(N + v.size() + 5);
      key_in_room(k);
      char* p = out_.data() + len_;
      *p++ = '"';
      if (!v.empty()) std::memcpy(p, v.data(), v.size());
      p[v.size()] = '"';
      len_ += v.size() + 2;
      return;
    }
    key(k);
    escaped(v);
  }
  template <std::size_t N, class Int>
  void num(const char (&k)[N], Int v) {
    room(N + 3 + 24);
    key_in_room(k);
    char* p = out_.data() + len_;
    len_ = static_cast<std::size_t>(std::to_chars(p, p + 24, v).ptr - out_.data());
  }
  template <std::size_t N>
  void raw(const char (&k)[N], std::string_view json_text) {  // a constant JSON value
    key(k);
    put(json_text);
  }
  template <std::size_t N>
  void open(const char (&k)[N]) {
    key(k);
    put("{");
    first_ = true;
  }
  void close() {
    put("}");
    first_ = false;
  }
  // The line, valid until the next start() on this object.
  std::string_view finish() {
    put("}\n");
    return {out_.data(), len_};
  }

 private:
  // Printable ASCII without a quote or backslash, within the field limit: written as it is.
  // Eight bytes at a time: a byte is plain when it is below 0x7F, not below 0x20, and
  // neither '"' nor '\\' (the SWAR tests below flag exactly the bytes that are not).
  static bool plain_ascii(std::string_view v) {
    if (v.size() > kMaxAuditFieldBytes) return false;
    const auto plain = [](char c) {
      const auto b = static_cast<unsigned char>(c);
      return b >= 0x20U && b < 0x7FU && c != '"' && c != '\\';
    };
    std::size_t i = 0;
    for (; i + 8 <= v.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, v.data() + i, 8);
      constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
      constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
      // Whether any byte of x is below n (n <= 128), or is zero: exact for "any byte".
      const auto has_less = [](std::uint64_t x, std::uint64_t n) {
        return (x - kOnes * n) & ~x & kHigh;
      };
      const std::uint64_t bad = (w & kHigh) |                       // >= 0x80
                                (((w & ~kHigh) + kOnes) & kHigh) |  // 0x7F (and 0xFF)
                                has_less(w, 0x20) |                 // control
                                has_less(w ^ (kOnes * '"'), 1) | has_less(w ^ (kOnes * '\\'), 1);
      if (bad != 0) return false;
    }
    for (; i < v.size(); ++i) {
      if (!plain(v[i])) return false;
    }
    return true;
  }
  // Inlined at each of a line's ~37 pieces; growing (a long line, once per thread) is not.
  void room(std::size_t n) {
    if (len_ + n > out_.size()) [[unlikely]]
      grow(len_ + n);
  }
  [[gnu::noinline]] void grow(std::size_t size) { out_.resize(std::max(out_.size() * 2, size)); }
  void put(std::string_view s) {
    room(s.size());
    if (!s.empty()) std::memcpy(out_.data() + len_, s.data(), s.size());
    len_ += s.size();
  }
  // A value that needs cleaning or escaping (rare), through Boost.JSON's serializer.
  void escaped(std::string_view v) {
    sr_.reset(clean(v, scratch_));
    std::array<char, 256> buf;
    while (!sr_.done()) put(sr_.read(buf.data(), buf.size()));
  }
  template <std::size_t N>
  void key(const char (&k)[N]) {
    room(N + 3);
    key_in_room(k);
  }
  // ,"k": (no comma first in an object); needs N + 3 bytes of room.
  template <std::size_t N>
  void key_in_room(const char (&k)[N]) {
    char* p = out_.data() + len_;
    if (!first_) *p++ = ',';
    first_ = false;
    *p++ = '"';
    std::memcpy(p, k, N - 1);
    p += N - 1;
    *p++ = '"';
    *p++ = ':';
    len_ = static_cast<std::size_t>(p - out_.data());
  }

  std::string out_;
  std::size_t len_ = 0;
  std::string scratch_;
  json::serializer sr_;
  bool first_ = true;
};

// Whether a host is an IP literal rather than a name: IPv6 (a colon or brackets), or an
// IPv4 address in any spelling, which always ends in a numeric label ("127.1", "2130706433",
// "0x7f.1"), the same rule the policy's host normalisation follows.
bool is_ip_literal(std::string_view host) {
  if (host.empty()) return false;
  if (host.front() == '[' || host.find(':') != std::string_view::npos) return true;
  if (host.back() == '.') host.remove_suffix(1);
  const std::size_t dot = host.rfind('.');
  std::string_view last = dot == std::string_view::npos ? host : host.substr(dot + 1);
  if (last.empty()) return false;
  const auto all_of = [](std::string_view t, auto pred) {
    for (const char c : t) {
      if (!pred(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  if (last.size() >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')) {
    return all_of(last.substr(2), [](unsigned char c) { return std::isxdigit(c) != 0; });
  }
  return all_of(last, [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A timestamp's text in a fixed buffer: no allocation per line.
struct TimestampText {
  std::array<char, 84> chars;  // the cached prefix (at most 79) and ".123Z"'s last four
  std::size_t size = 0;
  std::string_view view() const { return {chars.data(), size}; }
};

// RFC 3339 UTC with milliseconds: "2026-11-29T10:00:00.123Z".
TimestampText format_timestamp(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto millis = static_cast<int>(duration_cast<milliseconds>(t - secs).count());
  // Lines come many to a second: the text up to the seconds is made once per second (per
  // thread), the milliseconds appended by hand.
  thread_local sys_seconds cached_secs{seconds::min()};
  thread_local std::array<char, 80> cached{};  // room for any int the compiler can imagine
  if (secs != cached_secs) {
    const std::time_t tt = system_clock::to_time_t(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    std::snprintf(cached.data(), cached.size(), "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    cached_secs = secs;
  }
  TimestampText out;
  const std::size_t n = std::strlen(cached.data());
  std::memcpy(out.chars.data(), cached.data(), n);
  out.chars[n] = static_cast<char>('0' + millis / 100);
  out.chars[n + 1] = static_cast<char>('0' + millis / 10 % 10);
  out.chars[n + 2] = static_cast<char>('0' + millis % 10);
  out.chars[n + 3] = 'Z';
  out.size = n + 4;
  return out;
}

// ECS event.type, as its JSON array: what kind of network event this was, for SIEM rules.
std::string_view event_type_json(const AuditRecord& r) {
  if (r.outcome == "success") return R"(["allowed"])";
  if (r.outcome == "unknown") return R"(["info"])";  // e.g. the 407 challenge
  if (r.event == "SANDBOX_NETWORK_DENIED") return R"(["denied"])";
  return R"(["error"])";
}

// url.path excludes the query and fragment; cutting them also keeps tokens passed as
// query parameters out of the log.
std::string_view path_only(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // U+2026

}  // namespace

std::string_view ended_name(Ended e) {
  switch (e) {
    case Ended::unset:
      return "";
    case Ended::completed:
      return "completed";
    case Ended::client_close:
      return "client_close";
    case Ended::client_reset:
      return "client_reset";
    case Ended::upstream_close:
      return "upstream_close";
    case Ended::upstream_reset:
      return "upstream_reset";
    case Ended::timeout:
      return "timeout";
    case Ended::shutdown:
      return "shutdown";
    case Ended::resources:
      return "resources_exhausted";
    case Ended::refused:
      return "refused";
    case Ended::malformed:
      return "malformed";
  }
  return "";
}

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::unset:
      return "";
    case Phase::connect:
      return "connect";
    case Phase::request:
      return "request";
    case Phase::headers:
      return "headers";
    case Phase::body:
      return "body";
  }
  return "";
}

ShownHost shown_host(std::string_view host) {
  ShownHost out;
  out.original_bytes = host.size();
  if (host.size() <= kMaxShownHostBytes) {
    out.text.assign(host);
    return out;
  }
  const std::size_t keep = kMaxShownHostBytes - kEllipsis.size();
  std::string_view tail = host.substr(host.size() - keep);
  const bool at_label_start = host[host.size() - keep - 1] == '.';
  if (const std::size_t dot = tail.find('.');
      !at_label_start && dot != std::string_view::npos && dot + 1 < tail.size()) {
    tail.remove_prefix(dot + 1);  // drop the partial label on the left
  } else {
    while (!tail.empty() && (static_cast<unsigned char>(tail.front()) & 0xC0U) == 0x80U) {
      tail.remove_prefix(1);  // not in the middle of a UTF-8 sequence
    }
  }
  out.text.reserve(kEllipsis.size() + tail.size());
  out.text.append(kEllipsis).append(tail);
  out.shortened = true;
  return out;
}

namespace {

// shown_host(host).text, copied into `storage` only when it has to be shortened.
std::string_view shown(std::string_view host, ShownHost& storage) {
  if (host.size() <= kMaxShownHostBytes) return host;
  storage = shown_host(host);
  return storage.text;
}

// Formats r into this thread's JsonLine; the view is valid until the thread's next call.
std::string_view format_line(const AuditRecord& r) {
  thread_local JsonLine line;
  line.start();
  const auto now = std::chrono::system_clock::now();
  line.str("@timestamp", format_timestamp(r.time == decltype(r.time){} ? now : r.time).view());
  line.raw("ecs", R"({"version":"8.11.0"})");

  line.open("event");
  if (!r.event.empty()) line.str("code", r.event);
  line.str("kind", "event");
  line.raw("category", R"(["network"])");
  line.raw("type", event_type_json(r));
  line.str("outcome", r.outcome.empty() ? std::string_view("unknown") : r.outcome);
  if (!r.reason.empty()) line.str("reason", r.reason);
  if (r.duration.count() > 0) line.num("duration", r.duration.count());
  line.close();

  ShownHost shortened;
  const std::string_view host = shown(r.host, shortened);
  if (!r.sandbox_id.empty() || !r.original_destination.empty() || r.suppressed_lines != 0 ||
      shortened.shortened || r.ended != Ended::unset || !r.would_deny.empty() ||
      !r.suggestion.empty() || r.redactions != 0 || !r.operator_message.empty()) {
    line.open("labels");
    if (!r.sandbox_id.empty()) line.str("sandbox_id", r.sandbox_id);
    if (!r.original_destination.empty()) {
      line.str("original_destination", r.original_destination);
    }
    if (r.suppressed_lines != 0) line.num("suppressed_lines", r.suppressed_lines);
    if (shortened.shortened) {
      line.raw("host_shortened", "true");
      line.num("host_bytes", shortened.original_bytes);
    }
    if (r.ended != Ended::unset) line.str("termination", ended_name(r.ended));
    if (r.phase != Phase::unset) line.str("termination_phase", phase_name(r.phase));
    if (!r.would_deny.empty()) line.str("would_deny", r.would_deny);
    if (!r.suggestion.empty()) line.str("suggestion", r.suggestion);
    if (!r.operator_message.empty()) line.str("operator_message", r.operator_message);
    if (r.redactions != 0) line.num("redactions", r.redactions);
    line.close();
  }

  line.open("source");
  if (!r.source_ip.empty()) line.str("ip", r.source_ip);
  if (r.source_port != 0) line.num("port", r.source_port);
  line.num("bytes", r.bytes_up);
  line.close();

  line.open("destination");
  if (!r.host.empty()) {
    line.str("address", host);
    if (!is_ip_literal(r.host)) line.str("domain", host);
  }
  if (!r.destination_ip.empty()) line.str("ip", r.destination_ip);
  if (r.port != 0) line.num("port", r.port);
  line.num("bytes", r.bytes_down);
  line.close();

  if (!r.protocol.empty()) {
    line.open("network");
    line.str("protocol", r.protocol);
    line.close();
  }
  if (!r.rule.empty()) {
    line.open("rule");
    line.str("name", r.rule);
    line.close();
  }
  if (!r.credential_name.empty()) {
    line.open("credential");
    line.str("name", r.credential_name);
    if (!r.credential_fingerprint.empty()) line.str("fingerprint", r.credential_fingerprint);
    if (r.credential_endpoint_status != 0 || !r.credential_endpoint_error.empty()) {
      line.open("endpoint");
      if (r.credential_endpoint_status != 0) {
        line.num("status_code", r.credential_endpoint_status);
      }
      if (!r.credential_endpoint_error.empty()) line.str("error", r.credential_endpoint_error);
      line.close();
    }
    line.close();
  }
  if (!r.method.empty() || r.http_status != 0 || !r.http_version.empty()) {
    line.open("http");
    if (!r.http_version.empty()) line.str("version", r.http_version);
    if (!r.method.empty()) {
      line.open("request");
      line.str("method", r.method);
      line.close();
    }
    if (r.http_status != 0) {
      line.open("response");
      line.num("status_code", r.http_status);
      line.close();
    }
    line.close();
  }
  const std::string_view path = path_only(r.url_path);
  if (!path.empty() || !r.url_scheme.empty()) {
    line.open("url");
    if (!path.empty()) line.str("path", path);
    if (!r.url_scheme.empty()) line.str("scheme", r.url_scheme);
    line.close();
  }
  if (!r.tls_sni.empty()) {
    line.open("tls");
    line.open("client");
    ShownHost sni;
    line.str("server_name", shown(r.tls_sni, sni));  // "…" marks a shortened one
    line.close();
    line.close();
  }
  return line.finish();
}

}  // namespace

std::string format_audit_line(const AuditRecord& r) {
  return std::string(format_line(r));
}

std::string format_audit_timestamp(std::chrono::system_clock::time_point t) {
  return std::string(format_timestamp(t).view());
}

namespace {

std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool would_block(int error) {
  return error == EAGAIN || error == EWOULDBLOCK;
}

}  // namespace

AuditLog::AuditLog(std::string target, std::size_t max_queued_lines, const AuditChainOptions& chain)
    : target_(std::move(target)),
      sink_(target_ == "off"      ? Sink::off
            : target_ == "stdout" ? Sink::stdout_stream
            : target_ == "stderr" ? Sink::stderr_stream
                                  : Sink::file),
      max_queued_(max_queued_lines == 0 ? 1 : max_queued_lines) {
  switch (sink_) {
    case Sink::off:
      return;  // no fd, no thread: write() is a no-op
    case Sink::stdout_stream:
      adopt(STDOUT_FILENO, false);
      break;
    case Sink::stderr_stream:
      adopt(STDERR_FILENO, false);
      break;
    case Sink::file: {
      const int fd = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
      if (fd < 0) {
        throw std::runtime_error("audit log: cannot open '" + target_ +
                                 "': " + std::strerror(errno));
      }
      adopt(fd, true);
      if (chain.enabled && kind_ == Kind::regular) {
        try {
          chain_ = std::make_unique<AuditChain>(target_, chain);
        } catch (...) {
          ::close(fd_);
          throw;
        }
      }
      break;
    }
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // -1: poll(2) ignores it
  writer_ = std::thread([this] { run(); });
  if (pthread_getcpuclockid(writer_.native_handle(), &writer_clock_) != 0) {
    writer_clock_ = clockid_t{};  // writer_cpu_time() then reports zero
  }
}

AuditLog::~AuditLog() {
  if (writer_.joinable()) {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    // Keep an earlier deadline (flush_until at shutdown); else give the sink kCloseTimeout.
    const std::int64_t close_by = steady_ns(std::chrono::steady_clock::now() + kCloseTimeout);
    std::int64_t current = give_up_at_.load();
    while (close_by < current && !give_up_at_.compare_exchange_weak(current, close_by)) {
    }
    wake_.notify_one();
    if (wake_fd_ >= 0) eventfd_write(wake_fd_, 1);
    writer_.join();
  }
  if (owned_ && fd_ >= 0) ::close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

// Takes the descriptor lines go to and decides how to write it: see the class comment.
void AuditLog::adopt(int fd, bool owned) {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    fd_ = fd;
    owned_ = owned;
    kind_ = Kind::regular;
    return;
  }
  // A description of our own, so O_NONBLOCK does not reach whoever shares this one (the
  // daemon's stderr may be the same pipe). Works for pipes, FIFOs and terminals; not for
  // sockets (ENXIO), nor for a pipe without a reader (ENXIO, and writes fail anyway).
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const int own = ::open(self.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (own >= 0) {
    if (owned) ::close(fd);
    fd_ = own;
    owned_ = true;
    kind_ = Kind::nonblocking;
    return;
  }
  fd_ = fd;
  owned_ = owned;
  kind_ = Kind::polled;
}

void AuditLog::write(const AuditRecord& r) noexcept {
  if (sink_ == Sink::off) return;
  try {
    const std::string_view line = format_line(r);
    bool was_empty = false;
    {
      const std::lock_guard lock(mutex_);
      if (queued_lines_ >= max_queued_) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      was_empty = queue_empty();
      queue_.append(line);
      ++queued_lines_;
      ++enqueued_;
    }
    if (was_empty) wake_.notify_one();  // otherwise the writer is already due to drain it
  } catch (...) {                       // bad_alloc or a lock failure: lose the line, keep serving
    failures_.fetch_add(1, std::memory_order_relaxed);
  }
}

void AuditLog::reopen() noexcept {
  if (sink_ != Sink::file) return;
  try {
    {
      // Lines queued before this call still go to the old file, later ones to the new one.
      const std::lock_guard lock(mutex_);
      reopens_.push_back(queue_.size());
      ++enqueued_;
    }
    wake_.notify_one();
  } catch (...) {
    failures_.fetch_add(1, std::memory_order_relaxed);
  }
}

void AuditLog::flush() noexcept {
  if (sink_ == Sink::off) return;
  std::unique_lock lock(mutex_);
  const std::uint64_t target = enqueued_;
  drained_.wait(lock, [&] { return written_ >= target; });
}

void AuditLog::flush_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (sink_ == Sink::off) return;
  give_up_at_.store(steady_ns(deadline));
  if (wake_fd_ >= 0) eventfd_write(wake_fd_, 1);  // a writer already waiting re-reads it
  std::unique_lock lock(mutex_);
  const std::uint64_t target = enqueued_;
  // The margin lets a writer that gives up at the deadline count what it dropped. A writer
  // stuck in write(2) on a regular file (a hung network filesystem) is not waited for.
  drained_.wait_until(lock, deadline + std::chrono::milliseconds(200),
                      [&] { return written_ >= target; });
}

std::uint64_t AuditLog::write_failures() const noexcept {
  return failures_.load(std::memory_order_relaxed);
}

std::chrono::nanoseconds AuditLog::writer_cpu_time() const noexcept {
  timespec t{};
  if (!writer_.joinable() || writer_clock_ == clockid_t{} ||
      ::clock_gettime(writer_clock_, &t) != 0) {
    return std::chrono::nanoseconds(0);
  }
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// The writer thread: takes the whole queue at once and writes it outside the lock, so
// write() callers wait only for a push, never for I/O.
void AuditLog::run() {
  // A closed pipe (the log reader died) must fail the write with EPIPE, not kill the
  // proxy: SIGPIPE from write(2) goes to the writing thread, so block it here only.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);

  // The writer's side of the queue: swapped with queue_, so the two buffers keep their
  // capacity and trade places batch after batch.
  std::string batch;
  std::vector<std::size_t> batch_reopens;
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto work = [&] { return stop_ || !queue_empty(); };
    if (const auto due = chain_ ? chain_->checkpoint_due() : std::nullopt) {
      wake_.wait_until(lock, *due, work);
    } else {
      wake_.wait(lock, work);
    }
    if (queue_empty()) {
      // Stopping, or a timed checkpoint is due: the chain is vouched for up to its end.
      const bool stopping = stop_;
      lock.unlock();
      write_checkpoint();
      if (stopping) return;
      lock.lock();
      continue;
    }
    // Let a burst gather for a moment, so one wake-up and one write(2) carry many lines.
    // Producers signal only an empty queue, so meanwhile they make no futex call either.
    wake_.wait_for(lock, kGatherTime, [&] { return stop_; });
    batch.clear();
    batch_reopens.clear();
    batch.swap(queue_);
    batch_reopens.swap(reopens_);
    const std::uint64_t entries = queued_lines_ + batch_reopens.size();
    queued_lines_ = 0;
    lock.unlock();
    std::size_t from = 0;
    for (const std::size_t at : batch_reopens) {
      write_chained(std::string_view(batch).substr(from, at - from));
      write_checkpoint();  // the old file ends vouched for
      reopen_file();
      from = at;
    }
    write_chained(std::string_view(batch).substr(from));
    // A burst's buffer is not kept for ever: 16,384 queued lines are about 10 MiB.
    if (batch.capacity() > kMaxWriteBytes * 4) batch = std::string();
    if (sealed_.capacity() > kMaxWriteBytes * 4) sealed_ = std::string();
    lock.lock();
    written_ += entries;
    drained_.notify_all();
  }
}

// Writes whole lines, each given its chain field first when the log is chained.
void AuditLog::write_chained(std::string_view lines) {
  if (!chain_) {
    write_batch(lines);
    return;
  }
  sealed_.clear();
  while (!lines.empty()) {
    const std::size_t nl = lines.find('\n');  // every queued line ends in "}\n"
    const std::size_t end = nl == std::string_view::npos ? lines.size() : nl + 1;
    chain_->append(lines.substr(0, end), sealed_);
    lines.remove_prefix(end);
  }
  write_batch(sealed_);
}

// A checkpoint over the lines written since the last one (if the chain has a key), then the
// head saved next to the log: at rotation, at shutdown and when one is due by time.
void AuditLog::write_checkpoint() {
  if (!chain_) return;
  sealed_.clear();
  chain_->checkpoint(sealed_);
  write_batch(sealed_);
  chain_->save_head();
}

// Writes whole lines in few write(2) calls of at most kMaxWriteBytes each (a single longer
// line goes alone), which costs far less than one call per line when traffic is heavy.
void AuditLog::write_batch(std::string_view lines) {
  while (!lines.empty()) {
    std::size_t end = lines.size();
    if (end > kMaxWriteBytes) {
      end = lines.rfind('\n', kMaxWriteBytes - 1);
      if (end == std::string_view::npos) end = lines.find('\n', kMaxWriteBytes);
      ++end;  // every line ends in '\n'
    }
    if (const std::uint64_t lost = write_lines(lines.substr(0, end)); lost > 0) {
      failures_.fetch_add(lost, std::memory_order_relaxed);
    }
    lines.remove_prefix(end);
  }
}

// Writes a chunk of whole lines; returns how many of them did not reach the sink. Lines hold
// no raw '\n' (JSON escapes it), so the '\n's count lines, which is done only on a failure.
std::uint64_t AuditLog::write_lines(std::string_view chunk) {
  const auto lines_in = [](std::string_view text) {
    return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
  };
  if (torn_) {
    std::size_t done = 0;
    if (const int error = write_all("\n", done); error != 0) {
      const std::uint64_t lost = lines_in(chunk);
      note_failure(error, lost);
      return lost;
    }
    torn_ = false;
  }
  std::size_t done = 0;
  const int error = write_all(chunk, done);
  if (error == 0) {
    note_success();
    return 0;
  }
  const std::size_t whole = done == 0 ? 0 : chunk.rfind('\n', done - 1) + 1;
  if (done > whole) cut_fragment(done - whole);
  const std::uint64_t lost = lines_in(chunk.substr(whole));
  note_failure(error, lost);
  return lost;
}

// Writes data from `done` on until all of it is written or the sink fails; returns 0 or the
// errno (ETIMEDOUT: the writer gave up waiting, see flush_until). `done` ends as the number
// of bytes written.
int AuditLog::write_all(std::string_view data, std::size_t& done) {
  while (done < data.size()) {
    std::size_t want = data.size() - done;
    if (kind_ != Kind::regular && want > PIPE_BUF) {
      // Whole lines of at most PIPE_BUF bytes per write(2): a pipe takes such a write whole
      // or not at all (EAGAIN), so a line is never left half-written in it (one longer than
      // PIPE_BUF excepted); and POLLOUT promises room for PIPE_BUF bytes, not more.
      const std::size_t last_nl = data.substr(done, PIPE_BUF).rfind('\n');
      want = last_nl == std::string_view::npos ? PIPE_BUF : last_nl + 1;
    }
    if (kind_ == Kind::polled && !wait_writable()) return ETIMEDOUT;
    const ssize_t n = ::write(fd_, data.data() + done, want);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return EIO;
    if (errno == EINTR) continue;
    if (would_block(errno) && kind_ != Kind::regular) {
      if (!wait_writable()) return ETIMEDOUT;
      continue;
    }
    return errno;
  }
  return 0;
}

// Waits until fd_ takes bytes. Returns false once the give-up deadline has passed (at once if
// it already has); warns on stderr when the sink has taken nothing for kStallWarning.
bool AuditLog::wait_writable() {
  const auto start = std::chrono::steady_clock::now();
  bool stall_reported = false;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const std::int64_t give_up = give_up_at_.load();
    if (steady_ns(now) >= give_up) return false;
    std::int64_t wait_ns = give_up - steady_ns(now);
    if (!stall_reported) {
      wait_ns = std::min<std::int64_t>(
          wait_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(start + kStallWarning - now)
                       .count());
    }
    const int timeout_ms = static_cast<int>(std::clamp<std::int64_t>(
        (wait_ns + 999'999) / 1'000'000, 0, std::numeric_limits<int>::max()));
    std::array<pollfd, 2> fds{pollfd{fd_, POLLOUT, 0}, pollfd{wake_fd_, POLLIN, 0}};
    const int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r < 0 && errno != EINTR) return true;       // let write(2) report what is wrong
    if (r > 0 && fds[0].revents != 0) return true;  // writable, or an error write(2) will see
    if (r > 0 && (fds[1].revents & POLLIN) != 0) {
      eventfd_t ignored = 0;
      eventfd_read(wake_fd_, &ignored);  // the deadline may have moved: look again
    }
    if (!stall_reported && std::chrono::steady_clock::now() - start >= kStallWarning) {
      stall_reported = true;
      note_failure(EAGAIN, 0);  // "the sink takes nothing": one warning, no line lost yet
    }
  }
}

// A write cut short left `fragment_bytes` of a line at the end of the sink. A regular file is
// cut back to the line boundary before it; anything else keeps the fragment, and the next
// write terminates it.
void AuditLog::cut_fragment(std::size_t fragment_bytes) {
  if (kind_ == Kind::regular) {
    // The position is just past the fragment (O_APPEND moved it to the end of the file
    // before the write; without O_APPEND it is where the write left it).
    const off_t end = ::lseek(fd_, 0, SEEK_CUR);
    const off_t keep = end - static_cast<off_t>(fragment_bytes);
    if (end >= 0 && keep >= 0 && ::ftruncate(fd_, keep) == 0) {
      ::lseek(fd_, keep, SEEK_SET);  // no hole at the next write to a non-append stdout
      return;
    }
  }
  torn_ = true;
}

void AuditLog::reopen_file() {
  const int fd = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    failures_.fetch_add(1, std::memory_order_relaxed);  // keep writing to the old file
    return;
  }
  if (owned_) ::close(fd_);
  torn_ = false;  // a new file
  adopt(fd, true);
}

void AuditLog::note_success() {
  if (!warned_) return;
  warned_ = false;
  warn("audit_write_recovered", {}, lost_since_warning_);
}

void AuditLog::note_failure(int error, std::uint64_t lost) {
  lost_since_warning_ += lost;
  if (warned_) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_warning_ != decltype(last_warning_){} && now - last_warning_ < kWarningInterval) {
    return;
  }
  warned_ = true;
  last_warning_ = now;
  lost_since_warning_ = lost;
  if (would_block(error)) {
    warn("audit_write_stalled", "the log's reader takes nothing", lost);
  } else if (error == ETIMEDOUT) {
    warn("audit_write_failing", "gave up waiting for the log's reader", lost);
  } else {
    warn("audit_write_failing", std::error_code(error, std::generic_category()).message(), lost);
  }
}

// One JSON line on stderr, in one write(2), from the writer thread. Not when the audit log is
// stderr itself: what cannot write there cannot warn there either.
void AuditLog::warn(std::string_view event, std::string_view error, std::uint64_t lost) {
  if (sink_ == Sink::stderr_stream) return;
  try {
    json::object o{{"event", event}, {"target", target_}, {"lines_lost", lost}};
    if (!error.empty()) o["error"] = error;
    const std::string line = json::serialize(o) + "\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  } catch (...) {  // bad_alloc: no warning
  }
}

}  // namespace sandgate::telemetry
