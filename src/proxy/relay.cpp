#include "proxy/relay.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <memory>
#include <vector>

#include "proxy/handler_memory.hpp"
#include "proxy/send_now.hpp"

namespace sandgate::proxy {

namespace {

constexpr std::size_t kSpliceChunk = 1 << 20;
constexpr std::size_t kBulkPipeBytes = 1 << 20;
constexpr int kRoundsPerTurn = 16;                  // splices before other sessions get a turn
constexpr std::size_t kCopyBytes = 16 * 1024;       // below this a transfer is copied, not spliced
constexpr std::size_t kGateReadBytes = kCopyBytes;  // one read of a watched client
constexpr std::size_t kPipeMinBytes = 64 * 1024;    // what a new pipe holds (16 pages)

// A pipe used as splice(2)'s kernel buffer; closed when the direction ends.
class Pipe {
 public:
  Pipe() = default;
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() { close(); }
  bool open() {
    if (read_ >= 0) return true;
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
    read_ = fds[0];
    write_ = fds[1];
    return true;
  }
  void close() {
    if (read_ >= 0) ::close(read_);
    if (write_ >= 0) ::close(write_);
    read_ = write_ = -1;
  }
  bool is_open() const { return read_ >= 0; }
  int read_end() const { return read_; }
  int write_end() const { return write_; }

 private:
  int read_ = -1;
  int write_ = -1;
};

bool would_block() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// Both directions of one tunnel. Every callback runs on the session's worker and holds a
// reference, so the relay lives until the last one has run (or the worker's io_context has
// destroyed it). `done` is posted only once neither direction has an operation pending.
class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(tcp::socket& client, tcp::socket& upstream, Watchdog& watchdog,
        std::chrono::milliseconds idle, std::vector<std::uint8_t> initial, TunnelGate* gate,
        RelayDone done)
      : up_{&client, &upstream},
        down_{&upstream, &client},
        watchdog_(watchdog),
        idle_(idle),
        gate_(gate),
        pending_(std::move(initial)),
        done_(std::move(done)) {}
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void start() {
    // splice(2) and the reads below need both sockets non-blocking. The session and the dial
    // set that already (one ioctl each), so only a socket that came another way costs one.
    boost::system::error_code ignored;
    if (!up_.from->native_non_blocking()) up_.from->native_non_blocking(true, ignored);
    if (!down_.from->native_non_blocking()) down_.from->native_non_blocking(true, ignored);
    saw_client_bytes(pending_.data(), pending_.size());
    wait_readable(down_);
    if (gate_ != nullptr) {
      run_gate();
    } else {
      forward(pending_.size());
    }
  }

 private:
  struct Direction {
    Direction(tcp::socket* f, tcp::socket* t) : from(f), to(t) {}
    tcp::socket* from;
    tcp::socket* to;
    Pipe pipe;
    std::size_t in_pipe = 0;  // in the pipe, not yet out
    std::size_t last_in = 0;  // bytes the last splice took in
    std::uint64_t bytes = 0;
    bool enlarged = false;  // the pipe was grown for bulk
    bool eof = false;       // ended by `from`'s FIN, read to the end
    bool done = false;
  };

  // The client's first bytes tell whether the tunnel carries TLS (a handshake record).
  void saw_client_bytes(const void* data, std::size_t size) {
    if (client_spoke_ || size == 0) return;
    client_spoke_ = true;
    tls_ = *static_cast<const std::uint8_t*>(data) == 0x16;
  }

  // Whether `d` copies its bytes through user space rather than splicing them: the bytes a
  // TLS client receives. Spliced pages reach the client's socket long after the origin wrote
  // them, so the client's copy out of the kernel (before it decrypts) runs on cold memory: a
  // curl through the splice path spent ~1.3x the kernel CPU per GiB of a direct connection,
  // through copies what it spends directly (bench/README.md, issue 13). Plain bytes, which a
  // client mostly just moves on, stay spliced: copying them cost the proxy ~5x the CPU.
  bool copies(const Direction& d) const { return tls_ && &d == &down_; }

  // The tunnel is ending (an error, a refusal, the watchdog): callbacks stop moving bytes.
  bool stopping() const { return stopping_ || watchdog_.expired(); }

  void stop_both() {
    stopping_ = true;
    boost::system::error_code ignored;
    up_.from->cancel(ignored);
    down_.from->cancel(ignored);
  }

  void finish(Direction& d) {
    d.done = true;
    d.pipe.close();
    if (up_.done && down_.done && done_) {
      asio::post(up_.from->get_executor(), [self = shared_from_this()] {
        const RelayDone done = std::move(self->done_);
        try {
          done(RelayStats{self->up_.bytes, self->down_.bytes, self->ended_,
                          self->client_send_shut_});
        } catch (...) {  // out of memory writing the audit line: the worker keeps serving
        }
      });
    }
  }

  // What ended the tunnel, when nothing did before.
  void note(telemetry::Ended why) {
    if (ended_ == telemetry::Ended::unset) ended_ = why;
  }

