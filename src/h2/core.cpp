// The nghttp2 session of one connection: its options (the limits of h2.hpp), the SETTINGS we
// send, and the submissions the exchanges make. Runs on the connection's executor only.
#include "h2/core.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <string>

#include "common/ascii.hpp"
#include "h2/callbacks.hpp"

namespace sandgate::h2::detail {

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Owns the nghttp2 option and callbacks objects while a session is made from them.
struct SessionParts {
  nghttp2_option* option = nullptr;
  nghttp2_session_callbacks* callbacks = nullptr;
  SessionParts() {
    nghttp2_option_new(&option);
    nghttp2_session_callbacks_new(&callbacks);
  }
  ~SessionParts() {
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
  }
  SessionParts(const SessionParts&) = delete;
  SessionParts& operator=(const SessionParts&) = delete;
};

}  // namespace

void SkippedStreamIds::opened(std::int32_t id) {
  if (id <= highest_) return;
  const std::int32_t expected = highest_ < 0 ? 1 : highest_ + 2;
  if (id > expected) {
    gaps_[next_] = Gap{expected, id - 2};
    next_ = (next_ + 1) % kMaxGaps;
  }
  highest_ = id;
}

bool SkippedStreamIds::skipped(std::int32_t id) const {
  for (const Gap& g : gaps_) {
    if (id >= g.first && id <= g.last) return true;
  }
  return false;
}

asio::awaitable<bool> Signal::wait() {
  [[maybe_unused]] auto [ec] = co_await timer_.async_wait(use_tuple);
  const asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  co_return cs.cancelled() == asio::cancellation_type::none;
}

asio::awaitable<Signal::Woke> Signal::wait_until(std::chrono::steady_clock::time_point deadline) {
  timer_.expires_at(deadline);  // nobody else waits on it: nothing is cancelled
  auto [ec] = co_await timer_.async_wait(use_tuple);
  timer_.expires_at(std::chrono::steady_clock::time_point::max());
  const asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return Woke::cancelled;
  co_return ec ? Woke::notified : Woke::deadline;
}

bool RateLimit::take() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(static_cast<double>(burst_), tokens_ + elapsed * static_cast<double>(rate_));
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

StreamState::StreamState(Core& c, const asio::any_io_executor& ex)
    : core(&c), readable(ex), writable(ex), live_next(c.live_) {
  if (live_next != nullptr) live_next->live_prev = this;
  c.live_ = this;
}

StreamState::~StreamState() {
  if (core == nullptr) return;
  if (live_prev != nullptr) {
    live_prev->live_next = live_next;
  } else {
    core->live_ = live_next;
  }
  if (live_next != nullptr) live_next->live_prev = live_prev;
}

Core::Core(const asio::any_io_executor& ex, Role role, const Settings& settings)
    : ex_(ex),
      role_(role),
      settings_(settings),
      abnormal_ends_(settings.abnormal_end_burst, settings.abnormal_end_rate),
      write_wanted_(ex),
      slot_free_(ex) {
  SessionParts parts;
  nghttp2_option_set_no_auto_window_update(parts.option, 1);
  nghttp2_option_set_max_settings(parts.option, settings.max_settings_entries);
  nghttp2_option_set_max_outbound_ack(parts.option, settings.max_outbound_ack);
  nghttp2_option_set_max_continuations(parts.option, settings.max_continuations);
  nghttp2_option_set_stream_reset_rate_limit(parts.option, settings.reset_burst,
                                             settings.reset_rate);
  // Our HPACK encoder keeps the default 4 KiB table whatever the peer allows.
  nghttp2_option_set_max_deflate_dynamic_table_size(parts.option, 4096);
  // Closed streams stay remembered (nghttp2's default), so a frame on one is answered as RFC
  // 9113 section 5.1 says: DATA or HEADERS after the peer's END_STREAM or RST_STREAM is a
  // connection error STREAM_CLOSED. nghttp2 bounds them: closed plus open streams of the peer
  // never exceed our SETTINGS_MAX_CONCURRENT_STREAMS (the oldest closed one is dropped
  // first), so a flood of short streams holds no more than the open-stream limit does.
  auto* cb = parts.callbacks;
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, &Callbacks::on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Callbacks::on_data_chunk_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb,
                                                               &Callbacks::on_invalid_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Callbacks::on_stream_close);
  const int rv = role == Role::server
                     ? nghttp2_session_server_new2(&session_, cb, this, parts.option)
                     : nghttp2_session_client_new2(&session_, cb, this, parts.option);
  if (rv != 0) throw std::bad_alloc();  // nghttp2 fails here only without memory

  std::vector<nghttp2_settings_entry> entries{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(settings.stream_window)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(settings.max_header_list_bytes)},
  };
  if (role == Role::client) entries.push_back({NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries.data(), entries.size());
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, settings.connection_window);
}

