#include "proxy/admin.hpp"

#include <openssl/crypto.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "common/ascii.hpp"
#include "common/version.hpp"
#include "proxy/descriptors.hpp"
#include "proxy/holds/event_stream.hpp"
#include "proxy/upstream.hpp"
#include "secrets/encoding.hpp"
#include "secrets/secret_file.hpp"

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

// GET /holds: the destinations held for an answer, oldest first.
boost::json::object holds_json(const Holds& holds) {
  boost::json::array out;
  for (const Holds::Pending& p : holds.pending()) out.push_back(hold_json(p));
  return boost::json::object{{"holds", std::move(out)}};
}

// Whether a write call carries the token of listeners.admin_token_file (read at each call, so
// a rotated token counts at once): "" when it does, else why not.
std::string unauthorized(const bhttp::request<bhttp::string_body>& req, const Shared& shared) {
  const std::string& file = shared.current()->config->listeners.admin_token_file;
  if (file.empty()) return "write calls need listeners.admin_token_file";
  const secrets::AdminToken token = secrets::read_admin_token(file);
  if (!token.file.ok()) return "the admin token file cannot be read";
  const std::string_view expected = token.value();
  const std::string_view given = req[bhttp::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (expected.empty() || !given.starts_with(kBearer)) return "no Bearer token";
  const std::string a = secrets::sha256(given.substr(kBearer.size()));
  const std::string b = secrets::sha256(expected);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0 ? "" : "wrong token";
}

// POST /holds/ID {"action": "allow_once" | "allow_sandbox" | "deny", "ttl_s": N, "message": ...}
void answer_hold(std::string_view id_text, const std::string& body, Shared& shared,
                 bhttp::response<bhttp::string_body>& res) {
  const auto fail = [&](bhttp::status status, std::string_view why) {
    res.result(status);
    res.set(bhttp::field::content_type, "application/json");
    res.body() = boost::json::serialize(boost::json::object{{"error", why}}) + "\n";
  };
  std::uint64_t id = 0;
  for (const char c : id_text) {
    if (c < '0' || c > '9' || id > (UINT64_MAX - 9) / 10)
      return fail(bhttp::status::not_found, "no such hold");
    id = id * 10 + static_cast<std::uint64_t>(c - '0');
  }
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(body, ec);
  const boost::json::object* o = ec ? nullptr : parsed.if_object();
  const boost::json::value* action = o ? o->if_contains("action") : nullptr;
  if (action == nullptr || !action->is_string()) {
    return fail(bhttp::status::bad_request,
                "expected {\"action\": \"allow_once\" | \"allow_sandbox\" | \"deny\"}");
  }
  Holds::Action a;
  if (action->as_string() == "allow_once") {
    a = Holds::Action::allow_once;
  } else if (action->as_string() == "allow_sandbox") {
    a = Holds::Action::allow_sandbox;
  } else if (action->as_string() == "deny") {
    a = Holds::Action::deny;
  } else {
    return fail(bhttp::status::bad_request, "action: allow_once, allow_sandbox or deny");
  }
  std::int64_t ttl = 0;
  if (const boost::json::value* v = o->if_contains("ttl_s")) {
    if (!v->is_int64() || v->as_int64() < 0)
      return fail(bhttp::status::bad_request, "ttl_s: seconds, 0 or more");
    ttl = v->as_int64();
  }
  std::string message;
  if (const boost::json::value* v = o->if_contains("message")) {
    if (!v->is_string() || v->as_string().size() > 1024) {
      return fail(bhttp::status::bad_request, "message: a string of at most 1024 bytes");
    }
    message = std::string(v->as_string());
    for (char& c : message) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // one line, no controls
    }
  }
  // Found before it is answered, for the audit line.
  std::optional<Holds::Pending> found;
  for (Holds::Pending& p : shared.holds.pending()) {
    if (p.id == id) found = std::move(p);
  }
  if (!found || !shared.holds.answer(id, a, std::chrono::seconds(ttl), message)) {
    return fail(bhttp::status::not_found, "no such hold (answered, or expired)");
  }
  telemetry::AuditRecord r;
  r.event = "hold_answered";
  r.outcome = "success";
  r.sandbox_id = found->question.sandbox;
  r.protocol = found->question.mode;
  r.host = found->question.host;
  r.port = found->question.port;
  r.method = found->question.method;
  r.url_path = found->question.path;
  r.reason = action->as_string();
  r.rule = "holds";
  r.operator_message = message;
  shared.audit->write(r);
  shared.metrics->hold_answered(action->as_string());
  res.set(bhttp::field::content_type, "application/json");
  res.body() =
      boost::json::serialize(boost::json::object{{"id", id}, {"answered", action->as_string()}}) +
      "\n";
}

