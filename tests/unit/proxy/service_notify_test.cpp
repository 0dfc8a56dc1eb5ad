#include "proxy/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace sandgate::proxy::service {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

// A worker event loop on its own thread, as the daemon's are.
struct WorkerLoop {
  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  std::thread thread{[this] { ioc.run(); }};
  ~WorkerLoop() {
    work.reset();
    ioc.stop();
    thread.join();
  }
};

// Runs the main io_context for d.
void run_for(asio::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

TEST(WorkerHeartbeat, PingsEveryRoundWhileEveryWorkerAnswers) {
  asio::io_context main{1};
  WorkerLoop a, b;
  int pings = 0, stalls = 0;
  WorkerHeartbeat hb(
      main, {&a.ioc, &b.ioc}, 50ms, [&] { ++pings; }, [&](std::size_t) { ++stalls; });
  hb.start();
  run_for(main, 600ms);
  EXPECT_GE(pings, 6);  // ~12 rounds; a loaded machine gets a margin
  EXPECT_EQ(stalls, 0);
}

TEST(WorkerHeartbeat, AStuckWorkerStopsThePingsUntilItAnswersAgain) {
  asio::io_context main{1};
  WorkerLoop a, b;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> blocked{false};
  // Worker b is stuck in one handler (as a blocking call would hold it).
  asio::post(b.ioc, [&, released] {
    blocked = true;
    released.wait();
  });
  while (!blocked) std::this_thread::sleep_for(1ms);

  int pings = 0, recoveries = 0;
  std::vector<std::size_t> stalls;
  WorkerHeartbeat hb(
      main, {&a.ioc, &b.ioc}, 25ms, [&] { ++pings; },
      [&](std::size_t worker) { stalls.push_back(worker); }, [&] { ++recoveries; });
  hb.start();
  run_for(main, 150ms);
  EXPECT_EQ(pings, 1);           // the first round owes nothing; none after it
  ASSERT_EQ(stalls.size(), 1u);  // reported once per stall, not every round
  EXPECT_EQ(recoveries, 0);
  EXPECT_EQ(stalls[0], 1u);

  release.set_value();
  run_for(main, 300ms);
  EXPECT_GE(pings, 4);  // it answers again: the pings resume
  EXPECT_EQ(stalls.size(), 1u);
  EXPECT_EQ(recoveries, 1);
}

TEST(WorkerHeartbeat, StopEndsTheRounds) {
  asio::io_context main{1};
  WorkerLoop a;
  int pings = 0;
  WorkerHeartbeat hb(
      main, {&a.ioc}, 5ms, [&] { ++pings; }, [](std::size_t) {});
  hb.start();
  run_for(main, 50ms);
  hb.stop();
  const int before = pings;
  run_for(main, 50ms);
  EXPECT_EQ(pings, before);
}

// The datagrams the notify calls send, to a socket of the test's own in NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_ = "/tmp/sandgate-notify-unit-" + std::to_string(::getpid());
    ::unlink(path_.c_str());
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "bind " << path_;
    }
    timeval tv{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  std::string next() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
  std::string path_;
};

TEST(ServiceNotify, SendsTheProtocolsAssignments) {
  NotifySocket sock;
  notify_ready("serving 2 sandboxes");
  EXPECT_EQ(sock.next(), "READY=1\nSTATUS=serving 2 sandboxes");
  notify_stopping("stopping");
  EXPECT_EQ(sock.next(), "STOPPING=1\nSTATUS=stopping");
  notify_status("two\nlines");  // one STATUS line: a newline would start another assignment
  EXPECT_EQ(sock.next(), "STATUS=two lines");
  notify_watchdog();
  EXPECT_EQ(sock.next(), "WATCHDOG=1");
}

TEST(ServiceNotify, ReloadingCarriesTheMonotonicClock) {
  NotifySocket sock;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long before = ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
  notify_reloading();
  const std::string m = sock.next();
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long after = ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
  ASSERT_TRUE(m.starts_with("RELOADING=1\nMONOTONIC_USEC=")) << m;
  const long long usec = std::stoll(m.substr(m.find('=', 12) + 1));
  EXPECT_GE(usec, before);
  EXPECT_LE(usec, after);
}

TEST(ServiceNotify, NoSocketIsANoOp) {
  ::unsetenv("NOTIFY_SOCKET");
  notify_ready("nobody listens");  // must neither fail nor block
  SUCCEED();
}

TEST(ServiceNotify, WatchdogTimeoutFollowsTheEnvironment) {
  ::unsetenv("WATCHDOG_PID");
  ::unsetenv("WATCHDOG_USEC");
  EXPECT_FALSE(watchdog_timeout());
  ::setenv("WATCHDOG_USEC", "3000000", 1);
  EXPECT_EQ(watchdog_timeout(), std::chrono::microseconds(3000000));
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  EXPECT_EQ(watchdog_timeout(), std::chrono::microseconds(3000000));
  ::setenv("WATCHDOG_PID", "1", 1);  // meant for another process
  EXPECT_FALSE(watchdog_timeout());
  ::unsetenv("WATCHDOG_PID");
  ::unsetenv("WATCHDOG_USEC");
}

}  // namespace
}  // namespace sandgate::proxy::service
