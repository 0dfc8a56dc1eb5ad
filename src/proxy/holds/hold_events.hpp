#pragma once

// The readers of GET /holds/events (docs/policy.md, "Held destinations"): each gets a `held`
// event when a hold begins and an `answered` event when it ends, from its own bounded queue.
// Bounded twice, so that no reader can slow the daemon or hold its memory: a reader whose
// queue is full (it stopped reading) is closed, not waited for; and when kMaxSubscribers read,
// a newcomer closes the oldest instead of being refused (a reader that went away without a
// word must not keep the operator's next one out).
//
// Threads: Holds publishes from any worker; each reader's coroutine runs on its own executor
// (the admin listener's worker) and is woken there by a post, as Holds wakes its waiters. The
// queues are behind one mutex, never held while anything is written to a socket.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace sandgate::proxy {

// What the operator is asked.
struct HoldQuestion {
  std::string sandbox;
  std::string host;  // as the audit line shows it
  std::uint16_t port = 0;
  std::string mode;    // connect, http, tls, ...
  std::string method;  // an HTTP request's, when known
  std::string path;
  // How the policy decided it (held): what a reload's rules are asked again (Holds::reconcile).
  policy::EntryMode entry = policy::EntryMode::http;
};

// reconsidered: a reload removed the sandbox, or its rules now decide the destination; the
// waiters decide again on the config now in force.
enum class HoldOutcome { allowed, denied, expired, reconsidered };
// "allowed", "denied", "expired", "reconsidered"
std::string_view outcome_name(HoldOutcome);

// A hold waiting for its answer, as GET /holds lists it.
struct PendingHold {
  std::uint64_t id = 0;
  HoldQuestion question;
  std::chrono::system_clock::time_point since;
  std::size_t waiting = 0;  // requests waiting on it
};

// One change: a hold began (held), or ended (answered, with how).
struct HoldEvent {
  enum class Kind { held, answered };
  Kind kind = Kind::held;
  std::uint64_t number = 0;  // counts the daemon's events (a held event's stays its hold's)
  PendingHold hold;
  HoldOutcome outcome = HoldOutcome::expired;  // answered only
};

class HoldEvents {
 public:
  static constexpr std::size_t kQueue = 256;
  static constexpr std::size_t kMaxSubscribers = 32;

  struct Subscriber;

  // A new reader on `executor` of the events of `sandbox` ("" every sandbox), whose first
  // events are `first` (they may exceed kQueue). When kMaxSubscribers read already, the
  // oldest is closed. After close_all, the new reader is closed at once.
  std::shared_ptr<Subscriber> add(boost::asio::any_io_executor executor, std::string sandbox,
                                  std::vector<HoldEvent> first);
  // The reader has gone (its stream ended).
  void remove(const std::shared_ptr<Subscriber>& subscriber);

  // Queues `event` for every reader of its sandbox; one whose queue is full is closed.
  void publish(const HoldEvent& event);

  // Ends every reader, and every one added later (the daemon stops).
  void close_all();

  // What a reader has to send: its queued events (empty when `idle` passed with none), and
  // whether it may go on (false: closed; send the events, then end).
  struct Batch {
    std::vector<HoldEvent> events;
    bool open = true;
  };
  // Waits on the reader's executor until it has events, is closed, or `idle` passes.
  boost::asio::awaitable<Batch> next(const std::shared_ptr<Subscriber>& subscriber,
                                     std::chrono::steady_clock::duration idle);

  std::size_t size() const;

 private:
  // Takes `s` out of the readers and closes it; the caller wakes it. Under mutex_.
  void close_locked(const std::shared_ptr<Subscriber>& s);
  static void wake(const std::shared_ptr<Subscriber>& s);

  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<Subscriber>> subscribers_;  // oldest first
  bool closed_ = false;
};

}  // namespace sandgate::proxy
