// nghttp2's session callbacks: what arrives (heads, DATA, trailers, resets, GOAWAY) lands in
// the StreamState of its stream, and wakes whoever waits on it. Called inside
// nghttp2_session_mem_recv / mem_send only, on the connection's executor.
#include "h2/callbacks.hpp"

#include <algorithm>
#include <cstring>

#include "h2/core.hpp"

namespace sandgate::h2::detail {

namespace {

StreamState* state_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<StreamState*>(nghttp2_session_get_stream_user_data(session, id));
}

// RFC 9113 section 6.5.2: a field counts its name, its value and 32 octets.
constexpr std::size_t kFieldOverhead = 32;
// A head's fields are reserved this many at its first: most heads have fewer, and growing the
// vector one doubling at a time cost five allocations (with their moves) per head.
constexpr std::size_t kFieldsReserved = 12;

}  // namespace

int Callbacks::on_begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user) {
  auto& core = *static_cast<Core*>(user);
  if (core.role_ != Core::Role::server || hd->type != NGHTTP2_HEADERS || hd->stream_id <= 0 ||
      hd->stream_id % 2 == 0) {
    return 0;  // the rest (stream 0, our ids) nghttp2 refuses itself
  }
  // A HEADERS frame on a client stream id that was skipped (lower than one already used,
  // never opened): RFC 9113 section 5.1.1, a connection error PROTOCOL_ERROR, which receive()
  // sends for a callback failure. One nghttp2 still knows (open, or closed and remembered) it
  // judges itself; one it forgot is ignored, as nghttp2 does (see SkippedStreamIds).
  if (nghttp2_session_find_stream(session, hd->stream_id) == nullptr &&
      core.skipped_ids_.skipped(hd->stream_id)) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  core.skipped_ids_.opened(hd->stream_id);
  return 0;
}

int Callbacks::on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  auto& core = *static_cast<Core*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (core.role_ == Core::Role::server && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    auto s = std::make_shared<StreamState>(core, core.ex_);
    s->id = frame->hd.stream_id;
    s->request.fields.reserve(kFieldsReserved);
    nghttp2_session_set_stream_user_data(session, s->id, s.get());
    core.streams_.emplace(s->id, std::move(s));
    return 0;
  }
  StreamState* s = state_of(session, frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->header_bytes = 0;
  if (core.role_ == Core::Role::client && s->response.fields.empty()) {
    s->response.fields.reserve(kFieldsReserved);
  }
  return 0;
}

int Callbacks::on_header(nghttp2_session* session, const nghttp2_frame* frame,
                         const std::uint8_t* name, std::size_t namelen, const std::uint8_t* value,
                         std::size_t valuelen, std::uint8_t /*flags*/, void* user) {
  auto& core = *static_cast<Core*>(user);
  StreamState* s = state_of(session, frame->hd.stream_id);
  if (!s || frame->hd.type != NGHTTP2_HEADERS) return 0;
  s->header_bytes += namelen + valuelen + kFieldOverhead;
  if (s->header_bytes > core.settings_.max_header_list_bytes) {
    s->too_large = true;
    // A request head over the limit is answered 431 once it ends (the rest of the block is
    // still decoded by nghttp2, to keep HPACK in step, and dropped here); anything else
    // resets the stream now.
    if (core.role_ == Core::Role::server && !s->head_complete) return 0;
    s->failure = make_error_code(Error::header_too_large);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (s->too_large) return 0;
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (s->head_complete) {  // trailers (nghttp2 refuses pseudo-headers in them)
    s->trailers.push_back({std::string(n), std::string(v)});
    return 0;
  }
  if (core.role_ == Core::Role::server) {
    RequestHead& r = s->request;
    if (n == ":method") {
      r.method = v;
    } else if (n == ":scheme") {
      r.scheme = v;
    } else if (n == ":authority") {
      r.authority = v;
    } else if (n == ":path") {
      r.path = v;
    } else if (!n.starts_with(':')) {
      r.fields.push_back({std::string(n), std::string(v)});
    }
    return 0;
  }
  if (n == ":status") {
    int status = 0;
    for (char c : v) status = status * 10 + (c - '0');  // nghttp2 checked: three digits
    s->response.status = status;
  } else if (!n.starts_with(':')) {
    s->response.fields.push_back({std::string(n), std::string(v)});
  }
  return 0;
}

int Callbacks::on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  auto& core = *static_cast<Core*>(user);
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      core.empty_frames_ = 0;
      StreamState* s = state_of(session, frame->hd.stream_id);
      if (!s) return 0;
      const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
      if (!s->head_complete) {
        if (core.role_ == Core::Role::client && s->response.status / 100 == 1) {
          s->response = {};  // an interim response: skipped, the final one follows
          return 0;
        }
        s->head_complete = true;
        s->remote_ended = end;
        core.on_head_complete(*s);
      } else {
        s->remote_ended = true;  // trailers always end the stream (nghttp2 checks)
      }
      s->readable.notify();
      return 0;
    }
    case NGHTTP2_DATA:
      core.count_data_frame(*frame);
      if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
        if (StreamState* s = state_of(session, frame->hd.stream_id)) {
          s->remote_ended = true;
          s->readable.notify();
        }
      }
      return 0;
    case NGHTTP2_GOAWAY:
      core.goaway_received_ = true;
      core.goaway_last_id_ = static_cast<std::uint32_t>(frame->goaway.last_stream_id);
      core.slot_free_.notify();
      return 0;
    case NGHTTP2_SETTINGS:
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) core.remote_settings_ = true;
      core.slot_free_.notify();  // the peer's stream limit may have grown
      return 0;
    default:
      return 0;
  }
}

