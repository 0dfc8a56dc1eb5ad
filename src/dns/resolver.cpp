#include "dns/resolver.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "dns/answer_cache.hpp"
#include "dns/ares_channel.hpp"
#include "dns/server_address.hpp"

namespace sandgate::dns {

namespace asio = boost::asio;
using policy::IpAddress;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr int kMaxAddressesPerFamily = 64;  // more are dropped; nobody dials the 65th
constexpr std::size_t kMaxNameLength = 253;

std::error_code canceled() {
  return std::make_error_code(std::errc::operation_canceled);
}

// What one of the two queries of a lookup produced.
struct FamilyResult {
  bool done = false;
  int status = ARES_ETIMEOUT;  // until done
  std::vector<IpAddress> addresses;
  seconds min_ttl = seconds::max();
  std::optional<Soa> soa;  // a negative reply's (ARES_ENOTFOUND, ARES_ENODATA)
};

void add_unique(std::vector<IpAddress>& out, const IpAddress& a) {
  if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
}

seconds record_ttl(int ttl) {
  return seconds(std::max(ttl, 0));
}

bool is_negative(int status) {
  return status == ARES_ENOTFOUND || status == ARES_ENODATA;
}

FamilyResult parse_family(int type, int status, std::span<const unsigned char> reply,
                          const std::string& name) {
  FamilyResult r;
  r.done = true;
  r.status = status;
  if (is_negative(status)) {
    r.soa = authority_soa(reply, name);
    return r;
  }
  if (status != ARES_SUCCESS) return r;
  const int len = static_cast<int>(reply.size());
  int count = kMaxAddressesPerFamily;
  if (type == kTypeA) {
    std::array<ares_addrttl, kMaxAddressesPerFamily> ttls{};
    r.status = ares_parse_a_reply(reply.data(), len, nullptr, ttls.data(), &count);
    for (int i = 0; r.status == ARES_SUCCESS && i < count; ++i) {
      const ares_addrttl& rec = ttls[static_cast<std::size_t>(i)];
      add_unique(r.addresses, IpAddress::v4(ntohl(rec.ipaddr.s_addr)));
      r.min_ttl = std::min(r.min_ttl, record_ttl(rec.ttl));
    }
  } else {
    std::array<ares_addr6ttl, kMaxAddressesPerFamily> ttls{};
    r.status = ares_parse_aaaa_reply(reply.data(), len, nullptr, ttls.data(), &count);
    for (int i = 0; r.status == ARES_SUCCESS && i < count; ++i) {
      const ares_addr6ttl& rec = ttls[static_cast<std::size_t>(i)];
      std::array<std::uint8_t, 16> bytes{};
      std::memcpy(bytes.data(), &rec.ip6addr, bytes.size());
      add_unique(r.addresses, IpAddress::v6(bytes));
      r.min_ttl = std::min(r.min_ttl, record_ttl(rec.ttl));
    }
  }
  if (r.status == ARES_SUCCESS && r.addresses.empty()) {  // e.g. only a CNAME to nowhere
    r.status = ARES_ENODATA;
    r.soa = authority_soa(reply, name);
  }
  return r;
}

// A status the server meant: the same question would get the same reply until the TTL ends.
bool is_definitive(int status) {
  return status == ARES_SUCCESS || is_negative(status);
}

// How a lookup ends, from its two halves (a half still pending counts as ARES_ETIMEOUT).
struct Outcome {
  enum class Cache { no, positive, negative };
  Result<Answer> result;
  // Only answers where both halves are definitive are cached: an IPv4-only answer because
  // AAAA timed out or failed must not hide the IPv6 addresses for a whole TTL.
  Cache cache = Cache::no;
};

// A negative reply's SOA as sent on: its TTL bounded by sandgate's own negative TTL.
std::optional<Soa> bounded(std::optional<Soa> soa, seconds negative_ttl) {
  if (soa) {
    soa->ttl = static_cast<std::uint32_t>(
        std::min<std::int64_t>(soa->ttl, std::max<std::int64_t>(0, negative_ttl.count())));
  }
  return soa;
}

// Negative answers are values here (Answer::negative); resolve() turns them into errors.
Outcome combine(const FamilyResult& a, const FamilyResult& aaaa, seconds max_ttl,
                seconds negative_ttl) {
  Answer answer;
  answer.ttl = max_ttl;
  for (const FamilyResult* r : {&a, &aaaa}) {
    if (r->status != ARES_SUCCESS) continue;
    for (const IpAddress& addr : r->addresses) add_unique(answer.addresses, addr);
    answer.ttl = std::min(answer.ttl, r->min_ttl);
  }
  const bool definitive = is_definitive(a.status) && is_definitive(aaaa.status);
  if (!answer.addresses.empty()) {
    // The family without records, if one: its SOA lets a client cache that NODATA.
    answer.soa = bounded(is_negative(a.status) ? a.soa : aaaa.soa, negative_ttl);
    return {std::move(answer), definitive ? Outcome::Cache::positive : Outcome::Cache::no};
  }
  if (definitive) {
    answer.negative = a.status == ARES_ENOTFOUND || aaaa.status == ARES_ENOTFOUND
                          ? Answer::Negative::nxdomain
                          : Answer::Negative::nodata;
    answer.soa = bounded(a.soa ? a.soa : aaaa.soa, negative_ttl);
    answer.ttl = answer.soa ? seconds(answer.soa->ttl) : negative_ttl;
    return {std::move(answer), Outcome::Cache::negative};
  }
  if (a.status == ARES_ENOTFOUND || aaaa.status == ARES_ENOTFOUND) {
    return {make_error_code(Errc::upstream_dns_failed)};
  }
  if (a.status == ARES_ETIMEOUT || aaaa.status == ARES_ETIMEOUT) {
    return {make_error_code(Errc::upstream_timeout)};
  }
  return {make_error_code(Errc::upstream_dns_failed)};  // SERVFAIL, REFUSED, bad reply, ...
}

// A negative answer or an error: no address to dial.
bool failed(const Result<Answer>& r) {
  return !r || r->negative != Answer::Negative::none;
}

// resolve()'s contract: a negative answer is Errc::upstream_dns_failed.
Result<Answer> as_error(Result<Answer> r) {
  if (r && r->negative != Answer::Negative::none) return make_error_code(Errc::upstream_dns_failed);
  return r;
}

std::optional<IpAddress> parse_literal(const std::string& name) {
  in_addr v4{};
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) return IpAddress::v4(ntohl(v4.s_addr));
  std::array<std::uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, name.c_str(), v6.data()) == 1) return IpAddress::v6(v6);
  return std::nullopt;
}

