#include "proxy/relay.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>

namespace sandgate::proxy {

namespace {

using namespace boost::asio::experimental::awaitable_operators;
constexpr std::size_t kSpliceChunk = 1 << 20;
constexpr std::uint64_t kEnlargeAfter = 1 << 20;  // bytes moved before the pipe grows
constexpr std::size_t kBulkPipeBytes = 1 << 20;

// A pipe used as splice(2)'s kernel buffer; closed when the direction ends.
class Pipe {
 public:
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    if (read_ >= 0) ::close(read_);
    if (write_ >= 0) ::close(write_);
  }
  bool open() {
    if (read_ >= 0) return true;
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
    read_ = fds[0];
    write_ = fds[1];
    return true;
  }
  bool is_open() const { return read_ >= 0; }
  int read_end() const { return read_; }
  int write_end() const { return write_; }

 private:
  int read_ = -1;
  int write_ = -1;
};

void cancel_both(tcp::socket& a, tcp::socket& b) {
  boost::system::error_code ignored;
  a.cancel(ignored);
  b.cancel(ignored);
}

}  // namespace

asio::awaitable<void> relay_one_way(tcp::socket& from, tcp::socket& to, std::uint64_t& counter,
                                    Watchdog& watchdog, std::chrono::milliseconds idle) {
  Pipe pipe;
  bool pipe_enlarged = false;
  const int in = from.native_handle();
  const int out = to.native_handle();
  boost::system::error_code ec;
  from.native_non_blocking(true, ec);
  to.native_non_blocking(true, ec);

  // Wait before the first splice (an idle direction holds no pipe); after data has moved,
  // splice first and wait only when the socket runs dry.
  bool wait_first = true;
  for (;;) {
    if (wait_first) {
      auto [wait_ec] = co_await from.async_wait(tcp::socket::wait_read, use_tuple);
      if (wait_ec || watchdog.expired()) break;
      if (!pipe.is_open()) {
        // A direction that only ever sees EOF needs no pipe.
        char byte;
        if (::recv(in, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
          to.shutdown(tcp::socket::shutdown_send, ec);
          co_return;
        }
      }
    }
    if (!pipe.open()) break;
    const ssize_t n = ::splice(in, nullptr, pipe.write_end(), nullptr, kSpliceChunk,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n == 0) {  // EOF: half-close and let the other direction finish
      to.shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) {
        wait_first = true;
        continue;
      }
      break;  // reset or other error
    }
    std::size_t pending = static_cast<std::size_t>(n);
    while (pending > 0) {
      const ssize_t m = ::splice(pipe.read_end(), nullptr, out, nullptr, pending,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (m > 0) {
        pending -= static_cast<std::size_t>(m);
        continue;
      }
      if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
        auto [wec] = co_await to.async_wait(tcp::socket::wait_write, use_tuple);
        if (wec) break;
        continue;
      }
      break;
    }
    if (pending > 0) break;
    counter += static_cast<std::uint64_t>(n);
    watchdog.arm(idle);
    wait_first = false;
    if (!pipe_enlarged && counter >= kEnlargeAfter) {
      // Bulk transfer: a larger pipe moves more per splice. Only now, because pipe pages
      // count against a per-user limit; failure just keeps the default size.
      pipe_enlarged = true;
      ::fcntl(pipe.write_end(), F_SETPIPE_SZ, static_cast<int>(kBulkPipeBytes));
    }
  }
  cancel_both(from, to);
}

asio::awaitable<RelayStats> relay_both(tcp::socket& client, tcp::socket& upstream,
                                       Watchdog& watchdog, std::chrono::milliseconds idle) {
  RelayStats stats;
  watchdog.arm(idle);
  co_await (relay_one_way(client, upstream, stats.up, watchdog, idle) &&
            relay_one_way(upstream, client, stats.down, watchdog, idle));
  co_return stats;
}

}  // namespace sandgate::proxy
