#include "proxy/holds/holds.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "policy/host.hpp"
#include "proxy/session.hpp"

namespace sandgate::proxy {

namespace asio = boost::asio;

// One waiting request. `timer` lives in the waiting coroutine's frame and is touched only on
// its executor; an answer sets `answer` (under the table's mutex) and posts the wake-up there.
struct Holds::Waiter {
  explicit Waiter(asio::any_io_executor ex) : executor(std::move(ex)) {}
  asio::any_io_executor executor;
  asio::steady_timer* timer = nullptr;
  std::optional<HoldAnswer> answer;
};

std::string Holds::key_of(std::string_view sandbox, std::string_view host, std::uint16_t port) {
  std::string key(sandbox);
  key += '\n';
  key += host;
  key += ':';
  key += std::to_string(port);
  return key;
}

asio::awaitable<HoldAnswer> Holds::wait(HoldQuestion question, std::chrono::milliseconds timeout) {
  const auto ex = co_await asio::this_coro::executor;
  auto waiter = std::make_shared<Waiter>(ex);
  asio::steady_timer timer(ex, timeout);
  waiter->timer = &timer;
  const std::string key = key_of(question.sandbox, question.host, question.port);
  {
    const std::lock_guard lock(mutex_);
    auto [it, added] = holds_.try_emplace(key);
    it->second.waiters.push_back(waiter);
    if (added) {
      it->second.id = next_id_++;
      it->second.question = std::move(question);
      it->second.since = std::chrono::system_clock::now();
      publish(it->second, std::nullopt);
    }
  }
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  waiter->timer = nullptr;
  const std::lock_guard lock(mutex_);
  if (waiter->answer) co_return std::move(*waiter->answer);
  // Not answered: this request stops waiting; the hold goes with its last waiter.
  if (const auto it = holds_.find(key); it != holds_.end()) {
    auto& waiters = it->second.waiters;
    waiters.erase(std::remove(waiters.begin(), waiters.end(), waiter), waiters.end());
    if (waiters.empty()) {
      publish(it->second, HoldOutcome::expired);
      holds_.erase(it);
    }
  }
  co_return HoldAnswer{};
}

bool Holds::granted(std::string_view sandbox, std::string_view host, std::uint16_t port) const {
  const std::lock_guard lock(mutex_);
  if (grants_.empty()) return false;
  const auto now = std::chrono::steady_clock::now();
  // A name's grant (port 0, from its DNS question's hold) opens it on every port.
  for (const std::uint16_t p : {port, std::uint16_t{0}}) {
    const auto it = grants_.find(key_of(sandbox, host, p));
    if (it != grants_.end() && (!it->second || now < *it->second)) return true;
  }
  return false;
}

std::vector<Holds::Pending> Holds::pending() const {
  const std::lock_guard lock(mutex_);
  std::vector<Pending> out;
  for (const auto& [key, hold] : holds_) out.push_back(pending_of(hold));
  std::sort(out.begin(), out.end(), [](const Pending& a, const Pending& b) { return a.id < b.id; });
  return out;
}

bool Holds::answer(std::uint64_t id, Action action, std::chrono::seconds ttl, std::string message) {
  const std::lock_guard lock(mutex_);
  const auto it = std::find_if(holds_.begin(), holds_.end(),
                               [&](const auto& entry) { return entry.second.id == id; });
  if (it == holds_.end()) return false;
  HoldAnswer answer;
  answer.outcome = action == Action::deny ? HoldOutcome::denied : HoldOutcome::allowed;
  answer.message = std::move(message);
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(grants_, [&](const auto& grant) { return grant.second && *grant.second <= now; });
  if (action == Action::allow_sandbox) {
    grants_[it->first] = ttl.count() > 0 ? std::optional(now + ttl) : std::nullopt;
  } else if (action == Action::allow_once && it->second.question.port == 0) {
    // A name allowed once (its DNS question): the connections that follow the lookup are
    // the "once", so the name stays open for them a little while.
    const auto [grant, added] = grants_.try_emplace(it->first, now + kNameAllowedOnce);
    if (!added && grant->second && *grant->second < now + kNameAllowedOnce) {
      grant->second = now + kNameAllowedOnce;
    }
  }
  publish(it->second, answer.outcome);
  wake(it->second, answer);
  holds_.erase(it);
  return true;
}

void Holds::wake(Hold& hold, const HoldAnswer& answer) {
  for (const auto& w : hold.waiters) {
    w->answer = answer;
    asio::post(w->executor, [w] {
      if (w->timer != nullptr) w->timer->cancel();
    });
  }
  hold.waiters.clear();
}

std::size_t Holds::revoke(std::string_view sandbox, std::string_view destination) {
  const std::lock_guard lock(mutex_);
  const std::string prefix = std::string(sandbox) + '\n';
  return std::erase_if(grants_, [&](const auto& grant) {
    return grant.first.starts_with(prefix) &&
           (destination.empty() ||
            std::string_view(grant.first).substr(prefix.size()) == destination);
  });
}

void Holds::reconcile(const policy::Policy& next) {
  const std::lock_guard lock(mutex_);
  std::erase_if(grants_, [&](const auto& grant) {
    return !next.has_sandbox(std::string_view(grant.first).substr(0, grant.first.find('\n')));
  });
  for (auto it = holds_.begin(); it != holds_.end();) {
    const HoldQuestion& q = it->second.question;
    const bool decided =
        !next.has_sandbox(q.sandbox) ||
        !next.decide(q.sandbox, policy::normalize_host(q.host), q.port, q.entry).held;
    if (!decided) {
      ++it;
      continue;
    }
    publish(it->second, HoldOutcome::reconsidered);
    wake(it->second, HoldAnswer{HoldOutcome::reconsidered, {}});
    it = holds_.erase(it);
  }
}

PendingHold Holds::pending_of(const Hold& hold) {
  return {hold.id, hold.question, hold.since, hold.waiters.size()};
}

void Holds::publish(Hold& hold, std::optional<HoldOutcome> outcome) {
  HoldEvent event;
  event.number = next_event_++;
  event.hold = pending_of(hold);
  if (outcome) {
    event.kind = HoldEvent::Kind::answered;
    event.outcome = *outcome;
  } else {
    hold.held_event = event.number;
  }
  events_.publish(event);
}

std::shared_ptr<HoldEvents::Subscriber> Holds::subscribe(asio::any_io_executor executor,
                                                         std::string sandbox) {
  // Under the table's mutex, so that no hold begins or ends between the list and the reader's
  // place among the subscribers.
  const std::lock_guard lock(mutex_);
  std::vector<HoldEvent> first;
  for (const auto& [key, hold] : holds_) {
    if (!sandbox.empty() && hold.question.sandbox != sandbox) continue;
    first.push_back({HoldEvent::Kind::held, hold.held_event, pending_of(hold), {}});
  }
  std::sort(first.begin(), first.end(),
            [](const HoldEvent& a, const HoldEvent& b) { return a.number < b.number; });
  return events_.add(std::move(executor), std::move(sandbox), std::move(first));
}

std::vector<Holds::Grant> Holds::grants(std::string_view sandbox) const {
  const std::lock_guard lock(mutex_);
  std::vector<Grant> out;
  const std::string prefix = std::string(sandbox) + '\n';
  const auto steady_now = std::chrono::steady_clock::now();
  const auto system_now = std::chrono::system_clock::now();
  for (auto it = grants_.lower_bound(prefix); it != grants_.end() && it->first.starts_with(prefix);
       ++it) {
    Grant g;
    g.destination = it->first.substr(prefix.size());
    if (it->second) {
      if (*it->second <= steady_now) continue;
      g.until = system_now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                 *it->second - steady_now);
    }
    out.push_back(std::move(g));
  }
  return out;
}