// DELETE /sandboxes/ID/grants[/HOST:PORT]: ends the sandbox's grants (all, or one), which a
// reload keeps.
void revoke_grants(std::string_view rest, Shared& shared,
                   bhttp::response<bhttp::string_body>& res) {
  const std::size_t slash = rest.find('/');
  const std::string_view id = rest.substr(0, slash);
  const std::string_view tail = slash == std::string_view::npos ? "" : rest.substr(slash);
  constexpr std::string_view kOne = "/grants/";
  const std::string_view destination =
      tail.starts_with(kOne) ? tail.substr(kOne.size()) : std::string_view();
  res.set(bhttp::field::content_type, "application/json");
  if (tail != "/grants" && destination.empty()) {
    res.result(bhttp::status::not_found);
    res.body() = "{\"error\":\"DELETE /sandboxes/ID/grants or /sandboxes/ID/grants/HOST:PORT\"}\n";
    return;
  }
  if (!shared.current()->policy->has_sandbox(id)) {
    res.result(bhttp::status::not_found);
    res.body() = "{\"error\":\"no such sandbox\"}\n";
    return;
  }
  const std::size_t revoked = shared.holds.revoke(id, destination);
  telemetry::AuditRecord r;
  r.event = "grants_revoked";
  r.outcome = "success";
  r.sandbox_id = id;
  r.host = destination;
  r.rule = "holds";
  shared.audit->write(r);
  res.body() =
      boost::json::serialize(boost::json::object{{"sandbox", id}, {"revoked", revoked}}) + "\n";
}

bhttp::response<bhttp::string_body> respond(const bhttp::request<bhttp::string_body>& req,
                                            Shared& shared) {
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
  res.set(bhttp::field::server, std::string("sandgate/") + kVersion);
  res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(false);
  const std::string_view target = req.target();
  auto json = [&](const boost::json::value& v) {
    res.set(bhttp::field::content_type, "application/json");
    res.body() = boost::json::serialize(v) + "\n";
  };
  constexpr std::string_view kHolds = "/holds/";
  constexpr std::string_view kSandboxes = "/sandboxes/";
  const bool answers = req.method() == bhttp::verb::post && target.starts_with(kHolds);
  const bool revokes = req.method() == bhttp::verb::delete_ && target.starts_with(kSandboxes);
  if (answers || revokes) {
    if (const std::string why = unauthorized(req, shared); !why.empty()) {
      res.result(bhttp::status::unauthorized);
      res.set(bhttp::field::www_authenticate, "Bearer");
      res.body() = why + "\n";
    } else if (answers) {
      answer_hold(target.substr(kHolds.size()), req.body(), shared, res);
    } else {
      revoke_grants(target.substr(kSandboxes.size()), shared, res);
    }
  } else if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
    res.result(bhttp::status::method_not_allowed);
    res.body() = "only GET (and POST /holds/ID, DELETE /sandboxes/ID/grants)\n";
  } else if (target == "/holds") {
    json(holds_json(shared.holds));
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
      boost::json::array grants;
      for (const Holds::Grant& g : shared.holds.grants(sb->spec.id)) {
        boost::json::object o{{"destination", g.destination}, {"until_ms", nullptr}};
        if (g.until) {
          o["until_ms"] =
              std::chrono::duration_cast<std::chrono::milliseconds>(g.until->time_since_epoch())
                  .count();
        }
        grants.push_back(std::move(o));
      }
      json(boost::json::object{{"id", sb->spec.id},
                               {"profile", sb->profile},
                               {"active", true},
                               {"granted", std::move(grants)},
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
  parser.body_limit(4096);  // only POST /holds/ID has a body
  asio::steady_timer timer(socket.get_executor(), kAdminTimeout);
  auto read = co_await (bhttp::async_read(socket, buffer, parser, use_tuple) ||
                        timer.async_wait(use_tuple));
  const bool stream = read.index() == 0 && !std::get<0>(std::get<0>(read)) &&
                      parser.get().method() == bhttp::verb::get &&
                      is_hold_events_target(parser.get().target());
  if (stream) {
    std::string target(parser.get().target());
    co_await serve_hold_events(socket, shared, std::move(target));
  } else if (read.index() == 0 && !std::get<0>(std::get<0>(read))) {
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
