// idle_tunnels: the two ends of the idle-tunnel benchmark (bench/idle/run.py, issue 13 S4).
//
//   idle_tunnels origin --listen IP:PORT [--listen ...]
//     Accepts and holds TCP connections; echoes whatever arrives on one back on it.
//   idle_tunnels client --proxy IP:PORT --auth BASE64 --target HOST:PORT [--target ...]
//                       [--source IP ...] [--parallel 200] [--timeout-ms 20000]
//     Opens CONNECT tunnels through an explicit proxy and keeps them idle.
//
// Both are single-threaded (epoll, non-blocking) and take commands on stdin, one per line,
// answering each with one line on stdout, so the driver decides when the daemon is measured:
//   client: "open N"  open tunnels until N have been tried in all (at most --parallel waiting
//                     for their 200 at once) -> "opened tried= established= failed= ... "
//           "stats"   -> "stats established= dropped=": dropped counts tunnels on which
//                     anything arrived (data, FIN, reset) while they were idle
//           "echo"    send one byte on every idle tunnel, wait for it back -> "echo ok= failed="
//   origin: "stats"   -> "stats accepted= open= closed= accept_errors="
//   both:   "quit"    close everything and exit.
// State per tunnel is a few bytes (no buffers), so the tool itself holds 100,000 tunnels in a
// few MiB; the kernel's socket memory is what it costs.
//
// Source addresses (--source, round robin, IP_BIND_ADDRESS_NO_PORT so the port is chosen at
// connect(2) per destination) and targets (round robin) let one run exceed the ~64k
// ephemeral ports of one address pair.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

namespace {

constexpr std::uint64_t kStdinTag = ~std::uint64_t{0};
constexpr std::uint64_t kListenTag = std::uint64_t{1} << 62U;

std::uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000U +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1'000'000U;
}

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(2);
}

sockaddr_in parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (colon == std::string::npos ||
      inet_pton(AF_INET, text.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    std::fprintf(stderr, "idle_tunnels: bad IPv4 endpoint '%s'\n", text.c_str());
    std::exit(2);
  }
  sa.sin_port = htons(static_cast<std::uint16_t>(std::atoi(text.c_str() + colon + 1)));
  return sa;
}

// Reads stdin (non-blocking) and returns complete lines.
class Commands {
 public:
  std::vector<std::string> read() {
    std::vector<std::string> lines;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(0, buf, sizeof buf);
      if (n == 0) eof_ = true;
      if (n <= 0) break;
      pending_.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t pos = 0;
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n', pos)) {
      lines.push_back(pending_.substr(pos, nl - pos));
      pos = nl + 1;
    }
    pending_.erase(0, pos);
    if (eof_) lines.emplace_back("quit");
    return lines;
  }

 private:
  std::string pending_;
  bool eof_ = false;
};

void reply(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int make_epoll() {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  const int flags = fcntl(0, F_GETFL);
  fcntl(0, F_SETFL, flags | O_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kStdinTag;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) != 0) die("epoll_ctl stdin");
  return ep;
}

// ------------------------------------------------------------------------------ origin
int run_origin(const std::vector<std::string>& listens) {
  const int ep = make_epoll();
  std::vector<int> listeners;
  for (const std::string& text : listens) {
    const sockaddr_in sa = parse_endpoint(text);
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) die("bind");
    if (listen(fd, 65535) != 0) die("listen");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenTag | listeners.size();
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    listeners.push_back(fd);
  }
  std::uint64_t accepted = 0, open = 0, closed = 0, accept_errors = 0;
  Commands commands;
  reply("ready");
  std::vector<epoll_event> events(1024);
  char buf[4096];
  for (;;) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[static_cast<std::size_t>(i)].data.u64;
      if (tag == kStdinTag) {
        for (const std::string& line : commands.read()) {
          if (line == "quit") return 0;
          if (line == "stats") {
            reply("stats accepted=" + std::to_string(accepted) + " open=" + std::to_string(open) +
                  " closed=" + std::to_string(closed) +
                  " accept_errors=" + std::to_string(accept_errors));
          } else {
            reply("error unknown command");
          }
        }
      } else if ((tag & kListenTag) != 0) {
        const int lfd = listeners[static_cast<std::size_t>(tag & ~kListenTag)];
        for (;;) {
          const int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) ++accept_errors;
            break;
          }
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = static_cast<std::uint64_t>(fd);
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
          ++accepted;
          ++open;
        }
      } else {
        const int fd = static_cast<int>(tag);
        const ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r > 0) {
          if (send(fd, buf, static_cast<std::size_t>(r), MSG_NOSIGNAL) == r) continue;
        } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
          continue;
        }
        close(fd);  // EOF, error, or an echo that did not fit: this connection is done
        --open;
        ++closed;
      }
    }
  }
}

