#include "proxy/watchdog.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

using namespace std::chrono_literals;

// Runs the io_context until `done` or a generous cap (the cap only ends a broken test).
template <class Pred>
void run_until(boost::asio::io_context& io, Pred done) {
  const auto cap = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < cap) {
    io.restart();  // run_for stops the context once it runs out of work
    io.run_for(5ms);
  }
}

// Lets time pass on the io_context (for "nothing happens" checks).
void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

TEST(Watchdog, FiresOnceTheDeadlinePasses) {
  boost::asio::io_context io;
  auto w = std::make_shared<Watchdog>(io.get_executor());
  int fired = 0;
  w->start([&] { ++fired; });
  w->arm(10ms);
  run_until(io, [&] { return fired > 0; });
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(w->expired());
  run_for(io, 30ms);
  EXPECT_EQ(fired, 1);  // not again without a new deadline
  w->stop();
}

// The hardening issue's lost deadline: after it fired, a new arm() must wait again, so what
// the session does next is under a deadline too.
TEST(Watchdog, ArmingAfterItFiredWaitsForTheNewDeadline) {
  boost::asio::io_context io;
  auto w = std::make_shared<Watchdog>(io.get_executor());
  int fired = 0;
  w->start([&] { ++fired; });
  w->arm(5ms);
  run_until(io, [&] { return fired == 1; });
  ASSERT_EQ(fired, 1);
  w->arm(10ms);
  run_until(io, [&] { return fired == 2; });
  EXPECT_EQ(fired, 2);
  w->stop();
}

TEST(Watchdog, PushingTheDeadlineForwardPostponesIt) {
  boost::asio::io_context io;
  auto w = std::make_shared<Watchdog>(io.get_executor());
  int fired = 0;
  w->start([&] { ++fired; });
  w->arm(1h);
  run_for(io, 20ms);
  EXPECT_EQ(fired, 0);
  w->arm(5ms);  // earlier than before: wakes the waiter early
  run_until(io, [&] { return fired == 1; });
  EXPECT_EQ(fired, 1);
  w->stop();
}

TEST(Watchdog, StopCancelsIt) {
  boost::asio::io_context io;
  auto w = std::make_shared<Watchdog>(io.get_executor());
  int fired = 0;
  w->start([&] { ++fired; });
  w->arm(5ms);
  w->stop();
  w->arm(5ms);
  run_for(io, 30ms);
  EXPECT_EQ(fired, 0);
  EXPECT_FALSE(w->expired());
}

}  // namespace
}  // namespace sandgate::proxy