Core::~Core() {
  end();
  nghttp2_session_del(session_);
}

bool Core::receive(std::span<const std::uint8_t> bytes) {
  if (failed_ || ended_) return false;
  const ssize_t rv = nghttp2_session_mem_recv(session_, bytes.data(), bytes.size());
  if (rv >= 0) {
    // The write side wakes only for something to do: frames to send (ACKs, WINDOW_UPDATEs,
    // what a callback submitted) or the session's end; not after every read.
    if (wants_write() || !wants_read()) write_wanted_.notify();
    return true;
  }
  // A fatal error (a flood nghttp2 caught, bad client magic, ...): end the session with a
  // GOAWAY the write side may still get out, and read nothing more.
  write_wanted_.notify();
  failed_ = true;
  if (rv == NGHTTP2_ERR_FLOODED) {
    fail_connection(NGHTTP2_ENHANCE_YOUR_CALM, "control_frame_flood");
  } else if (rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
    fail_connection(NGHTTP2_ENHANCE_YOUR_CALM, "continuation_flood");
  } else {
    fail_connection(NGHTTP2_PROTOCOL_ERROR, "protocol_error");
  }
  return false;
}

bool Core::produce(std::vector<std::uint8_t>& out) {
  if (ended_) return true;
  while (out.size() < kWriteBufferBytes) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      failed_ = true;
      return false;
    }
    if (n == 0) break;
    out.insert(out.end(), data, data + n);
  }
  return true;
}

bool Core::wants_read() const {
  return !ended_ && !failed_ && nghttp2_session_want_read(session_) != 0;
}

bool Core::wants_write() const {
  return !ended_ && nghttp2_session_want_write(session_) != 0;
}

void Core::end() {
  if (ended_) return;
  ended_ = true;
  for (StreamState* s = std::exchange(live_, nullptr); s != nullptr;) {
    StreamState* next = std::exchange(s->live_next, nullptr);
    s->live_prev = nullptr;
    s->core = nullptr;
    if (!s->closed) {
      s->closed = true;
      if (!s->failure) s->failure = make_error_code(Error::connection_closed);
    }
    s->outbox = {};
    s->readable.notify();
    s->writable.notify();
    s = next;
  }
  streams_.clear();
  slot_free_.notify();
  write_wanted_.notify();
}

void Core::shutdown() {
  if (ended_) return;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  write_wanted_.notify();
}

void Core::terminate(ResetCode code) {
  if (ended_) return;
  nghttp2_session_terminate_session(session_, static_cast<std::uint32_t>(code));
  write_wanted_.notify();
}

void Core::count_abnormal_end() {
  if (calmed_ || abnormal_ends_.take()) return;
  calmed_ = true;
  fail_connection(NGHTTP2_ENHANCE_YOUR_CALM, "stream_reset_flood");
}