// ------------------------------------------------------------------------------ client
enum class State : std::uint8_t { free, connecting, waiting_200, idle, echo, dead };

struct Tunnel {
  int fd = -1;
  State state = State::free;
  std::uint8_t crlf = 0;       // how much of "\r\n\r\n" the head's end has matched so far
  std::uint16_t got = 0;       // bytes of the response head so far
  char status[12] = {};        // its first 12 bytes: "HTTP/1.1 200"
  std::uint32_t deadline = 0;  // ms since the client started
};

class Client {
 public:
  Client(sockaddr_in proxy, std::vector<in_addr> sources, std::vector<std::string> targets,
         std::string auth, std::size_t parallel, std::uint32_t timeout_ms)
      : proxy_(proxy),
        sources_(std::move(sources)),
        parallel_(parallel),
        timeout_ms_(timeout_ms),
        start_(now_ms()) {
    for (const std::string& t : targets) {
      requests_.push_back("CONNECT " + t + " HTTP/1.1\r\nHost: " + t +
                          "\r\nProxy-Authorization: Basic " + auth + "\r\n\r\n");
    }
  }

  int run() {
    ep_ = make_epoll();
    reply("ready");
    std::vector<epoll_event> events(1024);
    for (;;) {
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 100);
      for (int i = 0; i < n; ++i) {
        const epoll_event& ev = events[static_cast<std::size_t>(i)];
        if (ev.data.u64 == kStdinTag) {
          for (const std::string& line : commands_.read()) {
            if (!command(line)) return 0;
          }
        } else {
          on_event(ev.data.u64, ev.events);
        }
      }
      expire();
      fill();
      finish_phase();
    }
  }

 private:
  std::uint32_t now() const { return static_cast<std::uint32_t>(now_ms() - start_); }

  bool command(const std::string& line) {
    if (line == "quit") return false;
    if (line.rfind("open ", 0) == 0) {
      want_ = std::strtoull(line.c_str() + 5, nullptr, 10);
      if (want_ > tunnels_.size()) tunnels_.reserve(static_cast<std::size_t>(want_));
      phase_ = Phase::opening;
      phase_start_ = now_ms();
    } else if (line == "stats") {
      reply("stats established=" + std::to_string(established_) +
            " dropped=" + std::to_string(dropped_));
    } else if (line == "echo") {
      start_echo();
    } else {
      reply("error unknown command");
    }
    return true;
  }

  void fill() {
    if (phase_ != Phase::opening) return;
    while (tunnels_.size() < want_ && in_flight_ < parallel_) open_one();
  }

  void open_one() {
    const std::size_t index = tunnels_.size();
    tunnels_.emplace_back();
    Tunnel& t = tunnels_.back();
    t.deadline = now() + timeout_ms_;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(t, err_socket_);
    t.fd = fd;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!sources_.empty()) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_addr = sources_[index % sources_.size()];
      setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      if (bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0) {
        return fail(t, err_connect_);
      }
    }
    if (connect(fd, reinterpret_cast<const sockaddr*>(&proxy_), sizeof proxy_) != 0 &&
        errno != EINPROGRESS) {
      return fail(t, err_connect_);
    }
    t.state = State::connecting;
    ++in_flight_;
    watch(index, EPOLLOUT, EPOLL_CTL_ADD);
  }

  void watch(std::size_t index, std::uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = index;
    epoll_ctl(ep_, op, tunnels_[index].fd, &ev);
  }

  void fail(Tunnel& t, std::uint64_t& reason) {
    if (t.state == State::connecting || t.state == State::waiting_200) --in_flight_;
    if (t.fd >= 0) close(t.fd);
    t.fd = -1;
    t.state = State::dead;
    ++failed_;
    ++reason;
  }

  void on_event(std::uint64_t index, std::uint32_t events) {
    Tunnel& t = tunnels_[static_cast<std::size_t>(index)];
    switch (t.state) {
      case State::connecting: {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(t.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) return fail(t, err_connect_);
        const std::string& req = requests_[static_cast<std::size_t>(index) % requests_.size()];
        if (send(t.fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
          return fail(t, err_closed_);
        }
        t.state = State::waiting_200;
        watch(static_cast<std::size_t>(index), EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
        return;
      }
      case State::waiting_200:
        return read_head(t);
      case State::idle: {
        // Anything on an idle tunnel (bytes, FIN, reset) means the proxy ended it.
        close(t.fd);
        t.fd = -1;
        t.state = State::dead;
        --established_;
        ++dropped_;
        return;
      }
      case State::echo: {
        char byte = 0;
        const ssize_t r = recv(t.fd, &byte, 1, 0);
        if (r < 0 && errno == EAGAIN) return;
        --echo_pending_;
        if (r == 1 && byte == kEchoByte) {
          ++echo_ok_;
          t.state = State::idle;
          return;
        }
        ++echo_failed_;
        close(t.fd);
        t.fd = -1;
        t.state = State::dead;
        --established_;
        return;
      }
      default:
        return;
    }
  }

  void read_head(Tunnel& t) {
    char buf[2048];
    const ssize_t r = recv(t.fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EAGAIN) return;
    if (r <= 0) return fail(t, err_closed_);
    for (ssize_t i = 0; i < r; ++i) {
      if (t.crlf == 4) return fail(t, err_response_);  // bytes after the head: not idle
      const char c = buf[i];
      if (t.got < sizeof t.status) t.status[t.got] = c;
      ++t.got;
      const bool cr = (t.crlf % 2) == 0;
      t.crlf = static_cast<std::uint8_t>((cr ? c == '\r' : c == '\n') ? t.crlf + 1
                                                                      : (c == '\r' ? 1 : 0));
      if (t.got > 4096) return fail(t, err_response_);
    }
    if (t.crlf != 4) return;
    const std::string_view status(t.status, sizeof t.status);
    if (status.substr(0, 5) != "HTTP/" || status.substr(8, 4) != " 200") {
      return fail(t, err_status_);
    }
    t.state = State::idle;
    --in_flight_;
    ++established_;
  }

  void expire() {
    const std::uint32_t now_rel = now();
    if (phase_ == Phase::opening && in_flight_ > 0) {
      for (Tunnel& t : tunnels_) {
        if ((t.state == State::connecting || t.state == State::waiting_200) &&
            now_rel > t.deadline) {
          fail(t, err_timeout_);
        }
      }
    }
    if (phase_ == Phase::echoing && now_rel > echo_deadline_) {
      for (Tunnel& t : tunnels_) {
        if (t.state != State::echo) continue;
        close(t.fd);
        t.fd = -1;
        t.state = State::dead;
        --established_;
        ++echo_failed_;
        --echo_pending_;
      }
    }
  }

  void start_echo() {
    echo_ok_ = echo_failed_ = echo_pending_ = 0;
    for (Tunnel& t : tunnels_) {
      if (t.state != State::idle) continue;
      if (send(t.fd, &kEchoByte, 1, MSG_NOSIGNAL) != 1) {
        close(t.fd);
        t.fd = -1;
        t.state = State::dead;
        --established_;
        ++echo_failed_;
        continue;
      }
      t.state = State::echo;
      ++echo_pending_;
    }
    phase_ = Phase::echoing;
    phase_start_ = now_ms();
    echo_deadline_ = now() + timeout_ms_;
  }

  void finish_phase() {
    const double seconds = static_cast<double>(now_ms() - phase_start_) / 1000.0;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", seconds);
    if (phase_ == Phase::opening && tunnels_.size() >= want_ && in_flight_ == 0) {
      phase_ = Phase::none;
      reply("opened tried=" + std::to_string(tunnels_.size()) +
            " established=" + std::to_string(established_) + " failed=" + std::to_string(failed_) +
            " dropped=" + std::to_string(dropped_) + " err_socket=" + std::to_string(err_socket_) +
            " err_connect=" + std::to_string(err_connect_) + " err_closed=" +
            std::to_string(err_closed_) + " err_status=" + std::to_string(err_status_) +
            " err_response=" + std::to_string(err_response_) +
            " err_timeout=" + std::to_string(err_timeout_) + " seconds=" + secs);
    } else if (phase_ == Phase::echoing && echo_pending_ == 0) {
      phase_ = Phase::none;
      reply("echo ok=" + std::to_string(echo_ok_) + " failed=" + std::to_string(echo_failed_) +
            " established=" + std::to_string(established_) + " seconds=" + secs);
    }
  }

  enum class Phase : std::uint8_t { none, opening, echoing };
  // Not a token character: the tunnel's first-bytes check passes it at once as "other"
  // (a printable byte could start an HTTP request line and be held until the line ends).
  static constexpr char kEchoByte = '\x01';

  sockaddr_in proxy_;
  std::vector<in_addr> sources_;
  std::vector<std::string> requests_;
  std::size_t parallel_;
  std::uint32_t timeout_ms_;
  std::uint64_t start_;
  int ep_ = -1;
  Commands commands_;
  std::vector<Tunnel> tunnels_;
  Phase phase_ = Phase::none;
  std::uint64_t phase_start_ = 0;
  std::uint64_t want_ = 0;
  std::size_t in_flight_ = 0;
  std::uint64_t established_ = 0, failed_ = 0, dropped_ = 0;
  std::uint64_t err_socket_ = 0, err_connect_ = 0, err_closed_ = 0, err_status_ = 0,
                err_response_ = 0, err_timeout_ = 0;
  std::uint64_t echo_ok_ = 0, echo_failed_ = 0, echo_pending_ = 0;
  std::uint32_t echo_deadline_ = 0;
};

[[noreturn]] void usage() {
  std::fputs(
      "usage: idle_tunnels origin --listen IP:PORT [--listen ...]\n"
      "       idle_tunnels client --proxy IP:PORT --auth BASE64 --target HOST:PORT [--target ...]\n"
      "                           [--source IP ...] [--parallel 200] [--timeout-ms 20000]\n",
      stderr);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const std::string_view mode = argv[1];
  std::vector<std::string> listens, targets;
  std::vector<in_addr> sources;
  std::string proxy, auth;
  std::size_t parallel = 200;
  std::uint32_t timeout_ms = 20'000;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage();
    const std::string value = argv[++i];
    if (arg == "--listen") {
      listens.push_back(value);
    } else if (arg == "--target") {
      targets.push_back(value);
    } else if (arg == "--source") {
      in_addr a{};
      if (inet_pton(AF_INET, value.c_str(), &a) != 1) usage();
      sources.push_back(a);
    } else if (arg == "--proxy") {
      proxy = value;
    } else if (arg == "--auth") {
      auth = value;
    } else if (arg == "--parallel") {
      parallel = static_cast<std::size_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (arg == "--timeout-ms") {
      timeout_ms = static_cast<std::uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else {
      usage();
    }
  }
  if (mode == "origin") {
    if (listens.empty()) usage();
    return run_origin(listens);
  }
  if (mode != "client" || proxy.empty() || targets.empty() || parallel == 0) usage();
  Client client(parse_endpoint(proxy), std::move(sources), std::move(targets), std::move(auth),
                parallel, timeout_ms);
  return client.run();
}
