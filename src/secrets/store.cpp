#include "secrets/store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <mutex>
#include <random>
#include <unordered_map>

#include "secrets/encoding.hpp"

namespace sandgate::secrets {

namespace asio = boost::asio;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

// One (credential, scope). `token` is what get() reads from any thread; everything else
// belongs to the store's thread.
struct CredentialStore::Slot {
  explicit Slot(Scope s, BackoffPolicy backoff) : scope(std::move(s)), state(backoff) {}
  std::atomic<std::shared_ptr<const Token>> token;
  std::atomic<bool> poke_pending{false};  // a refresh-ahead request is posted already
  // No refresh-ahead request before this (nanoseconds since the epoch): the backoff after a
  // failure, so a failing credential does not cost every request a post to the store.
  std::atomic<std::int64_t> quiet_until{0};
  Scope scope;
  RefreshState state;
  std::vector<std::shared_ptr<Waiter>> waiters;
};

struct CredentialStore::Credential {
  CredentialSpec spec;
  std::shared_ptr<Provider> provider;
  std::atomic<std::uint64_t> refreshes{0};
  std::atomic<std::uint64_t> failures{0};
  // Copy-on-write (the store's thread writes), read lock-free by get().
  using Slots = std::unordered_map<std::string, std::shared_ptr<Slot>>;
  std::atomic<std::shared_ptr<const Slots>> slots{std::make_shared<const Slots>()};
  bool retired = false;  // store thread: replaced or removed by update()
};

// A caller waiting on the slow path. The caller's coroutine owns the timer it waits on; the
// store's thread sets `result`, then posts to the caller's executor a handler that expires that
// timer, which wakes the caller. `timer` is only touched on the caller's executor, and only
// while the caller is still waiting (`timer` is reset when it stops), so the store never
// touches an I/O object of another io_context, and a Waiter the store drops last holds none.
struct CredentialStore::Waiter {
  explicit Waiter(asio::any_io_executor ex) : executor(std::move(ex)) {}
  asio::any_io_executor executor;
  std::mutex mutex;
  std::optional<TokenResult> result;
  asio::steady_timer* timer = nullptr;  // set while the caller waits

  void complete(TokenResult r, const std::shared_ptr<Waiter>& self) {
    {
      const std::lock_guard lock(mutex);
      if (result || timer == nullptr) return;  // answered already, or the caller gave up
      result = std::move(r);
    }
    asio::post(executor, [self] {
      const std::lock_guard lock(self->mutex);
      if (self->timer != nullptr) {
        self->timer->expires_at(asio::steady_timer::time_point::min());  // wakes the wait
      }
    });
  }
};

namespace {

TokenResult failed(bool retryable, std::string message) {
  TokenResult out;
  out.error = TokenError{retryable, std::move(message), 0, {}};
  return out;
}

// A fetch's failure as it was (the token endpoint's status and code included).
TokenResult failed(const TokenError& error) {
  TokenResult out;
  out.error = error;
  return out;
}

TokenResult served(std::shared_ptr<const Token> token) {
  TokenResult out;
  out.token = std::move(token);
  return out;
}

std::string slot_key(const Scope& scope) {
  return scope.key();
}

}  // namespace

CredentialStore::CredentialStore(StoreOptions options)
    : options_(std::move(options)), credentials_(std::make_shared<const CredentialMap>()) {
  if (!options_.random) {
    auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
    options_.random = [rng] { return std::uniform_real_distribution<double>(0.0, 1.0)(*rng); };
  }
  resolver_ = std::make_unique<dns::Resolver>(io_.get_executor(), options_.dns);
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
    // On this thread, as the resolver requires; its pending lookups end as cancelled (their
    // fetches are never resumed: the io_context has stopped).
    resolver_.reset();
  });
}

CredentialStore::~CredentialStore() {
  io_.stop();
  thread_.join();
}

void CredentialStore::log(std::string_view line) const {
  if (options_.log) options_.log(line);
}

void CredentialStore::update(std::vector<CredentialSpec> specs) {
  std::promise<void> done;
  asio::post(io_, [this, &specs, &done] {
    const auto old = credentials_.load();
    auto next = std::make_shared<CredentialMap>();
    for (CredentialSpec& spec : specs) {
      std::shared_ptr<Credential> kept;
      for (const auto& c : *old) {
        if (c->spec == spec) kept = c;
      }
      if (!kept) {
        kept = std::make_shared<Credential>();
        kept->spec = std::move(spec);
        ProviderContext context;
        context.clock = options_.clock;
        context.log = [this](std::string_view line) { log(line); };
        context.resolver = resolver_.get();
        context.token_of = [this](std::string name, std::chrono::milliseconds max_wait) {
          return token_for_provider(std::move(name), max_wait);
        };
        kept->provider = make_provider(kept->spec, std::move(context));
      }
      next->push_back(std::move(kept));
    }
    std::sort(next->begin(), next->end(),
              [](const auto& a, const auto& b) { return a->spec.name < b->spec.name; });
    for (const auto& c : *old) {
      if (std::find(next->begin(), next->end(), c) != next->end()) continue;
      c->retired = true;
      const auto slots = c->slots.load();  // held for the loop (a range-for drops temporaries)
      for (const auto& [key, slot] : *slots) {
        for (const auto& waiter : slot->waiters) {
          waiter->complete(failed(true, "credential " + c->spec.name + " was reconfigured"),
                           waiter);
        }
        slot->waiters.clear();
      }
    }
    credentials_.store(std::move(next));
    done.set_value();
  });
  done.get_future().wait();
}