  // Direction `d` met an error on `socket` (a reset, a broken pipe): noted as that side's
  // reset (a break outweighs a close that came before it) and passed on to the other side as
  // one, then both directions stop.
  void fail_on(Direction& d, tcp::socket* socket) {
    using telemetry::Ended;
    if (!stopping() && (ended_ == Ended::unset || ended_ == Ended::client_close ||
                        ended_ == Ended::upstream_close)) {
      const bool client = socket == up_.from;
      ended_ = client ? Ended::client_reset : Ended::upstream_reset;
      tcp::socket& other = client ? *up_.to : *up_.from;
      boost::system::error_code ignored;
      other.set_option(asio::socket_base::linger(true, 0), ignored);
      other.close(ignored);
    }
    fail(d);
  }

  void fail(Direction& d) {
    stop_both();
    finish(d);
  }

  void eof(Direction& d) {  // half-close; the other direction goes on
    note(&d == &up_ ? telemetry::Ended::client_close : telemetry::Ended::upstream_close);
    d.eof = true;
    Direction& other = &d == &up_ ? down_ : up_;
    if (other.done && other.eof) {
      // Both sides have sent their FIN and the relay ends now: d.to's close, which follows
      // `done`, sends its FIN, with no receive queue left for it to reset. No shutdown(2).
      if (&d == &down_) client_send_shut_ = true;
      return finish(d);
    }
    boost::system::error_code ignored;
    d.to->shutdown(tcp::socket::shutdown_send, ignored);
    if (&d == &down_ && !ignored) client_send_shut_ = true;
    finish(d);
  }

  // --- the client's bytes while the gate watches them ---------------------------------------

  void run_gate() {
    saw_client_bytes(pending_.data(), pending_.size());
    const TunnelGate::Verdict v = gate_->check(pending_);
    switch (v.kind) {
      case TunnelGate::Verdict::Kind::hold:
        return wait_gated();
      case TunnelGate::Verdict::Kind::forward:
        if (v.bytes == 0) return wait_gated();
        return forward(std::min(v.bytes, pending_.size()));
      case TunnelGate::Verdict::Kind::pass:
        gate_ = nullptr;
        return forward(pending_.size());
      case TunnelGate::Verdict::Kind::refuse: {
        note(telemetry::Ended::refused);
        stopping_ = true;
        // Not into the middle of what upstream sent and the client has not taken yet.
        const std::string_view refusal = down_.in_pipe == 0 ? gate_->refusal() : "";
        asio::async_write(*up_.from, asio::buffer(refusal),
                          [this, self = shared_from_this()](boost::system::error_code,
                                                            std::size_t) { fail(up_); });
        return;
      }
    }
  }

  void wait_gated() {
    up_.from->async_wait(tcp::socket::wait_read,
                         exact_memory([this, self = shared_from_this()](
                                          boost::system::error_code ec) { on_gated_bytes(ec); }));
  }

  void on_gated_bytes(boost::system::error_code ec) {
    // Bytes the gate has not let go never go upstream, not even when the client leaves.
    if (ec || stopping()) return finish(up_);
    // Read on the stack, then append: growing pending_ first would zero 16 KiB per read.
    std::array<std::uint8_t, kGateReadBytes> buf;
    const ssize_t n = ::recv(up_.from->native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) pending_.insert(pending_.end(), buf.data(), buf.data() + n);
    if (n == 0) return eof(up_);
    if (n < 0 && !would_block()) return fail_on(up_, up_.from);
    if (n > 0) watchdog_.arm(idle_);
    run_gate();
  }

  // Sends the first `count` pending bytes upstream, then goes on watching (a gate) or relaying.
  void forward(std::size_t count) {
    if (stopping()) return finish(up_);
    boost::system::error_code send_ec;
    pending_sent_ += send_now(
        *up_.to, asio::buffer(pending_.data() + pending_sent_, count - pending_sent_), send_ec);
    if (send_ec) return fail_on(up_, up_.to);
    if (pending_sent_ < count) {
      up_.to->async_wait(tcp::socket::wait_write,
                         [this, self = shared_from_this(), count](boost::system::error_code ec) {
                           if (ec) return fail_on(up_, up_.to);
                           forward(count);
                         });
      return;
    }
    up_.bytes += count;
    pending_sent_ = 0;
    if (count > 0) watchdog_.arm(idle_);
    if (count == pending_.size()) {
      std::vector<std::uint8_t>().swap(pending_);  // an idle tunnel holds no buffer
    } else {
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
    }
    if (gate_ == nullptr) return wait_readable(up_);
    if (pending_.empty()) return wait_gated();
    run_gate();  // what is left may hold the next request head already
  }

  // --- moving bytes ------------------------------------------------------------------------

  // Small transfers are copied through a stack buffer (no pipe to create and close); the
  // first read that fills it, or a send that cannot take it all, switches the direction to
  // splice(2) through a pipe for good, except a direction that copies (copies()): it keeps
  // copying, and its pipe only holds what a full destination did not take yet.
  void wait_readable(Direction& d) {
    d.from->async_wait(tcp::socket::wait_read, exact_memory([this, self = shared_from_this(),
                                                             &d](boost::system::error_code ec) {
                         if (ec || stopping()) return finish(d);
                         if (d.pipe.is_open() && !copies(d)) return pump(d);
                         copy(d);
                       }));
  }

