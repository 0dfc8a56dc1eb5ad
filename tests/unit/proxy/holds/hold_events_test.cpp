// HoldEvents, the readers of GET /holds/events, without sockets: a reader that stops reading
// is closed at kQueue events instead of holding them, a newcomer past kMaxSubscribers closes
// the oldest, the sandbox filter, and close_all. Readers run as coroutines on one io_context.
#include "proxy/holds/hold_events.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace sandgate::proxy {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

HoldEvent held(std::uint64_t number, const std::string& sandbox) {
  HoldEvent e;
  e.number = number;
  e.hold.id = number;
  e.hold.question.sandbox = sandbox;
  return e;
}

// What one read of `s` gives (an idle read times out at once).
HoldEvents::Batch read(asio::io_context& ioc, HoldEvents& events,
                       const std::shared_ptr<HoldEvents::Subscriber>& s) {
  auto batch = asio::co_spawn(ioc, events.next(s, 1ms), asio::use_future);
  ioc.restart();
  ioc.run();
  return batch.get();
}

TEST(HoldEvents, AReaderGetsItsSandboxsEventsInOrder) {
  asio::io_context ioc;
  HoldEvents events;
  const auto all = events.add(ioc.get_executor(), "", {held(1, "a")});
  const auto b = events.add(ioc.get_executor(), "b", {});
  events.publish(held(2, "a"));
  events.publish(held(3, "b"));
  const auto got = read(ioc, events, all);
  ASSERT_EQ(got.events.size(), 3u);
  EXPECT_EQ(got.events[0].number, 1u);
  EXPECT_EQ(got.events[2].number, 3u);
  EXPECT_TRUE(got.open);
  const auto theirs = read(ioc, events, b);
  ASSERT_EQ(theirs.events.size(), 1u);
  EXPECT_EQ(theirs.events[0].hold.question.sandbox, "b");
  // Nothing new: an idle read is empty and open (the stream then writes a keep-alive).
  const auto idle = read(ioc, events, all);
  EXPECT_TRUE(idle.events.empty());
  EXPECT_TRUE(idle.open);
}

TEST(HoldEvents, AReaderThatFallsBehindIsClosedNotWaitedFor) {
  asio::io_context ioc;
  HoldEvents events;
  const auto slow = events.add(ioc.get_executor(), "", {});
  const auto keeping_up = events.add(ioc.get_executor(), "", {});
  for (std::uint64_t i = 1; i <= HoldEvents::kQueue; ++i) {
    events.publish(held(i, "a"));
    if (i % 100 == 0) {
      EXPECT_EQ(read(ioc, events, keeping_up).events.size(), 100u);
    }
  }
  EXPECT_EQ(events.size(), 2u) << "a full queue is not over the bound yet";
  events.publish(held(HoldEvents::kQueue + 1, "a"));
  EXPECT_EQ(events.size(), 1u);
  const auto closed = read(ioc, events, slow);
  EXPECT_FALSE(closed.open);
  EXPECT_TRUE(closed.events.empty());
  const auto open = read(ioc, events, keeping_up);
  EXPECT_TRUE(open.open);
  EXPECT_EQ(open.events.size(), HoldEvents::kQueue + 1 - 200);
}

TEST(HoldEvents, ANewcomerPastTheBoundClosesTheOldest) {
  asio::io_context ioc;
  HoldEvents events;
  std::vector<std::shared_ptr<HoldEvents::Subscriber>> readers;
  for (std::size_t i = 0; i < HoldEvents::kMaxSubscribers; ++i) {
    readers.push_back(events.add(ioc.get_executor(), "", {}));
  }
  EXPECT_TRUE(read(ioc, events, readers[0]).open);
  const auto newcomer = events.add(ioc.get_executor(), "", {});
  EXPECT_EQ(events.size(), HoldEvents::kMaxSubscribers);
  EXPECT_FALSE(read(ioc, events, readers[0]).open);
  EXPECT_TRUE(read(ioc, events, readers[1]).open);
  EXPECT_TRUE(read(ioc, events, newcomer).open);
}

// A reader waiting for events is woken by one (not by its idle timer), and by close_all.
TEST(HoldEvents, AWaitingReaderIsWokenByAnEventAndByCloseAll) {
  asio::io_context ioc;
  HoldEvents events;
  const auto s = events.add(ioc.get_executor(), "", {});
  auto waiting = asio::co_spawn(ioc, events.next(s, 60s), asio::use_future);
  ioc.poll();  // it waits now
  events.publish(held(1, "a"));
  ioc.run_for(2s);
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(waiting.get().events.size(), 1u);
  auto again = asio::co_spawn(ioc, events.next(s, 60s), asio::use_future);
  ioc.restart();
  ioc.poll();
  events.close_all();
  ioc.run_for(2s);
  ASSERT_EQ(again.wait_for(0s), std::future_status::ready);
  EXPECT_FALSE(again.get().open);
  // Once the daemon stops, a new reader is closed at once.
  EXPECT_FALSE(read(ioc, events, events.add(ioc.get_executor(), "", {})).open);
}

}  // namespace
}  // namespace sandgate::proxy
