#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sandgate::test {

// A UDP DNS server on 127.0.0.1 (kernel-chosen port) for DNS-rebinding tests: every A question,
// for any name, is answered with the next IPv4 address of `answers` (the last one repeats),
// with TTL 0; every other question gets an empty NOERROR. So the first lookup of a name can see
// a public address and the next one a private address. Thread-safe.
class SequenceDnsServer {
 public:
  explicit SequenceDnsServer(std::vector<std::string> answers);
  ~SequenceDnsServer();
  SequenceDnsServer(const SequenceDnsServer&) = delete;
  SequenceDnsServer& operator=(const SequenceDnsServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::size_t a_queries() const;

 private:
  void run();

  std::vector<std::string> answers_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::size_t a_queries_ = 0;
  std::thread thread_;
};

// A bound UDP socket on 127.0.0.1 that reads nothing and answers nothing: a DNS server that
// never replies.
class SilentUdpSocket {
 public:
  SilentUdpSocket();
  ~SilentUdpSocket();
  SilentUdpSocket(const SilentUdpSocket&) = delete;
  SilentUdpSocket& operator=(const SilentUdpSocket&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A TCP port on 127.0.0.1 that nothing listens on (bound once, then closed).
std::uint16_t closed_tcp_port();

}  // namespace sandgate::test