  void wait_writable(Direction& d) {
    d.to->async_wait(tcp::socket::wait_write,
                     [this, self = shared_from_this(), &d](boost::system::error_code ec) {
                       if (ec || stopping()) return finish(d);
                       pump(d);
                     });
  }

  void copy(Direction& d) {
    std::array<char, kCopyBytes> buf;
    for (int round = 0; round < kRoundsPerTurn; ++round) {
      const ssize_t n = ::recv(d.from->native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n == 0) return eof(d);
      if (n < 0) return would_block() ? wait_readable(d) : fail_on(d, d.from);
      watchdog_.arm(idle_);
      const auto got = static_cast<std::size_t>(n);
      if (&d == &up_) saw_client_bytes(buf.data(), got);
      boost::system::error_code ec;
      const std::size_t sent = send_now(*d.to, asio::buffer(buf.data(), got), ec);
      if (ec) return fail_on(d, d.to);
      d.bytes += sent;
      if (sent == got && got < buf.size()) return wait_readable(d);
      if (sent == got && copies(d)) continue;  // a full buffer went out: read on
      // Bulk, or the destination is full: through a pipe, which first takes what is left
      // over (an empty pipe holds at least 64 KiB, more than the buffer). A direction that
      // copies uses it only for that, and copies again once it is empty; the others splice
      // from now on.
      if (!d.pipe.open()) return fail(d);
      if (sent < got) {
        if (::write(d.pipe.write_end(), buf.data() + sent, got - sent) !=
            static_cast<ssize_t>(got - sent)) {
          return fail(d);
        }
        d.in_pipe = got - sent;
      }
      return pump(d);
    }
    asio::post(d.from->get_executor(), [this, self = shared_from_this(), &d] {
      if (stopping()) return finish(d);
      copy(d);
    });
  }

  // Splices until a socket would block, then waits for it. After kRoundsPerTurn splices the
  // rest is posted, so one busy tunnel cannot starve the worker's other sessions.
  void pump(Direction& d) {
    const int in = d.from->native_handle();
    const int out = d.to->native_handle();
    for (int round = 0; round < kRoundsPerTurn; ++round) {
      if (d.in_pipe > 0) {
        const ssize_t m = ::splice(d.pipe.read_end(), nullptr, out, nullptr, d.in_pipe,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (m < 0 && would_block()) return wait_writable(d);
        if (m <= 0) return fail_on(d, d.to);
        d.in_pipe -= static_cast<std::size_t>(m);
        d.bytes += static_cast<std::uint64_t>(m);
        if (d.in_pipe > 0) continue;
        if (copies(d)) return copy(d);
        // Less than an empty pipe holds came in: the socket was drained, so wait rather than
        // spend a splice on EAGAIN (data that came since makes the wait complete at once).
        if (d.last_in < kPipeMinBytes) return wait_readable(d);
        continue;
      }
      const ssize_t n = ::splice(in, nullptr, d.pipe.write_end(), nullptr, kSpliceChunk,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n == 0) return eof(d);
      if (n < 0) return would_block() ? wait_readable(d) : fail_on(d, d.from);
      d.in_pipe = d.last_in = static_cast<std::size_t>(n);
      watchdog_.arm(idle_);
      if (!d.enlarged && d.last_in >= kPipeMinBytes) {
        // The pipe ran full: a bulk transfer, which a larger pipe moves in fewer splices.
        // Only now, because pipe pages count against a per-user limit; failure just keeps
        // the default size.
        d.enlarged = true;
        ::fcntl(d.pipe.write_end(), F_SETPIPE_SZ, static_cast<int>(kBulkPipeBytes));
      }
    }
    asio::post(d.from->get_executor(), [this, self = shared_from_this(), &d] {
      if (stopping()) return finish(d);
      pump(d);
    });
  }

  Direction up_;    // client -> upstream
  Direction down_;  // upstream -> client
  Watchdog& watchdog_;
  std::chrono::milliseconds idle_;
  TunnelGate* gate_;
  bool client_spoke_ = false;          // the client's first bytes were seen
  bool tls_ = false;                   // ... and began a TLS record
  std::vector<std::uint8_t> pending_;  // client bytes not yet upstream (`initial`, gated bytes)
  std::size_t pending_sent_ = 0;       // of those being forwarded, sent so far
  bool stopping_ = false;
  bool client_send_shut_ = false;                     // RelayStats::client_send_shut
  telemetry::Ended ended_ = telemetry::Ended::unset;  // the first thing that ended it
  RelayDone done_;
};

}  // namespace

void start_relay(tcp::socket& client, tcp::socket& upstream, Watchdog& watchdog,
                 std::chrono::milliseconds idle, std::vector<std::uint8_t> initial,
                 TunnelGate* gate, RelayDone done) {
  watchdog.arm(idle);
  std::make_shared<Relay>(client, upstream, watchdog, idle, std::move(initial), gate,
                          std::move(done))
      ->start();
}

}  // namespace sandgate::proxy
