#include "proxy/holds/hold_events.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandgate::proxy {

namespace asio = boost::asio;

std::string_view outcome_name(HoldOutcome outcome) {
  switch (outcome) {
    case HoldOutcome::allowed:
      return "allowed";
    case HoldOutcome::denied:
      return "denied";
    case HoldOutcome::expired:
      return "expired";
    case HoldOutcome::reconsidered:
      return "reconsidered";
  }
  return "expired";
}

// One reader. `queue` and `open` are under the HoldEvents mutex; `timer` lives in the reading
// coroutine's frame while it waits and is touched only on `executor` (a wake-up is posted
// there, so it runs after the coroutine has begun to wait, or finds no timer and the next
// read takes the queue).
struct HoldEvents::Subscriber {
  explicit Subscriber(asio::any_io_executor ex, std::string sb)
      : executor(std::move(ex)), sandbox(std::move(sb)) {}
  asio::any_io_executor executor;
  std::string sandbox;
  std::vector<HoldEvent> queue;
  bool open = true;
  asio::steady_timer* timer = nullptr;
};

std::shared_ptr<HoldEvents::Subscriber> HoldEvents::add(asio::any_io_executor executor,
                                                        std::string sandbox,
                                                        std::vector<HoldEvent> first) {
  auto s = std::make_shared<Subscriber>(std::move(executor), std::move(sandbox));
  s->queue = std::move(first);
  std::shared_ptr<Subscriber> evicted;
  {
    const std::lock_guard lock(mutex_);
    if (closed_) {
      s->open = false;
      return s;
    }
    if (subscribers_.size() >= kMaxSubscribers) {
      evicted = subscribers_.front();
      close_locked(evicted);
    }
    subscribers_.push_back(s);
  }
  if (evicted) wake(evicted);
  return s;
}

void HoldEvents::remove(const std::shared_ptr<Subscriber>& subscriber) {
  const std::lock_guard lock(mutex_);
  std::erase(subscribers_, subscriber);
}

void HoldEvents::publish(const HoldEvent& event) {
  std::vector<std::shared_ptr<Subscriber>> woken;
  {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < subscribers_.size();) {
      const std::shared_ptr<Subscriber> s = subscribers_[i];
      if (!s->sandbox.empty() && s->sandbox != event.hold.question.sandbox) {
        ++i;
        continue;
      }
      woken.push_back(s);
      if (s->queue.size() >= kQueue) {
        close_locked(s);  // fell behind: closed, never waited for
        continue;
      }
      s->queue.push_back(event);
      ++i;
    }
  }
  for (const auto& s : woken) wake(s);
}

void HoldEvents::close_all() {
  std::deque<std::shared_ptr<Subscriber>> all;
  {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    all.swap(subscribers_);
    for (const auto& s : all) s->open = false;
  }
  for (const auto& s : all) wake(s);
}

std::size_t HoldEvents::size() const {
  const std::lock_guard lock(mutex_);
  return subscribers_.size();
}

void HoldEvents::close_locked(const std::shared_ptr<Subscriber>& s) {
  s->open = false;
  s->queue.clear();
  std::erase(subscribers_, s);
}

void HoldEvents::wake(const std::shared_ptr<Subscriber>& s) {
  asio::post(s->executor, [s] {
    if (s->timer != nullptr) s->timer->cancel();
  });
}

asio::awaitable<HoldEvents::Batch> HoldEvents::next(const std::shared_ptr<Subscriber>& subscriber,
                                                    std::chrono::steady_clock::duration idle) {
  const auto take = [&] {
    const std::lock_guard lock(mutex_);
    Batch batch;
    batch.events.swap(subscriber->queue);
    batch.open = subscriber->open;
    return batch;
  };
  if (Batch batch = take(); !batch.events.empty() || !batch.open) co_return batch;
  asio::steady_timer timer(subscriber->executor, idle);
  subscriber->timer = &timer;
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  subscriber->timer = nullptr;
  co_return take();
}

}  // namespace sandgate::proxy
