#include "telemetry/audit_log.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
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
// and at most kMaxAuditFieldBytes long, cut on a character boundary. Boost.JSON escapes
// quotes, backslashes and control characters when the line is serialised.
json::string clean(std::string_view s, json::storage_ptr sp) {
  json::string out(std::move(sp));
  out.reserve(std::min(s.size(), kMaxAuditFieldBytes));
  while (!s.empty()) {
    const std::size_t n = utf8_sequence_length(s);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(0, n);
    if (out.size() + piece.size() > kMaxAuditFieldBytes) break;
    out.append(piece);
    s.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

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

// RFC 3339 UTC with milliseconds: "2026-11-29T10:00:00.123Z".
std::string format_timestamp(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto millis = duration_cast<milliseconds>(t - secs).count();
  const std::time_t tt = system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::array<char, 80> buf{};  // room for any int the compiler can imagine
  std::snprintf(buf.data(), buf.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buf.data();
}

// ECS event.type: what kind of network event this was, for SIEM rules.
std::string_view event_type(const AuditRecord& r) {
  if (r.outcome == "success") return "allowed";
  if (r.event == "SANDBOX_NETWORK_DENIED") return "denied";
  return "error";
}

// url.path excludes the query and fragment; cutting them also keeps tokens passed as
// query parameters out of the log.
std::string_view path_only(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

}  // namespace

std::string format_audit_line(const AuditRecord& r) {
  std::array<unsigned char, 4096> buffer;  // one line usually fits: no heap for the tree
  json::monotonic_resource resource(buffer.data(), buffer.size());
  const json::storage_ptr sp(&resource);
  const auto str = [&](std::string_view s) { return clean(s, sp); };

  json::object line(sp);
  const auto now = std::chrono::system_clock::now();
  line["@timestamp"] = format_timestamp(r.time == decltype(r.time){} ? now : r.time);
  line["ecs"] = json::object({{"version", "8.11.0"}}, sp);

  json::object event(sp);
  if (!r.event.empty()) event["code"] = str(r.event);
  event["kind"] = "event";
  event["category"] = json::array({"network"}, sp);
  event["type"] = json::array({json::string(event_type(r), sp)}, sp);
  event["outcome"] = r.outcome.empty() ? json::string("unknown", sp) : str(r.outcome);
  if (!r.reason.empty()) event["reason"] = str(r.reason);
  if (r.duration.count() > 0) event["duration"] = r.duration.count();
  line["event"] = std::move(event);

  json::object labels(sp);
  if (!r.sandbox_id.empty()) labels["sandbox_id"] = str(r.sandbox_id);
  if (!r.original_destination.empty()) {
    labels["original_destination"] = str(r.original_destination);
  }
  if (!labels.empty()) line["labels"] = std::move(labels);

  json::object source(sp);
  if (!r.source_ip.empty()) source["ip"] = str(r.source_ip);
  if (r.source_port != 0) source["port"] = r.source_port;
  source["bytes"] = r.bytes_up;
  line["source"] = std::move(source);

  json::object destination(sp);
  if (!r.host.empty()) {
    destination["address"] = str(r.host);
    if (!is_ip_literal(r.host)) destination["domain"] = str(r.host);
  }
  if (!r.destination_ip.empty()) destination["ip"] = str(r.destination_ip);
  if (r.port != 0) destination["port"] = r.port;
  destination["bytes"] = r.bytes_down;
  line["destination"] = std::move(destination);

  if (!r.protocol.empty()) line["network"] = json::object({{"protocol", str(r.protocol)}}, sp);
  if (!r.rule.empty()) line["rule"] = json::object({{"name", str(r.rule)}}, sp);

  json::object http(sp);
  if (!r.method.empty()) http["request"] = json::object({{"method", str(r.method)}}, sp);
  if (r.http_status != 0) {
    http["response"] = json::object({{"status_code", r.http_status}}, sp);
  }
  if (!http.empty()) line["http"] = std::move(http);

  const std::string_view path = path_only(r.url_path);
  if (!path.empty()) line["url"] = json::object({{"path", str(path)}}, sp);
  if (!r.tls_sni.empty()) {
    line["tls"] =
        json::object({{"client", json::object({{"server_name", str(r.tls_sni)}}, sp)}}, sp);
  }

  std::string out = json::serialize(line);
  out.push_back('\n');
  return out;
}

AuditLog::AuditLog(std::string target, std::size_t max_queued_lines)
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
      fd_ = STDOUT_FILENO;
      break;
    case Sink::stderr_stream:
      fd_ = STDERR_FILENO;
      break;
    case Sink::file:
      fd_ = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
      if (fd_ < 0) {
        throw std::runtime_error("audit log: cannot open '" + target_ +
                                 "': " + std::strerror(errno));
      }
      break;
  }
  writer_ = std::thread([this] { run(); });
}

AuditLog::~AuditLog() {
  if (writer_.joinable()) {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    writer_.join();
  }
  if (sink_ == Sink::file && fd_ >= 0) ::close(fd_);
}

void AuditLog::write(const AuditRecord& r) noexcept {
  if (sink_ == Sink::off) return;
  try {
    std::string line = format_audit_line(r);
    bool was_empty = false;
    {
      const std::lock_guard lock(mutex_);
      if (queue_.size() >= max_queued_) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      was_empty = queue_.empty();
      queue_.push_back(std::move(line));
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
      // An empty entry is the reopen marker (lines always end in '\n'): lines queued
      // before this call still go to the old file, later ones to the new one.
      const std::lock_guard lock(mutex_);
      queue_.emplace_back();
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

std::uint64_t AuditLog::write_failures() const noexcept {
  return failures_.load(std::memory_order_relaxed);
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

  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left to write
    // Let a burst gather for a moment, so one wake-up and one write(2) carry many lines.
    // Producers signal only an empty queue, so meanwhile they make no futex call either.
    wake_.wait_for(lock, kGatherTime, [&] { return stop_; });
    std::deque<std::string> batch;
    batch.swap(queue_);
    lock.unlock();
    // Lines are gathered into few write(2) calls (each holds whole lines only), which costs
    // far less than one call per line when traffic is heavy.
    std::string chunk;
    std::uint64_t chunk_lines = 0;
    auto flush_chunk = [&] {
      if (chunk_lines > 0 && !write_line(chunk)) {
        failures_.fetch_add(chunk_lines, std::memory_order_relaxed);
      }
      chunk.clear();
      chunk_lines = 0;
    };
    for (const std::string& entry : batch) {
      if (entry.empty()) {
        flush_chunk();
        reopen_file();
        continue;
      }
      if (chunk.size() + entry.size() > kMaxWriteBytes) flush_chunk();
      chunk += entry;
      ++chunk_lines;
    }
    flush_chunk();
    lock.lock();
    written_ += batch.size();
    drained_.notify_all();
  }
}

// Whole lines per write(2), so with O_APPEND they land whole even when another process
// appends to the same file. Short writes (a signal, a nearly full disk) are continued.
bool AuditLog::write_line(const std::string& lines) {
  std::string_view rest = lines;
  while (!rest.empty()) {
    const ssize_t n = ::write(fd_, rest.data(), rest.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void AuditLog::reopen_file() {
  const int fd = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    failures_.fetch_add(1, std::memory_order_relaxed);  // keep writing to the old file
    return;
  }
  ::close(fd_);
  fd_ = fd;
}

}  // namespace sandgate::telemetry
