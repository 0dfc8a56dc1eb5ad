#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cerrno>
#include <cstddef>
#include <type_traits>

namespace sandgate::proxy {

// Writing without a round through the event loop.
//
// Asio completes an asynchronous write that the socket takes at once by posting its handler:
// the coroutine waits for the next turn of the loop, and that turn polls epoll (epoll_wait
// with no timeout) because a handler is queued. A small message on a socket with room, which
// is most of what the proxy writes (a request head upstream, a response to the client, a
// CONNECT's 200), costs a post, a handler and a system call more than the send itself.
// send_now() tries the send first; only what it leaves goes through asio::async_write.

// Sends what `socket` takes of `buffers` (up to their first 8 pieces) at once: one sendmsg(2)
// with MSG_DONTWAIT (and MSG_NOSIGNAL: a closed peer is EPIPE, not a signal), and `flags`.
// Returns the bytes sent, 0 when the socket has no room; a failure other than that is set in
// `ec`.
template <class ConstBuffers>
std::size_t send_now(boost::asio::ip::tcp::socket& socket, const ConstBuffers& buffers,
                     boost::system::error_code& ec, int flags = 0) {
  std::array<iovec, 8> iov{};
  std::size_t count = 0;
  for (auto it = boost::asio::buffer_sequence_begin(buffers);
       it != boost::asio::buffer_sequence_end(buffers) && count < iov.size(); ++it) {
    const boost::asio::const_buffer piece(*it);
    if (piece.size() == 0) continue;
    iov[count++] = iovec{const_cast<void*>(piece.data()), piece.size()};
  }
  if (count == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = count;
  for (;;) {
    const ssize_t n = ::sendmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL | flags);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec.assign(errno, boost::asio::error::get_system_category());
    }
    return 0;
  }
}

// send_now() on a plain socket; a TLS stream (anything else) writes through Asio only.
template <class Stream, class ConstBuffers>
std::size_t send_now_if_plain(Stream& stream, const ConstBuffers& buffers,
                              boost::system::error_code& ec, int flags = 0) {
  if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
    return send_now(stream, buffers, ec, flags);
  } else {
    return 0;
  }
}

// Drops the first `n` bytes of a sequence of buffers held in an array (what send_now took).
template <std::size_t N>
void consume(std::array<boost::asio::const_buffer, N>& pieces, std::size_t n) {
  for (boost::asio::const_buffer& piece : pieces) {
    const std::size_t k = n < piece.size() ? n : piece.size();
    piece += k;
    n -= k;
  }
}

}  // namespace sandgate::proxy