std::vector<IpAddress> v4_then_v6(const std::vector<IpAddress>& in) {
  std::vector<IpAddress> out;
  for (const IpAddress& a : in) {
    if (a.is_v4()) add_unique(out, a);
  }
  for (const IpAddress& a : in) {
    if (!a.is_v4()) add_unique(out, a);
  }
  return out;
}

std::string normalise(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.ends_with('.')) name.pop_back();
  return name;
}

AresChannel::Config channel_config(const ResolverOptions& opts) {
  if (opts.timeout <= std::chrono::milliseconds::zero()) {
    throw std::runtime_error("dns: timeout must be positive");
  }
  AresChannel::Config config;
  for (const std::string& text : opts.servers) {
    const auto server = parse_server_address(text);
    if (!server) throw std::runtime_error("dns: bad server address '" + text + "'");
    config.servers.push_back(*server);
  }
  // With one server c-ares waits t, then 2t: three thirds give up right at the deadline. With
  // more servers it would go on longer, but the lookup's own deadline timer cuts it short.
  config.tries = 2;
  config.per_try_timeout = std::max(opts.timeout / 3, std::chrono::milliseconds(1));
  return config;
}

// One upstream lookup (A + AAAA) that every concurrent resolve() of the name waits on.
struct Flight {
  Flight(const asio::any_io_executor& ex, std::string n, steady_clock::time_point deadline)
      : name(std::move(n)), signal(ex, deadline) {}

  std::string name;
  asio::steady_timer signal;  // expires at the deadline; cancelled once `result` is set
  FamilyResult a;
  FamilyResult aaaa;
  std::optional<Result<Answer>> result;
};

}  // namespace