std::shared_ptr<CredentialStore::Credential> CredentialStore::find(std::string_view name) const {
  const auto map = credentials_.load();
  const auto it = std::lower_bound(
      map->begin(), map->end(), name,
      [](const std::shared_ptr<Credential>& c, std::string_view n) { return c->spec.name < n; });
  return it != map->end() && (*it)->spec.name == name ? *it : nullptr;
}

asio::awaitable<TokenResult> CredentialStore::get(std::string_view name, const Scope& scope,
                                                  std::chrono::milliseconds max_wait) {
  std::shared_ptr<Credential> credential = find(name);
  if (!credential) co_return failed(false, "no credential named " + std::string(name));
  std::string key = slot_key(scope);

  // Hot path: atomic loads, no lock, no suspension.
  if (auto token = cached(credential, key, scope)) co_return served(std::move(token));

  // Slow path: the store's thread decides; wait for its answer on our own executor.
  auto waiter = std::make_shared<Waiter>(co_await asio::this_coro::executor);
  asio::steady_timer timer(waiter->executor);
  timer.expires_after(max_wait);
  waiter->timer = &timer;  // before the post: complete() ignores a waiter without a timer
  asio::post(io_, [this, credential, key = std::move(key), scope, waiter]() mutable {
    handle(std::move(credential), std::move(key), std::move(scope), std::move(waiter));
  });
  auto [ec] = co_await timer.async_wait(use_tuple);
  (void)ec;  // expired (max_wait) or woken by complete(): the result says which
  const std::lock_guard lock(waiter->mutex);
  waiter->timer = nullptr;
  if (waiter->result) co_return std::move(*waiter->result);
  waiter->result = failed(true, "no token for credential " + std::string(name) + " within " +
                                    std::to_string(max_wait.count()) + " ms");
  co_return *waiter->result;
}

asio::awaitable<TokenResult> CredentialStore::token_for_provider(
    std::string name, std::chrono::milliseconds max_wait) {
  const Scope unscoped;
  co_return co_await get(name, unscoped, max_wait);
}

std::shared_ptr<const Token> CredentialStore::cached(std::string_view name, const Scope& scope) {
  const std::shared_ptr<Credential> credential = find(name);
  return credential ? cached(credential, slot_key(scope), scope) : nullptr;
}

std::shared_ptr<const Token> CredentialStore::cached(const std::shared_ptr<Credential>& credential,
                                                     const std::string& key, const Scope& scope) {
  const auto slots = credential->slots.load();
  const auto it = slots->find(key);
  if (it == slots->end()) return nullptr;
  const std::shared_ptr<Slot>& slot = it->second;
  std::shared_ptr<const Token> token = slot->token.load();
  const TimePoint now = options_.clock();
  if (is_fresh(token.get(), now)) return token;
  if (!is_usable(token.get(), now)) return nullptr;
  // Refresh ahead: tell the store once; serve the cached token meanwhile.
  if (now.time_since_epoch().count() >= slot->quiet_until.load(std::memory_order_relaxed) &&
      !slot->poke_pending.exchange(true)) {
    asio::post(io_, [this, credential, key, scope] { handle(credential, key, scope, nullptr); });
  }
  return token;
}

