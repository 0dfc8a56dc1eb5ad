#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/system/error_code.hpp>

namespace sandgate::proxy {

// Reading an HTTP/1 message into a Beast parser in the caller's own coroutine.
//
// bhttp::async_read_some and async_read_header are composed operations: each call builds
// their layers, and one that completes without reading (the bytes were already buffered:
// a body that came with its head, most small responses) posts its completion, so the
// coroutine waits a turn of the event loop, which polls epoll first. These do what Beast's
// read_some_op does, with the same results and errors, and return at once when the buffer
// holds what the parser needs.

// Feeds `parser` what `buffer` holds, reading from `in` first when the buffer is empty or the
// parser needs more. As bhttp::async_read_some: returns after the parser took some bytes (or a
// read ended the message), with need_buffer when a buffer body is full, end_of_stream for an
// EOF before any byte, partial_message for one inside a message.
template <class Stream, class Parser>
boost::asio::awaitable<boost::system::error_code> read_some_into(Stream& in,
                                                                 boost::beast::flat_buffer& buffer,
                                                                 Parser& parser) {
  namespace bhttp = boost::beast::http;
  boost::system::error_code ec;
  for (;;) {
    if (buffer.size() > 0) {
      buffer.consume(parser.put(buffer.data(), ec));
      if (ec != bhttp::error::need_more) co_return ec;
      ec = {};
    }
    const std::size_t room = boost::beast::read_size(buffer, 65536);
    if (room == 0) co_return bhttp::error::buffer_overflow;
    auto [read_ec, n] = co_await in.async_read_some(
        buffer.prepare(room), boost::asio::as_tuple(boost::asio::use_awaitable));
    buffer.commit(n);
    if (read_ec == boost::asio::error::eof) {
      if (!parser.got_some()) co_return bhttp::error::end_of_stream;
      parser.put_eof(ec);  // ends an EOF-delimited body; partial_message inside a message
      co_return ec;
    }
    if (read_ec) co_return read_ec;
  }
}

// Reads until `parser` holds the whole head, as bhttp::async_read_header.
template <class Stream, class Parser>
boost::asio::awaitable<boost::system::error_code> read_header_into(
    Stream& in, boost::beast::flat_buffer& buffer, Parser& parser) {
  while (!parser.is_header_done()) {
    if (const auto ec = co_await read_some_into(in, buffer, parser)) co_return ec;
  }
  co_return boost::system::error_code{};
}

}  // namespace sandgate::proxy