// Everything a Resolver owns. Shared with the coroutine frames of pending lookups so that they
// never dangle; after shutdown() it only answers "cancelled". Runs on the executor's thread.
class Resolver::Impl {
 public:
  Impl(const asio::any_io_executor& ex, ResolverOptions opts, Resolver* owner)
      : ex_(ex),
        opts_(std::move(opts)),
        cache_(opts_.max_cache_entries),
        channel_(AresChannel::create(ex_, channel_config(opts_))),
        owner_(owner) {
    for (const auto& [name, addresses] : opts_.hosts) {
      hosts_[normalise(name)] = v4_then_v6(addresses);
    }
  }
  ~Impl() { shutdown(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // `negative_as_error`: resolve()'s contract; else lookup()'s.
  static asio::awaitable<Result<Answer>> resolve(std::shared_ptr<Impl> self, std::string name,
                                                 bool negative_as_error);

  std::optional<Result<Answer>> answer_now(const std::string& name) {
    auto local = answer_locally(name);
    if (local) {
      ++stats_.lookups;
      if (failed(*local)) ++stats_.failures;
    }
    return local;
  }

  // Called by ~Resolver: settles every pending lookup as cancelled and forgets the owner.
  void shutdown() {
    if (shut_down_) return;
    shut_down_ = true;
    owner_ = nullptr;
    channel_->shutdown();  // each pending query calls back, settling its flight
    auto left = std::move(flights_);
    flights_.clear();
    for (auto& [name, flight] : left) settle(*flight, canceled());
  }

  ResolverStats stats() const { return stats_; }

 private:
  std::optional<Result<Answer>> answer_locally(const std::string& name);
  std::shared_ptr<Flight> join_or_start(const std::string& name);
  void on_reply(Flight& flight, int type, int status, std::span<const unsigned char> reply);
  void settle(Flight& flight, Result<Answer> result);
  steady_clock::time_point now() const { return opts_.now ? opts_.now() : steady_clock::now(); }

  asio::any_io_executor ex_;
  ResolverOptions opts_;
  std::unordered_map<std::string, std::vector<IpAddress>> hosts_;
  AnswerCache cache_;
  std::shared_ptr<AresChannel> channel_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;  // lookups in progress
  ResolverStats stats_;
  Resolver* owner_;  // for on_lookup; null once the Resolver is gone
  bool shut_down_ = false;
};

asio::awaitable<Result<Answer>> Resolver::Impl::resolve(std::shared_ptr<Impl> self,
                                                        std::string name, bool negative_as_error) {
  ++self->stats_.lookups;
  if (auto local = self->answer_locally(name)) {
    if (failed(*local)) ++self->stats_.failures;
    co_return negative_as_error ? as_error(std::move(*local)) : std::move(*local);
  }
  const auto started = steady_clock::now();
  const std::shared_ptr<Flight> flight = self->join_or_start(name);
  while (!flight->result) {
    const auto [ec] = co_await flight->signal.async_wait(use_tuple);
    if (flight->result) break;
    if (ec) {  // our caller cancelled this coroutine; the flight goes on for the others
      ++self->stats_.failures;
      co_return canceled();
    }
    // Deadline: return what arrived in time, without caching a half answer.
    self->settle(
        *flight,
        combine(flight->a, flight->aaaa, self->opts_.max_ttl, self->opts_.negative_ttl).result);
  }
  Result<Answer> result = *flight->result;
  if (failed(result)) ++self->stats_.failures;
  if (self->owner_ != nullptr && self->owner_->on_lookup) {
    self->owner_->on_lookup(steady_clock::now() - started, !failed(result));
  }
  co_return negative_as_error ? as_error(std::move(result)) : result;
}

std::optional<Result<Answer>> Resolver::Impl::answer_locally(const std::string& name) {
  if (shut_down_) return Result<Answer>(canceled());
  if (const auto it = hosts_.find(name); it != hosts_.end()) {
    if (it->second.empty()) return Result<Answer>(make_error_code(Errc::upstream_dns_failed));
    return Answer{it->second, opts_.max_ttl, false, Answer::Negative::none, std::nullopt};
  }
  if (const auto literal = parse_literal(name)) {
    return Answer{{*literal}, opts_.max_ttl, false, Answer::Negative::none, std::nullopt};
  }
  if (name.empty() || name.size() > kMaxNameLength || name.find('\0') != std::string::npos) {
    return Result<Answer>(make_error_code(Errc::upstream_dns_failed));
  }
  if (auto hit = cache_.find(name, now())) {
    ++stats_.cache_hits;
    Answer answer{std::move(hit->addresses), hit->ttl_left, true, Answer::Negative::none, {}};
    if (hit->negative) {
      answer.negative = hit->nxdomain ? Answer::Negative::nxdomain : Answer::Negative::nodata;
    }
    answer.soa = std::move(hit->soa);
    if (answer.soa) {  // counts down with the entry
      answer.soa->ttl = static_cast<std::uint32_t>(std::min<std::int64_t>(
          answer.soa->ttl, std::max<std::int64_t>(0, hit->ttl_left.count())));
    }
    return answer;
  }
  return std::nullopt;
}

std::shared_ptr<Flight> Resolver::Impl::join_or_start(const std::string& name) {
  if (const auto it = flights_.find(name); it != flights_.end()) return it->second;
  auto flight = std::make_shared<Flight>(ex_, name, steady_clock::now() + opts_.timeout);
  flights_.emplace(name, flight);
  for (const int type : {kTypeA, kTypeAaaa}) {
    ++stats_.upstream_queries;
    // `this` is safe: c-ares calls back only from inside channel_, which ~Impl shuts down.
    channel_->query(name, type, [this, flight, type](int status, std::span<const unsigned char> r) {
      on_reply(*flight, type, status, r);
    });
  }
  return flight;
}

void Resolver::Impl::on_reply(Flight& flight, int type, int status,
                              std::span<const unsigned char> reply) {
  if (shut_down_) {
    settle(flight, canceled());
    return;
  }
  (type == kTypeA ? flight.a : flight.aaaa) = parse_family(type, status, reply, flight.name);
  if (!flight.a.done || !flight.aaaa.done) return;
  Outcome outcome = combine(flight.a, flight.aaaa, opts_.max_ttl, opts_.negative_ttl);
  // Cached even when the deadline already settled the flight: the next lookup profits.
  if (outcome.cache == Outcome::Cache::positive) {
    cache_.put(flight.name, outcome.result->addresses, outcome.result->ttl, now(),
               outcome.result->soa);
  } else if (outcome.cache == Outcome::Cache::negative) {
    cache_.put_negative(flight.name, outcome.result->ttl, now(),
                        outcome.result->negative == Answer::Negative::nxdomain,
                        outcome.result->soa);
  }
  settle(flight, std::move(outcome.result));
}

void Resolver::Impl::settle(Flight& flight, Result<Answer> result) {
  if (flight.result) return;
  flight.result = std::move(result);
  flight.signal.cancel();  // wakes every waiter
  if (const auto it = flights_.find(flight.name);
      it != flights_.end() && it->second.get() == &flight) {
    flights_.erase(it);  // callers of settle hold their own reference to the flight
  }
}

Resolver::Resolver(asio::any_io_executor ex, ResolverOptions opts)
    : impl_(std::make_shared<Impl>(ex, std::move(opts), this)) {}

Resolver::~Resolver() {
  impl_->shutdown();
}

// Not coroutines themselves: the awaitable holds impl_, never this, so it may outlive the
// Resolver even before it starts.
asio::awaitable<Result<Answer>> Resolver::resolve(std::string name) {
  return Impl::resolve(impl_, std::move(name), true);
}

std::optional<Result<Answer>> Resolver::answer_now(const std::string& name) {
  auto local = impl_->answer_now(name);
  if (local) *local = as_error(std::move(*local));
  return local;
}

asio::awaitable<Result<Answer>> Resolver::lookup(std::string name) {
  return Impl::resolve(impl_, std::move(name), false);
}

std::optional<Result<Answer>> Resolver::lookup_now(const std::string& name) {
  return impl_->answer_now(name);
}

ResolverStats Resolver::stats() const {
  return impl_->stats();
}

}  // namespace sandgate::dns
