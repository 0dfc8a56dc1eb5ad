#pragma once

#include <ares.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dns/server_address.hpp"

namespace sandgate::dns {

// One c-ares channel driven by an Asio executor, with no thread of its own: each socket c-ares
// opens is watched with stream_descriptor::async_wait (c-ares keeps owning and closing the fd),
// and its retransmit schedule with one steady_timer. Everything runs on the executor's thread.
// Held by shared_ptr so that handlers still queued after shutdown can tell it is gone.
class AresChannel : public std::enable_shared_from_this<AresChannel> {
 public:
  struct Config {
    std::vector<ServerAddress> servers;  // empty: the servers in /etc/resolv.conf
    std::chrono::milliseconds per_try_timeout{1000};
    int tries = 2;
  };
  // `status` is an ARES_* code; `reply` is the raw DNS message when status is ARES_SUCCESS,
  // ARES_ENOTFOUND (NXDOMAIN) or ARES_ENODATA (no answer), so a negative reply's SOA can be read.
  using Callback = std::function<void(int status, std::span<const unsigned char> reply)>;

  // Throws std::runtime_error when c-ares cannot start or rejects the servers.
  static std::shared_ptr<AresChannel> create(const boost::asio::any_io_executor& ex,
                                             const Config& config);
  ~AresChannel();
  AresChannel(const AresChannel&) = delete;
  AresChannel& operator=(const AresChannel&) = delete;

  // Sends one class-IN question without search domains or hosts file. `done` runs exactly once:
  // from a later handler, or synchronously from query() itself or from shutdown().
  void query(const std::string& name, int type, Callback done);
  // Destroys the c-ares channel; every pending `done` runs with ARES_EDESTRUCTION before this
  // returns. Later query() calls fail the same way at once. Idempotent.
  void shutdown();

 private:
  struct Private {};
  struct Watch;
  enum Direction { kRead = 0, kWrite = 1 };

 public:
  AresChannel(Private, const boost::asio::any_io_executor& ex);

 private:
  static void on_socket_state(void* data, ares_socket_t fd, int readable, int writable);
  static void on_query_done(void* arg, int status, int timeouts, unsigned char* abuf, int alen);
  void arm(const std::shared_ptr<Watch>& w, Direction dir);
  void on_ready(const std::shared_ptr<Watch>& w, Direction dir, bool ok);
  void close_watch(Watch& w);
  void reschedule_timer();
  void on_timer();

  boost::asio::any_io_executor ex_;
  ares_channel channel_ = nullptr;
  bool shutting_down_ = false;
  std::unordered_map<ares_socket_t, std::shared_ptr<Watch>> watches_;
  boost::asio::steady_timer timer_;
};

}  // namespace sandgate::dns
