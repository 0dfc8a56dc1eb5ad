#include "proxy/admin.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "common/version.hpp"
#include "proxy/descriptors.hpp"
#include "proxy/upstream.hpp"

namespace sandgate::proxy {

namespace {

namespace bhttp = boost::beast::http;
using namespace boost::asio::experimental::awaitable_operators;
constexpr auto kAdminTimeout = std::chrono::seconds(10);
constexpr std::string_view kDenialsSuffix = "/denials";

// GET /sandboxes/ID/denials: the sandbox's refusal counts since its counts began (`epoch`);
// a reader subtracts an earlier answer of the same epoch to get what happened in between.
boost::json::object denials_json(std::string_view id, const DenialCounts::View& view) {
  boost::json::array entries;
  for (const DenialCounts::Entry& e : view.entries) {
    boost::json::object o{{"protocol", e.protocol}, {"host", e.host},   {"port", nullptr},
                          {"reason", e.reason},     {"count", e.count}, {"suggestion", nullptr}};
    if (e.port != 0) o["port"] = e.port;
    if (!e.suggestion.empty()) o["suggestion"] = e.suggestion;
    entries.push_back(std::move(o));
  }
  return boost::json::object{{"id", id},
                             {"epoch", view.epoch},
                             {"total", view.total},
                             {"overflow", view.overflow},
                             {"denials", std::move(entries)}};
}

// GET /sandboxes/ID's `reload`: how the daemon's config reloads went, so that a launcher
// waiting for its sandbox can tell "not yet" from "refused" (ReloadStatus).
boost::json::object reload_json(const ReloadStatus::View& v) {
  boost::json::array errors;
  for (const std::string& e : v.errors) errors.emplace_back(e);
  return boost::json::object{{"started", v.started},
                             {"finished", v.finished},
                             {"failed", v.failed},
                             {"errors", std::move(errors)},
                             {"more_errors", v.more_errors}};
}

bhttp::response<bhttp::string_body> respond(const bhttp::request<bhttp::string_body>& req,
                                            const Shared& shared) {
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
  res.set(bhttp::field::server, std::string("sandgate/") + kVersion);
  res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(false);
  const std::string_view target = req.target();
  auto json = [&](const boost::json::value& v) {
    res.set(bhttp::field::content_type, "application/json");
    res.body() = boost::json::serialize(v) + "\n";
  };
  if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
    res.result(bhttp::status::method_not_allowed);
    res.body() = "only GET\n";
  } else if (target == "/metrics") {
    res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.body() = shared.metrics->serialize();
  } else if (target == "/healthz") {
    res.body() = "ok\n";
  } else if (target == "/readyz") {
    const bool ready = shared.ready.load();
    res.result(ready ? bhttp::status::ok : bhttp::status::service_unavailable);
    res.body() = ready ? "ready\n" : "starting\n";
  } else if (target == "/sandboxes") {
    const auto snap = shared.current();
    boost::json::array ids;
    for (const auto& sb : snap->config->sandboxes) ids.emplace_back(sb.spec.id);
    json(boost::json::object{{"sandboxes", std::move(ids)}});
  } else if (target.starts_with("/sandboxes/") && target.ends_with(kDenialsSuffix)) {
    const auto id = target.substr(
        std::string_view("/sandboxes/").size(),
        target.size() - std::string_view("/sandboxes/").size() - kDenialsSuffix.size());
    const auto snap = shared.current();
    if (const config::Sandbox* sb = snap->config->find_sandbox(id)) {
      json(denials_json(sb->spec.id, shared.denials.view(id)));
    } else {
      res.result(bhttp::status::not_found);
      json(boost::json::object{{"id", id}, {"active", false}});
    }
  } else if (target.starts_with("/sandboxes/")) {
    const auto id = target.substr(std::string_view("/sandboxes/").size());
    const auto snap = shared.current();
    if (const config::Sandbox* sb = snap->config->find_sandbox(id)) {
      json(boost::json::object{{"id", sb->spec.id},
                               {"profile", sb->profile},
                               {"active", true},
                               {"reload", reload_json(shared.reloads.view())}});
    } else {
      res.result(bhttp::status::not_found);
      json(boost::json::object{
          {"id", id}, {"active", false}, {"reload", reload_json(shared.reloads.view())}});
    }
  } else {
    res.result(bhttp::status::not_found);
    res.body() = "not found\n";
  }
  res.prepare_payload();
  return res;
}

asio::awaitable<void> serve_admin(tcp::socket socket, std::shared_ptr<Shared> shared,
                                  std::shared_ptr<DescriptorReserve> reserve) {
  boost::beast::flat_buffer buffer;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(0);
  asio::steady_timer timer(socket.get_executor(), kAdminTimeout);
  auto read = co_await (bhttp::async_read(socket, buffer, parser, use_tuple) ||
                        timer.async_wait(use_tuple));
  if (read.index() == 0 && !std::get<0>(std::get<0>(read))) {
    auto res = respond(parser.get(), *shared);
    timer.expires_after(kAdminTimeout);
    co_await (bhttp::async_write(socket, res, use_tuple) || timer.async_wait(use_tuple));
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  // Close first, so the reserve can have the descriptor this connection held.
  socket.close(ignored);
  reserve->take();
}

}  // namespace

asio::awaitable<void> admin_accept_loop(tcp::acceptor& acceptor, std::shared_ptr<Shared> shared) {
  const auto ex = acceptor.get_executor();
  boost::system::error_code ignored;
  const tcp::endpoint local = acceptor.local_endpoint(ignored);
  const std::string listener = (local.address().is_v6() ? "[" + local.address().to_string() + "]"
                                                        : local.address().to_string()) +
                               ":" + std::to_string(local.port());
  // Taken now, while descriptors are plenty; lives on this worker's thread with this loop.
  const auto reserve = std::make_shared<DescriptorReserve>();
  for (;;) {
    reserve->take();  // a no-op while held; else try to get it back
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      report_accept_failure(*shared->metrics, ec, listener);
      // Out of descriptors: free the reserved one and take the waiting connection with it
      // at once, before another thread's accept or dial can have it.
      if (is_local_exhaustion(ec) && reserve->release()) {
        tcp::socket retry(ex);
        acceptor.non_blocking(true, ignored);
        acceptor.accept(retry, ec);
        if (!ec) {
          asio::co_spawn(ex, serve_admin(std::move(retry), shared, reserve), asio::detached);
          continue;
        }
      }
      asio::steady_timer pause(ex, kAcceptBackoff);  // never spin on a failing accept
      co_await pause.async_wait(use_tuple);
      continue;
    }
    asio::co_spawn(ex, serve_admin(std::move(socket), shared, reserve), asio::detached);
  }
}

}  // namespace sandgate::proxy