void Core::count_data_frame(const nghttp2_frame& frame) {
  const std::size_t payload = frame.hd.length - frame.data.padlen;
  if (payload > 0 || (frame.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    empty_frames_ = 0;
    return;
  }
  if (++empty_frames_ <= settings_.max_empty_frames || calmed_) return;
  calmed_ = true;
  fail_connection(NGHTTP2_ENHANCE_YOUR_CALM, "empty_frame_flood");
}

void Core::fail_connection(std::uint32_t code, std::string_view cause) {
  if (error_cause_.empty()) {
    error_cause_ = cause;
    error_code_ = code;
  }
  nghttp2_session_terminate_session(session_, code);
}

namespace {

// RFC 9113 section 7, as error_cause() names them.
std::string_view goaway_code_name(std::uint32_t code) {
  switch (code) {
    case NGHTTP2_PROTOCOL_ERROR:
      return "protocol_error";
    case NGHTTP2_INTERNAL_ERROR:
      return "internal_error";
    case NGHTTP2_FLOW_CONTROL_ERROR:
      return "flow_control_error";
    case NGHTTP2_SETTINGS_TIMEOUT:
      return "settings_timeout";
    case NGHTTP2_FRAME_SIZE_ERROR:
      return "frame_size_error";
    case NGHTTP2_COMPRESSION_ERROR:
      return "compression_error";
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return "enhance_your_calm";
    default:
      return "h2_error";
  }
}

}  // namespace

void Core::goaway_sent(std::uint32_t code) {
  if (code == NGHTTP2_NO_ERROR || !error_cause_.empty()) return;
  error_cause_ = pending_cause_.empty() ? goaway_code_name(code) : pending_cause_;
  error_code_ = code;
}

void Core::on_head_complete(StreamState& s) {
  if (role_ != Role::server) return;
  RequestHead& r = s.request;
  if (s.too_large) return answer(s, 431);
  // Plain CONNECT would open a tunnel inside the intercepted connection (nested tunnels are
  // refused everywhere in sandgate); extended CONNECT never gets here, as we do not enable it.
  if (r.method == "CONNECT") return answer(s, 405);
  const std::string_view host = find_field(r.fields, "host");
  if (r.authority.empty()) {
    if (host.empty()) return answer(s, 400);
    r.authority = host;
  } else if (!host.empty() && !iequals_ascii(host, r.authority)) {
    return answer(s, 400);  // two authorities: which one a filter decides on is ambiguous
  }
  const auto hosts = std::count_if(r.fields.begin(), r.fields.end(),
                                   [](const Field& f) { return f.name == "host"; });
  if (hosts > 1) return answer(s, 400);  // more than one host, wherever they are
  if (on_request) on_request(streams_.at(s.id));
}

void Core::answer(StreamState& s, int status) {
  s.discard = true;
  if (s.unread() > 0) nghttp2_session_consume(session_, s.id, s.unread());
  s.inbox.clear();
  s.inbox_pos = 0;
  submit_response(s, status, {}, true);
  if (on_refused) on_refused(s.request, status);
}

error_code Core::submit_response(StreamState& s, int status, const Fields& fields,
                                 bool end_stream) {
  if (s.head_sent || s.closed) return make_error_code(Error::invalid_state);
  const std::string status_text = std::to_string(status);
  std::vector<nghttp2_nv>& nva = nva_;  // nghttp2 copies the head at submission
  nva.clear();
  nva.push_back(make_nv(":status", status_text));
  std::vector<std::string> lowered;
  add_sendable_nv(nva, fields, lowered);
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = &Callbacks::read_data;
  const int rv = nghttp2_submit_response(session_, s.id, nva.data(), nva.size(),
                                         end_stream ? nullptr : &provider);
  if (rv != 0) return make_error_code(Error::protocol);
  s.head_sent = true;
  s.provider = !end_stream;
  s.local_ended = end_stream;
  write_wanted_.notify();
  return {};
}

std::uint32_t Core::client_stream_limit() const {
  const std::uint32_t peer =
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return std::min(peer, settings_.max_concurrent_streams);
}

asio::awaitable<std::pair<error_code, std::shared_ptr<StreamState>>> Core::submit_request(
    const RequestHead& head, bool end_stream) {
  for (;;) {
    if (ended_ || failed_) co_return std::pair{make_error_code(Error::connection_closed), nullptr};
    if (goaway_received_ || nghttp2_session_check_request_allowed(session_) == 0) {
      co_return std::pair{make_error_code(Error::goaway), nullptr};
    }
    if (remote_settings_ && open_client_streams() < client_stream_limit()) break;
    const bool woke = co_await slot_free_.wait();
    if (!woke) {
      co_return std::pair{error_code(asio::error::operation_aborted), nullptr};
    }
  }
  std::string_view authority = head.authority;
  if (authority.empty()) authority = find_field_ascii(head.fields, "host");
  // Filled and submitted with no suspension in between: nghttp2 copies the head.
  std::vector<nghttp2_nv>& nva = nva_;
  nva.clear();
  nva.push_back(make_nv(":method", head.method));
  if (head.method != "CONNECT") {
    nva.push_back(make_nv(":scheme", head.scheme));
    nva.push_back(make_nv(":path", head.path));
  }
  nva.push_back(make_nv(":authority", authority));
  std::vector<std::string> lowered;
  add_sendable_nv(nva, head.fields, lowered);

  auto s = std::make_shared<StreamState>(*this, ex_);
  nghttp2_data_provider provider{};
  provider.source.ptr = s.get();
  provider.read_callback = &Callbacks::read_data;
  const std::int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                                 end_stream ? nullptr : &provider, s.get());
  if (id < 0) co_return std::pair{make_error_code(Error::protocol), nullptr};
  s->id = id;
  s->head_sent = true;
  s->provider = !end_stream;
  s->local_ended = end_stream;
  streams_.emplace(id, s);
  write_wanted_.notify();
  co_return std::pair{error_code{}, std::move(s)};
}

