#pragma once

// nghttp2's session callbacks for Core (callbacks.cpp). Internal to src/h2.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "h2/h2.hpp"

namespace sandgate::h2::detail {

// A friend of Core: the callbacks reach its stream table and counters.
struct Callbacks {
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user);
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame*, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame*, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t flags, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame*, void* user);
  static int on_data_chunk_recv(nghttp2_session*, std::uint8_t flags, std::int32_t stream_id,
                                const std::uint8_t* data, std::size_t len, void* user);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame*, void* user);
  static int on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame*, int lib_error_code,
                                   void* user);
  static int on_stream_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                             void* user);
  // The data provider of every stream we send a body on: source->ptr is its StreamState.
  static ssize_t read_data(nghttp2_session*, std::int32_t stream_id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* data_flags,
                           nghttp2_data_source* source, void* user);
};

// Header fields as nghttp2 takes them; they point into `fields`, which must outlive the call
// that submits them (nghttp2 copies them there).
std::vector<nghttp2_nv> to_nva(const Fields& fields);
nghttp2_nv make_nv(std::string_view name, std::string_view value);
// Appends to `nva` what of `fields` may go out (sendable_fields' rule), a field whose name is
// already lowercase (nearly all) without a copy; the others lowercased into `lowered`, which
// must outlive the submission.
void add_sendable_nv(std::vector<nghttp2_nv>& nva, const Fields& fields,
                     std::vector<std::string>& lowered);

}  // namespace sandgate::h2::detail
