#include "proxy/holds/event_stream.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>
#include <optional>

#include "common/version.hpp"

namespace sandgate::proxy {

namespace {

namespace bhttp = boost::beast::http;
using namespace boost::asio::experimental::awaitable_operators;
constexpr std::string_view kPath = "/holds/events";
constexpr auto kWriteTimeout = std::chrono::seconds(10);

// The sandbox of `query` ("sandbox=ID"; "" for no query), or nullopt when it is anything else.
// Sandbox ids need no percent-decoding: they are made of [A-Za-z0-9_.-] (the config's rule).
std::optional<std::string> sandbox_of(std::string_view query) {
  if (query.empty()) return std::string();
  constexpr std::string_view kKey = "sandbox=";
  if (!query.starts_with(kKey) || query.size() == kKey.size() || query.size() > kKey.size() + 64) {
    return std::nullopt;
  }
  const std::string_view id = query.substr(kKey.size());
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return std::nullopt;
  }
  return std::string(id);
}

// Writes `text` within kWriteTimeout: false when the reader is gone or stopped reading.
asio::awaitable<bool> write_within(tcp::socket& socket, const std::string& text) {
  asio::steady_timer timer(socket.get_executor(), kWriteTimeout);
  auto done = co_await (asio::async_write(socket, asio::buffer(text), use_tuple) ||
                        timer.async_wait(use_tuple));
  co_return done.index() == 0 && !std::get<0>(std::get<0>(done));
}

}  // namespace

boost::json::object hold_json(const PendingHold& p) {
  const auto since =
      std::chrono::duration_cast<std::chrono::milliseconds>(p.since.time_since_epoch()).count();
  return boost::json::object{{"id", p.id},
                             {"sandbox", p.question.sandbox},
                             {"host", p.question.host},
                             {"port", p.question.port},
                             {"mode", p.question.mode},
                             {"method", p.question.method},
                             {"path", p.question.path},
                             {"since_ms", since},
                             {"waiting", p.waiting}};
}

std::string event_text(const HoldEvent& e) {
  const bool held = e.kind == HoldEvent::Kind::held;
  const boost::json::object data = held ? hold_json(e.hold)
                                        : boost::json::object{{"id", e.hold.id},
                                                              {"sandbox", e.hold.question.sandbox},
                                                              {"host", e.hold.question.host},
                                                              {"port", e.hold.question.port},
                                                              {"outcome", outcome_name(e.outcome)}};
  // serialize() escapes every control character, so the data is one line.
  return "id: " + std::to_string(e.number) + "\nevent: " + (held ? "held" : "answered") +
         "\ndata: " + boost::json::serialize(data) + "\n\n";
}

bool is_hold_events_target(std::string_view target) {
  return target.substr(0, target.find('?')) == kPath;
}

asio::awaitable<void> serve_hold_events(tcp::socket& socket, std::shared_ptr<Shared> shared,
                                        std::string target) {
  const std::size_t mark = target.find('?');
  const std::optional<std::string> sandbox =
      sandbox_of(mark == std::string::npos ? std::string_view() : target.substr(mark + 1));
  if (!sandbox) {
    bhttp::response<bhttp::string_body> res{bhttp::status::bad_request, 11};
    res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
    res.keep_alive(false);
    res.body() = "the only query is ?sandbox=ID\n";
    res.prepare_payload();
    asio::steady_timer timer(socket.get_executor(), kWriteTimeout);
    co_await (bhttp::async_write(socket, res, use_tuple) || timer.async_wait(use_tuple));
    co_return;
  }
  HoldEvents& events = shared->holds.events();
  // Subscribed before the head goes out: a reader that has the head misses no later hold.
  const auto executor = co_await asio::this_coro::executor;
  const auto subscriber = shared->holds.subscribe(executor, std::move(*sandbox));
  struct Leave {
    HoldEvents& events;
    const std::shared_ptr<HoldEvents::Subscriber>& subscriber;
    ~Leave() { events.remove(subscriber); }
  } leave{events, subscriber};
  // The body runs until the connection closes (no length, no chunks): what every SSE client
  // reads.
  bhttp::response<bhttp::empty_body> head{bhttp::status::ok, 11};
  head.set(bhttp::field::server, std::string("sandgate/") + kVersion);
  head.set(bhttp::field::content_type, "text/event-stream");
  head.set(bhttp::field::cache_control, "no-cache");
  head.keep_alive(false);
  bhttp::response_serializer<bhttp::empty_body> serializer(head);
  {
    asio::steady_timer timer(socket.get_executor(), kWriteTimeout);
    auto written = co_await (bhttp::async_write_header(socket, serializer, use_tuple) ||
                             timer.async_wait(use_tuple));
    if (written.index() != 0 || std::get<0>(std::get<0>(written))) co_return;
  }
  for (;;) {
    HoldEvents::Batch batch = co_await events.next(subscriber, kKeepAlive);
    std::string text;
    for (const HoldEvent& e : batch.events) text += event_text(e);
    if (text.empty() && batch.open) text = ": keep-alive\n\n";
    if (!text.empty()) {
      const bool written = co_await write_within(socket, text);
      if (!written) co_return;
    }
    if (!batch.open) co_return;
  }
}

}  // namespace sandgate::proxy