void Core::resume(StreamState& s) {
  if (s.deferred && !s.closed) {
    s.deferred = false;
    nghttp2_session_resume_data(session_, s.id);
  }
  write_wanted_.notify();
}

void Core::reset(StreamState& s, ResetCode code) {
  if (s.closed) return;
  s.app_reset = true;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, static_cast<std::uint32_t>(code));
  write_wanted_.notify();
}

void Core::consume(StreamState& s, std::size_t n) {
  // On a closed stream nghttp2 updates the connection window only, which is what is owed.
  nghttp2_session_consume(session_, s.id, n);
  write_wanted_.notify();
}

void Core::release(StreamState& s) {
  s.discard = true;  // nobody reads on: later DATA is acknowledged as it arrives
  if (s.unread() > 0) consume(s, s.unread());
  s.inbox.clear();
  s.inbox.shrink_to_fit();
  s.inbox_pos = 0;
}

error_code stream_error(const StreamState& s) {
  if (s.failure) return s.failure;
  if (s.close_code == NGHTTP2_REFUSED_STREAM) return make_error_code(Error::refused);
  return make_error_code(Error::stream_reset);
}

asio::awaitable<std::pair<error_code, std::size_t>> read_body(StreamState& s,
                                                              std::span<std::uint8_t> buf) {
  for (;;) {
    if (s.unread() > 0 && !buf.empty()) {
      const std::size_t n = std::min(buf.size(), s.unread());
      std::memcpy(buf.data(), s.inbox.data() + s.inbox_pos, n);
      s.inbox_pos += n;
      if (s.inbox_pos == s.inbox.size()) {
        s.inbox.clear();
        s.inbox_pos = 0;
      }
      if (s.core) s.core->consume(s, n);
      co_return std::pair{error_code{}, n};
    }
    if (s.remote_ended && s.unread() == 0) co_return std::pair{error_code{}, std::size_t{0}};
    // A stream that closed before the peer ended it was cut off, whatever the reset's code.
    if (s.closed) co_return std::pair{stream_error(s), std::size_t{0}};
    const bool woke = co_await s.readable.wait();
    if (!woke) {
      co_return std::pair{error_code(asio::error::operation_aborted), std::size_t{0}};
    }
  }
}

asio::awaitable<error_code> send_data(StreamState& s, std::span<const std::uint8_t> bytes,
                                      bool end_stream) {
  if (s.closed || !s.core) co_return stream_error(s);
  if (!s.provider || s.local_ended || s.end_after_outbox || !s.outbox.empty()) {
    co_return make_error_code(Error::invalid_state);
  }
  s.outbox = bytes;
  s.end_after_outbox = end_stream;
  s.core->resume(s);
  while (!s.outbox.empty() || (end_stream && !s.local_ended)) {
    if (s.closed || !s.core) {
      s.outbox = {};
      co_return stream_error(s);
    }
    const bool woke = co_await s.writable.wait();
    if (!woke) {
      s.outbox = {};  // the caller's buffer may go away now; nghttp2 defers on the next call
      co_return error_code(asio::error::operation_aborted);
    }
  }
  co_return error_code{};
}

asio::awaitable<error_code> send_trailers(StreamState& s, const Fields& fields) {
  if (s.closed || !s.core) co_return stream_error(s);
  if (!s.provider || s.local_ended || s.end_after_outbox || !s.outbox.empty()) {
    co_return make_error_code(Error::invalid_state);
  }
  s.out_trailers = sendable_fields(fields);
  s.has_out_trailers = true;
  s.end_after_outbox = true;
  s.core->resume(s);
  while (!s.local_ended) {
    if (s.closed || !s.core) co_return stream_error(s);
    const bool woke = co_await s.writable.wait();
    if (!woke) co_return error_code(asio::error::operation_aborted);
  }
  co_return error_code{};
}

asio::awaitable<error_code> read_response_head(StreamState& s,
                                               std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (s.head_complete) co_return error_code{};
    if (s.closed) co_return stream_error(s);
    const Signal::Woke woke = co_await s.readable.wait_until(deadline);
    if (woke == Signal::Woke::cancelled) co_return error_code(asio::error::operation_aborted);
    if (woke == Signal::Woke::deadline) co_return error_code(asio::error::timed_out);
  }
}

}  // namespace sandgate::h2::detail