void CredentialStore::handle(std::shared_ptr<Credential> credential, std::string key, Scope scope,
                             std::shared_ptr<Waiter> waiter) {
  if (credential->retired) {
    if (waiter) {
      waiter->complete(failed(true, "credential " + credential->spec.name + " was reconfigured"),
                       waiter);
    }
    return;
  }
  auto slots = credential->slots.load();
  std::shared_ptr<Slot> slot;
  const TimePoint now = options_.clock();
  if (const auto it = slots->find(key); it != slots->end()) {
    slot = it->second;
  } else {
    slot = std::make_shared<Slot>(std::move(scope), options_.backoff);
    // The slots nobody asked for since their token ran out (a sandbox that is gone, whose role
    // session was its own) go when a new one comes, so their number stays that of the scopes
    // in use. One that is fetching, awaited or in a failure's backoff stays.
    auto next = std::make_shared<Credential::Slots>();
    for (const auto& [k, s] : *slots) {
      const bool idle = !s->state.refreshing() && s->waiters.empty() &&
                        !is_usable(s->state.token().get(), now) && s->state.retry_at() <= now;
      if (!idle) next->emplace(k, s);
    }
    next->emplace(key, slot);
    credential->slots.store(std::move(next));
  }
  if (!waiter) slot->poke_pending.store(false);
  switch (slot->state.on_request(now)) {
    case RefreshState::Action::serve:
      if (waiter) waiter->complete(served(slot->state.usable(now)), waiter);
      break;
    case RefreshState::Action::serve_and_refresh:
      if (waiter) waiter->complete(served(slot->state.usable(now)), waiter);
      start_refresh(credential, slot);
      break;
    case RefreshState::Action::wait:
      if (waiter) slot->waiters.push_back(std::move(waiter));
      break;
    case RefreshState::Action::refresh_and_wait:
      if (waiter) slot->waiters.push_back(std::move(waiter));
      start_refresh(credential, slot);
      break;
    case RefreshState::Action::fail: {
      const TokenError& error = *slot->state.last_error();
      if (waiter) waiter->complete(failed(error), waiter);
      break;
    }
  }
}

void CredentialStore::start_refresh(std::shared_ptr<Credential> credential,
                                    std::shared_ptr<Slot> slot) {
  credential->refreshes.fetch_add(1, std::memory_order_relaxed);
  asio::co_spawn(io_, refresh(std::move(credential), std::move(slot)),
                 [this](std::exception_ptr e) {
                   if (e) log("credential refresh: unexpected exception (a bug)");
                 });
}

asio::awaitable<void> CredentialStore::refresh(std::shared_ptr<Credential> credential,
                                               std::shared_ptr<Slot> slot) {
  FetchResult result;
  try {
    result = co_await credential->provider->fetch(slot->scope);
  } catch (const std::exception& e) {
    result = fetch_failure(true, std::string("internal error: ") + e.what());
  }
  const TimePoint now = options_.clock();
  TokenResult answer;
  if (result.token) {
    auto token = std::make_shared<Token>();
    token->fingerprint = fingerprint(result.token->value.view());
    token->value = std::move(result.token->value);
    token->expires_at = result.token->expires_at;
    token->refresh_at = result.token->refresh_at.value_or(
        refresh_time(now, token->expires_at, credential->spec.refresh_before));
    std::shared_ptr<const Token> shared = std::move(token);
    slot->state.on_success(shared);
    slot->token.store(shared);
    answer = served(std::move(shared));
  } else {
    credential->failures.fetch_add(1, std::memory_order_relaxed);
    slot->state.on_failure(now, result.error, options_.random());
    slot->quiet_until.store(slot->state.retry_at().time_since_epoch().count(),
                            std::memory_order_relaxed);
    log("credential " + credential->spec.name + ": refresh failed (" +
        (result.error.retryable ? "retrying" : "not retryable, retrying slowly") + " in " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(slot->state.retry_at() - now)
                .count()) +
        " ms): " + result.error.message);
    if (auto usable = slot->state.usable(now)) {
      answer = served(std::move(usable));
    } else {
      answer = failed(result.error);
    }
  }
  for (const auto& waiter : slot->waiters) waiter->complete(answer, waiter);
  slot->waiters.clear();
}

std::vector<CredentialStats> CredentialStore::stats() const {
  std::vector<CredentialStats> out;
  const TimePoint now = options_.clock();
  // Each map is held while it is walked: a range-for over `*x.load()` would drop the loaded
  // pointer before the loop, and a concurrent update() could free the map under it.
  const auto credentials = credentials_.load();
  for (const auto& c : *credentials) {
    CredentialStats s;
    s.name = c->spec.name;
    s.kind = c->spec.kind;
    s.refreshes = c->refreshes.load(std::memory_order_relaxed);
    s.failures = c->failures.load(std::memory_order_relaxed);
    std::optional<TimePoint> soonest;
    const auto slots = c->slots.load();
    s.cache_entries = slots->size();
    for (const auto& [key, slot] : *slots) {
      const auto token = slot->token.load();
      if (!is_usable(token.get(), now) || token->expires_at == TimePoint::max()) continue;
      if (!soonest || token->expires_at < *soonest) soonest = token->expires_at;
    }
    if (soonest) s.seconds_to_expiry = std::chrono::duration<double>(*soonest - now).count();
    out.push_back(std::move(s));
  }
  return out;
}

std::size_t CredentialStore::slot_count() const {
  std::size_t n = 0;
  const auto credentials = credentials_.load();
  for (const auto& c : *credentials) n += c->slots.load()->size();
  return n;
}

}  // namespace sandgate::secrets
