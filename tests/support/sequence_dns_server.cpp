#include "support/sequence_dns_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace sandgate::test {

namespace {

int bind_loopback(int type, std::uint16_t& port) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot bind a loopback socket");
  }
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

SequenceDnsServer::SequenceDnsServer(std::vector<std::string> answers)
    : answers_(std::move(answers)) {
  if (answers_.empty()) throw std::invalid_argument("SequenceDnsServer needs an answer");
  fd_ = bind_loopback(SOCK_DGRAM, port_);
  thread_ = std::thread([this] { run(); });
}

SequenceDnsServer::~SequenceDnsServer() {
  stopping_ = true;
  thread_.join();
  ::close(fd_);
}

std::size_t SequenceDnsServer::a_queries() const {
  const std::lock_guard lock(mutex_);
  return a_queries_;
}

void SequenceDnsServer::run() {
  std::uint8_t q[1500];
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    const ssize_t n =
        ::recvfrom(fd_, q, sizeof q, 0, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    if (n < 12) continue;
    // The question: QNAME labels, then QTYPE and QCLASS.
    std::size_t pos = 12;
    while (pos < static_cast<std::size_t>(n) && q[pos] != 0) pos += q[pos] + 1u;
    if (pos + 5 > static_cast<std::size_t>(n)) continue;
    const std::size_t question_end = pos + 5;
    const std::uint16_t qtype = static_cast<std::uint16_t>(q[pos + 1] << 8 | q[pos + 2]);

    std::vector<std::uint8_t> r(q, q + question_end);
    r[2] = static_cast<std::uint8_t>(0x80 | (q[2] & 0x01));  // QR, opcode 0, RD copied
    r[3] = 0x80;                                             // RA, rcode 0
    r[4] = 0;
    r[5] = 1;  // one question
    r[6] = r[7] = r[8] = r[9] = r[10] = r[11] = 0;
    if (qtype == 1) {
      std::string ip;
      {
        const std::lock_guard lock(mutex_);
        ip = answers_[std::min(a_queries_, answers_.size() - 1)];
        ++a_queries_;
      }
      in_addr a{};
      ::inet_pton(AF_INET, ip.c_str(), &a);
      const auto* b = reinterpret_cast<const std::uint8_t*>(&a.s_addr);
      r[7] = 1;  // one answer
      const std::uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, b[0], b[1], b[2], b[3]};
      r.insert(r.end(), std::begin(rr), std::end(rr));
    }
    ::sendto(fd_, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&peer), peer_len);
  }
}

SilentUdpSocket::SilentUdpSocket() {
  fd_ = bind_loopback(SOCK_DGRAM, port_);
}

SilentUdpSocket::~SilentUdpSocket() {
  ::close(fd_);
}

std::uint16_t closed_tcp_port() {
  std::uint16_t port = 0;
  const int fd = bind_loopback(SOCK_STREAM, port);
  ::close(fd);
  return port;
}

}  // namespace sandgate::test
