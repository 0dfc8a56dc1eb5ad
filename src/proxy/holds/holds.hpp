#pragma once

// Held destinations (docs/policy.md, "Held destinations"): a stream or request to a name no
// rule allows or denies, in a sandbox with `unlisted = "hold"`, waits for an operator's answer
// instead of being refused. Every request for the same (sandbox, host, port) waits on one hold;
// the admin API lists the holds and answers them (allow once, allow for the sandbox, deny with
// a message); a hold nobody answers within its deadline ends as a refusal of its own.
//
// Threads: workers wait on their own executors; the admin API answers from its worker. The
// table is behind one mutex (holds are rare and short); an answer wakes each waiter on its
// own executor, as the credential store wakes its waiters. Every hold that begins or ends is
// also an event for the readers of GET /holds/events (HoldEvents), published under the same
// mutex so that a new reader's first events (the holds pending then) and the changes after
// them neither miss nor repeat one.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"
#include "policy/stream.hpp"
#include "proxy/holds/hold_events.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::proxy {

struct Session;
struct Shared;

struct HoldAnswer {
  HoldOutcome outcome = HoldOutcome::expired;
  std::string message;  // denied: the operator's message for the client (may be empty)
};

class Holds {
 public:
  enum class Action { allow_once, allow_sandbox, deny };
  // How long a name allowed once (the hold of its DNS question) stays open for the sandbox's
  // connections that follow the lookup.
  static constexpr std::chrono::seconds kNameAllowedOnce{60};

  // Waits until an operator answers the hold of question's (sandbox, host, port), or `timeout`
  // passes (expired). Requests for a destination already held wait on that hold.
  boost::asio::awaitable<HoldAnswer> wait(HoldQuestion question, std::chrono::milliseconds timeout);

  // Whether an operator allowed the sandbox host:port for a while (Action::allow_sandbox).
  bool granted(std::string_view sandbox, std::string_view host, std::uint16_t port) const;

  using Pending = PendingHold;
  std::vector<Pending> pending() const;

  // Answers hold `id`: its waiters go on (allowed) or are refused (denied, with `message`).
  // allow_sandbox also grants the destination to the sandbox for `ttl` (zero: as long as the
  // daemon runs). False: no such hold (answered, or expired).
  bool answer(std::uint64_t id, Action action, std::chrono::seconds ttl, std::string message);

  // Grants in force (for /sandboxes/ID): "host:port" and when each ends (nullopt: never).
  struct Grant {
    std::string destination;
    std::optional<std::chrono::system_clock::time_point> until;
  };
  std::vector<Grant> grants(std::string_view sandbox) const;

  // Ends the sandbox's grants: every one, or the one of `destination` ("host:port"). How
  // many ended.
  std::size_t revoke(std::string_view sandbox, std::string_view destination = {});

  // After a reload to `next`: the grants of a sandbox it removed end, and every hold it
  // removed the sandbox of, or whose destination its rules now decide (allow or deny), ends
  // as reconsidered. Other holds wait on with their deadlines, and other grants stay (an
  // operator drops them with revoke()).
  void reconcile(const policy::Policy& next);

  // A reader of the holds of `sandbox` ("" all) that begin and end from now on, whose first
  // events are one `held` per hold of it pending now. Its coroutine runs on `executor` and
  // reads with events().next; it ends with events().remove.
  std::shared_ptr<HoldEvents::Subscriber> subscribe(boost::asio::any_io_executor executor,
                                                    std::string sandbox);
  HoldEvents& events() { return events_; }

 private:
  struct Waiter;
  struct Hold {
    std::uint64_t id = 0;
    HoldQuestion question;
    std::chrono::system_clock::time_point since;
    std::vector<std::shared_ptr<Waiter>> waiters;
    std::uint64_t held_event = 0;  // the number of its `held` event (a new reader sees it again)
  };
  static PendingHold pending_of(const Hold& hold);
  // Publishes that `hold` began (`outcome` none) or ended. Under mutex_.
  void publish(Hold& hold, std::optional<HoldOutcome> outcome);
  static std::string key_of(std::string_view sandbox, std::string_view host, std::uint16_t port);
  // Wakes each waiter of `hold` with `answer`; called under the mutex, the wake-ups run later
  // on the waiters' executors.
  static void wake(Hold& hold, const HoldAnswer& answer);

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, Hold> holds_;  // by key_of
  // "sandbox\nhost:port" to when it ends (nullopt: never); expired ones go at the next answer.
  std::map<std::string, std::optional<std::chrono::steady_clock::time_point>> grants_;
  std::uint64_t next_event_ = 1;
  HoldEvents events_;
};

// How a hold ended for one waiter: the refusal to report (denied_by_operator with the
// operator's message, hold_expired; rule "holds"), or none: decide again on the config now in
// force (Shared::current(): a reload may have come meanwhile), `granted` when an operator
// allowed it. A verdict decided again that is still held is refused as expired (hold_refusal).
struct HoldEnd {
  std::optional<policy::Decision> refusal;
  bool granted = false;
};
policy::Decision hold_refusal(HoldOutcome outcome, std::string message = {});

// Waits for the answer to `question`'s hold, up to `timeout`: first its "destination_held" audit
// line (`line`: the caller's record of who asks; the question fills in the rest), then counted
// in sandgate_held_requests while it waits.
boost::asio::awaitable<HoldEnd> await_answer(Shared& shared, HoldQuestion question,
                                             telemetry::AuditRecord line,
                                             std::chrono::milliseconds timeout);

// The end of a held verdict (policy::Decision::held) for `s`'s sandbox: granted at once when it
// holds a grant, else the wait for an operator's answer, up to the hold timeout.
boost::asio::awaitable<HoldEnd> settle_hold(const Session& s, HoldQuestion question);

// A stream's verdict `v` over `facts` (a CONNECT, a transparent stream), when held: decided
// again as granted once the sandbox may go there, else made the refusal settle_hold gives.
// Unchanged when not held.
boost::asio::awaitable<void> settle_held_stream(const Session& s, policy::StreamFacts& facts,
                                                policy::StreamVerdict& v, std::uint16_t port);

}  // namespace sandgate::proxy
