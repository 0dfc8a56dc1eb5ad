#include "http/body_tracker.hpp"

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

namespace sandgate::http {

namespace beast_http = boost::beast::http;

BodyTracker::BodyTracker(RequestHead& head)
    : parser_(std::make_unique<Parser>(std::move(*head.parser))) {
  parser_->eager(true);
}

Result<std::size_t> BodyTracker::feed(std::string_view data) {
  std::array<char, 4096> scratch;  // where decoded body bytes land, to be dropped
  std::size_t used = 0;
  while (used < data.size() && !parser_->is_done()) {
    auto& body = parser_->get().body();
    body.data = scratch.data();
    body.size = scratch.size();
    boost::system::error_code ec;
    const std::size_t n =
        parser_->put(boost::asio::buffer(data.data() + used, data.size() - used), ec);
    used += n;
    if (ec == beast_http::error::need_buffer) continue;  // the scratch buffer is full
    if (ec == beast_http::error::need_more) break;       // a chunk header is cut off
    if (ec) return make_error_code(Errc::malformed_request);
    if (n == 0) break;
  }
  return used;
}

}  // namespace sandgate::http
