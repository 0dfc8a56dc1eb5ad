#pragma once

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <memory>
#include <string_view>

#include "common/errc.hpp"
#include "http/request_head.hpp"

namespace sandgate::http {

// Follows the body of one request through a byte stream, to find where it ends and the next
// request begins (a tunnel that watches every request head of a plain-text HTTP stream). The
// body is framed by Beast's parser, the one that read its head (Content-Length or chunked,
// trailers included); its bytes are counted and dropped, never kept.
class BodyTracker {
 public:
  // Takes head.parser, whose header is complete.
  explicit BodyTracker(RequestHead& head);

  // Reads body bytes from the front of `data`. Returns how many belong to the body: fewer than
  // data.size() when the body ends inside it, or when a chunk header is cut off (its bytes
  // are presented again with more). malformed_request for a body Beast refuses.
  Result<std::size_t> feed(std::string_view data);
  bool done() const { return parser_->is_done(); }

 private:
  using Parser =
      boost::beast::http::request_parser<boost::beast::http::buffer_body>;  // not movable
  std::unique_ptr<Parser> parser_;
};

}  // namespace sandgate::http
