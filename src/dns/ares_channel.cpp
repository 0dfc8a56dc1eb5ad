#include "dns/ares_channel.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <array>
#include <boost/asio/post.hpp>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace sandgate::dns {

namespace asio = boost::asio;

namespace {

constexpr int kClassIn = 1;

// Asio's epoll reactor is edge-triggered and does not remember an edge that arrived while no
// wait was queued, so before queueing one we ask the kernel whether the fd is ready already.
bool ready_now(ares_socket_t fd, bool write) {
  pollfd p{};
  p.fd = fd;
  p.events = write ? POLLOUT : POLLIN;
  return ::poll(&p, 1, 0) > 0 && (p.revents & (p.events | POLLERR | POLLHUP)) != 0;
}

std::runtime_error ares_failure(const char* what, int status) {
  return std::runtime_error(std::string("dns: ") + what + ": " + ares_strerror(status));
}

}  // namespace

// One socket c-ares opened. The descriptor only watches readiness: c-ares owns the fd, so it is
// released, never closed, by us.
struct AresChannel::Watch {
  Watch(const asio::any_io_executor& ex, ares_socket_t s) : descriptor(ex), fd(s) {}
  ~Watch() {
    if (descriptor.is_open()) descriptor.release();
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  asio::posix::stream_descriptor descriptor;
  ares_socket_t fd;
  std::array<bool, 2> want{};   // what c-ares last asked for
  std::array<bool, 2> armed{};  // a wait (or a posted "ready") is outstanding
  bool closed = false;          // c-ares closed the fd or the channel is gone
};

AresChannel::AresChannel(Private, const asio::any_io_executor& ex) : ex_(ex), timer_(ex) {}

std::shared_ptr<AresChannel> AresChannel::create(const asio::any_io_executor& ex,
                                                 const Config& config) {
  static const int library_status = ares_library_init(ARES_LIB_INIT_ALL);
  if (library_status != ARES_SUCCESS) throw ares_failure("ares_library_init", library_status);

  auto self = std::make_shared<AresChannel>(Private{}, ex);
  ares_options opts{};
  opts.timeout = static_cast<int>(config.per_try_timeout.count());  // ms with ARES_OPT_TIMEOUTMS
  opts.tries = config.tries;
  std::array<char, 2> dns_only{'b', '\0'};  // never the hosts file; c-ares copies the string
  opts.lookups = dns_only.data();
  opts.sock_state_cb = &AresChannel::on_socket_state;
  opts.sock_state_cb_data = self.get();  // the channel dies (shutdown) before *self does
  const int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB;
  if (const int rc = ares_init_options(&self->channel_, &opts, mask); rc != ARES_SUCCESS) {
    self->channel_ = nullptr;
    throw ares_failure("ares_init_options", rc);
  }

  if (!config.servers.empty()) {
    std::vector<ares_addr_port_node> nodes(config.servers.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const ServerAddress& server = config.servers[i];
      ares_addr_port_node& node = nodes[i];
      node.next = i + 1 < nodes.size() ? &nodes[i + 1] : nullptr;
      if (server.address.is_v4()) {
        node.family = AF_INET;
        node.addr.addr4.s_addr = htonl(server.address.v4_value());
      } else {
        node.family = AF_INET6;
        std::memcpy(&node.addr.addr6, server.address.bytes.data(), 16);
      }
      node.udp_port = server.port;
      node.tcp_port = server.port;
    }
    if (const int rc = ares_set_servers_ports(self->channel_, nodes.data()); rc != ARES_SUCCESS) {
      throw ares_failure("ares_set_servers_ports", rc);
    }
  }
  return self;
}

AresChannel::~AresChannel() {
  shutdown();
}

void AresChannel::query(const std::string& name, int type, Callback done) {
  if (channel_ == nullptr || shutting_down_) {
    done(ARES_EDESTRUCTION, {});
    return;
  }
  // Ownership passes to c-ares until on_query_done, which it calls exactly once.
  auto* arg = new Callback(std::move(done));
  ares_query(channel_, name.c_str(), kClassIn, type, &AresChannel::on_query_done, arg);
  reschedule_timer();
}

void AresChannel::shutdown() {
  if (channel_ == nullptr) return;
  shutting_down_ = true;
  ares_destroy(channel_);  // runs pending callbacks (ARES_EDESTRUCTION), reports sockets closed
  channel_ = nullptr;
  for (auto& [fd, watch] : watches_) close_watch(*watch);
  watches_.clear();
  timer_.cancel();
}

void AresChannel::on_query_done(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
                                int alen) {
  const std::unique_ptr<Callback> done(static_cast<Callback*>(arg));
  std::span<const unsigned char> reply;
  const bool has_reply =
      status == ARES_SUCCESS || status == ARES_ENOTFOUND || status == ARES_ENODATA;
  if (has_reply && abuf != nullptr && alen > 0) {
    reply = {abuf, static_cast<std::size_t>(alen)};
  }
  try {
    (*done)(status, reply);
  } catch (...) {
    // Nothing may unwind through c-ares. The lookup's own deadline still ends it.
  }
}

// Called by c-ares whenever it opens a socket, changes what it waits for, or closes one
// (readable == writable == 0, just before close).
void AresChannel::on_socket_state(void* data, ares_socket_t fd, int readable, int writable) {
  auto* self = static_cast<AresChannel*>(data);
  if (readable == 0 && writable == 0) {
    if (const auto it = self->watches_.find(fd); it != self->watches_.end()) {
      self->close_watch(*it->second);
      self->watches_.erase(it);
    }
    return;
  }
  try {
    std::shared_ptr<Watch>& w = self->watches_[fd];
    if (!w) {
      w = std::make_shared<Watch>(self->ex_, fd);
      boost::system::error_code ec;
      w->descriptor.assign(fd, ec);
      if (ec) w->closed = true;  // cannot watch it: its queries run into their timeouts
    }
    w->want = {readable != 0, writable != 0};
    self->arm(w, kRead);
    self->arm(w, kWrite);
  } catch (...) {
    // Out of memory inside a c-ares callback; as above, timeouts end the affected queries.
  }
}

void AresChannel::arm(const std::shared_ptr<Watch>& w, Direction dir) {
  if (w->closed || !w->want[dir] || w->armed[dir]) return;
  w->armed[dir] = true;
  std::weak_ptr<AresChannel> weak = weak_from_this();
  if (ready_now(w->fd, dir == kWrite)) {
    asio::post(ex_, [weak, w, dir] {
      if (const auto self = weak.lock()) self->on_ready(w, dir, true);
    });
    return;
  }
  w->descriptor.async_wait(dir == kRead ? asio::posix::stream_descriptor::wait_read
                                        : asio::posix::stream_descriptor::wait_write,
                           [weak, w, dir](const boost::system::error_code& ec) {
                             if (const auto self = weak.lock()) self->on_ready(w, dir, !ec);
                           });
}

void AresChannel::on_ready(const std::shared_ptr<Watch>& w, Direction dir, bool ok) {
  w->armed[dir] = false;
  if (w->closed || !ok || channel_ == nullptr) return;
  if (w->want[dir]) {
    ares_process_fd(channel_, dir == kRead ? w->fd : ARES_SOCKET_BAD,
                    dir == kWrite ? w->fd : ARES_SOCKET_BAD);
  }
  arm(w, dir);  // no-op if c-ares closed the socket meanwhile
  reschedule_timer();
}

void AresChannel::close_watch(Watch& w) {
  w.closed = true;
  if (w.descriptor.is_open()) w.descriptor.release();  // outstanding waits end as aborted
}

void AresChannel::reschedule_timer() {
  if (channel_ == nullptr) return;
  timeval tv{};
  const timeval* next = ares_timeout(channel_, nullptr, &tv);
  if (next == nullptr) {  // no queries pending
    timer_.cancel();
    return;
  }
  timer_.expires_after(std::chrono::seconds(next->tv_sec) +
                       std::chrono::microseconds(next->tv_usec));
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (const auto self = weak.lock()) self->on_timer();
  });
}

void AresChannel::on_timer() {
  if (channel_ == nullptr) return;
  ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // retransmits and timeouts
  reschedule_timer();
}

}  // namespace sandgate::dns