policy::Decision hold_refusal(HoldOutcome outcome, std::string message) {
  policy::Decision refusal;
  refusal.reason = outcome == HoldOutcome::denied ? policy::Reason::denied_by_operator
                                                  : policy::Reason::hold_expired;
  refusal.rule = "holds";
  refusal.message = std::move(message);
  return refusal;
}

asio::awaitable<HoldEnd> await_answer(Shared& shared, HoldQuestion question,
                                      telemetry::AuditRecord line,
                                      std::chrono::milliseconds timeout) {
  line.event = "destination_held";
  line.outcome = "unknown";
  line.protocol = question.mode;
  line.host = question.host;
  line.port = question.port;
  line.method = question.method;
  line.url_path = question.path;
  line.reason = policy::reason_name(policy::Reason::no_matching_rule);
  shared.audit->write(line);
  const auto waiting = shared.metrics->held_request();
  HoldAnswer answer = co_await shared.holds.wait(std::move(question), timeout);
  HoldEnd end;
  if (answer.outcome == HoldOutcome::allowed) {
    end.granted = true;
  } else if (answer.outcome != HoldOutcome::reconsidered) {
    end.refusal = hold_refusal(answer.outcome, std::move(answer.message));
  }
  co_return end;
}

asio::awaitable<HoldEnd> settle_hold(const Session& s, HoldQuestion question) {
  if (s.deps.shared->holds.granted(question.sandbox, question.host, question.port)) {
    co_return HoldEnd{std::nullopt, true};
  }
  s.watchdog->arm(s.limits().hold_timeout + s.limits().header_timeout);
  const telemetry::AuditRecord line = s.record(policy::EntryMode::http);
  co_return co_await await_answer(*s.deps.shared, std::move(question), line,
                                  s.limits().hold_timeout);
}

asio::awaitable<void> settle_held_stream(const Session& s, policy::StreamFacts& facts,
                                         policy::StreamVerdict& v, std::uint16_t port) {
  if (!v.decision.held) co_return;
  HoldQuestion question{s.sandbox, v.shown, port,  std::string(policy::mode_name(v.mode)),
                        {},        {},      v.mode};
  HoldEnd end = co_await settle_hold(s, std::move(question));
  if (end.refusal) {
    v.decision = std::move(*end.refusal);
    co_return;
  }
  facts.granted = end.granted;
  v = policy::decide_stream(*s.deps.shared->current()->policy, facts);
  if (v.decision.held) v.decision = hold_refusal(HoldOutcome::expired);
}

}  // namespace sandgate::proxy