int Callbacks::on_data_chunk_recv(nghttp2_session* session, std::uint8_t /*flags*/,
                                  std::int32_t stream_id, const std::uint8_t* data, std::size_t len,
                                  void* /*user*/) {
  StreamState* s = state_of(session, stream_id);
  if (!s || s->discard) {
    // Nobody will read it: acknowledged at once so the connection window does not shrink.
    nghttp2_session_consume(session, stream_id, len);
    return 0;
  }
  // nghttp2 refuses DATA past the window we gave, so what is unread stays within
  // stream_window; the bytes already read are dropped once they are half the buffer, so it
  // holds at most twice that however the reader slices its reads.
  if (s->inbox_pos > 0 && s->inbox_pos >= s->inbox.size() / 2) {
    s->inbox.erase(s->inbox.begin(), s->inbox.begin() + static_cast<std::ptrdiff_t>(s->inbox_pos));
    s->inbox_pos = 0;
  }
  s->inbox.insert(s->inbox.end(), data, data + len);
  s->readable.notify();
  return 0;
}

int Callbacks::on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    static_cast<Core*>(user)->goaway_sent(frame->goaway.error_code);
    return 0;
  }
  // Server: once the response has ended, a request still being sent is not wanted any more
  // (RFC 9113 section 8.1: RST_STREAM with NO_ERROR).
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
    return 0;
  }
  StreamState* s = state_of(session, frame->hd.stream_id);
  if (!s || s->core == nullptr || s->core->role_ != Core::Role::server) return 0;
  if (nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  }
  return 0;
}

int Callbacks::on_invalid_frame_recv(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                     int lib_error_code, void* user) {
  auto& core = *static_cast<Core*>(user);
  // nghttp2 ends the connection (PROTOCOL_ERROR) for a request past our acknowledged
  // SETTINGS_MAX_CONCURRENT_STREAMS; the GOAWAY it sends is named after that.
  if (core.role_ == Core::Role::server && frame->hd.type == NGHTTP2_HEADERS &&
      lib_error_code == NGHTTP2_ERR_PROTO &&
      core.streams_.size() >= core.settings_.max_concurrent_streams) {
    core.pending_cause_ = "too_many_streams";
  }
  return 0;
}

int Callbacks::on_stream_close(nghttp2_session* session, std::int32_t stream_id,
                               std::uint32_t error_code, void* user) {
  auto& core = *static_cast<Core*>(user);
  auto it = core.streams_.find(stream_id);
  if (it == core.streams_.end()) {
    if (error_code != NGHTTP2_NO_ERROR) core.count_abnormal_end();
    return 0;
  }
  std::shared_ptr<StreamState> s = std::move(it->second);
  core.streams_.erase(it);
  nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
  s->closed = true;
  s->close_code = error_code;
  if (error_code != NGHTTP2_NO_ERROR) {
    // A reset stream's unread bytes will never be read: give their window back now.
    if (s->unread() > 0) nghttp2_session_consume_connection(session, s->unread());
    s->inbox.clear();
    s->inbox_pos = 0;
    if (!s->app_reset) core.count_abnormal_end();
  } else if (!s->remote_ended && !s->failure) {
    // Closed cleanly before the peer ended its side: our RST_STREAM(NO_ERROR) after a
    // complete response. What the peer did not send is not an error to the reader.
    s->remote_ended = true;
  }
  s->readable.notify();
  s->writable.notify();
  core.slot_free_.notify();
  return 0;
}

ssize_t Callbacks::read_data(nghttp2_session* session, std::int32_t stream_id, std::uint8_t* buf,
                             std::size_t length, std::uint32_t* data_flags,
                             nghttp2_data_source* source, void* /*user*/) {
  auto* s = static_cast<StreamState*>(source->ptr);
  const std::size_t n = std::min(length, s->outbox.size());
  if (n > 0) std::memcpy(buf, s->outbox.data(), n);
  s->outbox = s->outbox.subspan(n);
  if (!s->outbox.empty()) return static_cast<ssize_t>(n);
  s->writable.notify();
  if (s->end_after_outbox) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    s->local_ended = true;
    if (s->has_out_trailers) {
      *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      std::vector<nghttp2_nv> nva = to_nva(s->out_trailers);
      const int rv = nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size());
      if (rv != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

std::vector<nghttp2_nv> to_nva(const Fields& fields) {
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size());
  for (const Field& f : fields) nva.push_back(make_nv(f.name, f.value));
  return nva;
}

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  // nghttp2 copies names and values at submission (no NO_COPY flags), and only reads them.
  return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

void add_sendable_nv(std::vector<nghttp2_nv>& nva, const Fields& fields,
                     std::vector<std::string>& lowered) {
  for (const Field& f : fields) {
    if (!sendable(f.name, f.value)) continue;
    if (std::none_of(f.name.begin(), f.name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      nva.push_back(make_nv(f.name, f.value));
      continue;
    }
    // Reserved at the first name to lowercase (most heads have none), for all of them: never
    // reallocated after, so the views into it stay valid.
    if (lowered.capacity() == 0) lowered.reserve(fields.size());
    std::string& name = lowered.emplace_back(f.name);
    for (char& c : name) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    nva.push_back(make_nv(name, f.value));
  }
}

}  // namespace sandgate::h2::detail
