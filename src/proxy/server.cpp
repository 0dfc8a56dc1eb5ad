#include "proxy/server.hpp"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/version.hpp"
#include "proxy/admin.hpp"
#include "proxy/descriptors.hpp"
#include "proxy/dns_listener.hpp"
#include "proxy/host_addresses.hpp"
#include "proxy/interception.hpp"
#include "proxy/service_notify.hpp"
#include "proxy/session.hpp"
#include "proxy/upstreams/pool.hpp"
#include "proxy/upstreams/shared_h2.hpp"
#include "secrets/store.hpp"

namespace sandgate::proxy {

namespace {

// SIGTERM: open connections get kShutdownGrace, what is left kAbortGrace to unwind once
// closed, then the audit log kAuditFlushGrace: the process exits within their sum.
constexpr auto kShutdownGrace = std::chrono::seconds(5);
constexpr auto kAbortGrace = std::chrono::seconds(1);
constexpr auto kAuditFlushGrace = std::chrono::seconds(1);
using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

using ServeFn = asio::awaitable<void> (*)(tcp::socket, tcp::endpoint, WorkerDeps);

struct Listener {
  std::unique_ptr<tcp::acceptor> acceptor;
  ServeFn serve;
};

struct Worker {
  // One thread runs it, and every other thread only posts to it (reload, shutdown, the
  // credential store's answers): no other thread starts, cancels or closes an operation on
  // its sockets. So the reactor's per-descriptor locks go (UNSAFE_IO, about 2.5 % of an S3
  // tunnel's instructions); the scheduler's and the timers' locks, which posts need, stay.
  std::unique_ptr<asio::io_context> ioc =
      std::make_unique<asio::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  SessionRegistry sessions;
  std::vector<Listener> acceptors;
  std::vector<std::unique_ptr<tcp::acceptor>> dns_tcp;
  std::vector<std::unique_ptr<asio::ip::udp::socket>> dns_udp;
  std::unique_ptr<tcp::acceptor> admin;
  std::thread thread;
};

tcp::acceptor open_acceptor(asio::io_context& ioc, const tcp::endpoint& ep) {
  tcp::acceptor acceptor(ioc);
  acceptor.open(ep.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.set_option(reuse_port(true));
  if (ep.address().is_v6()) acceptor.set_option(asio::ip::v6_only(true));
  acceptor.bind(ep);
  acceptor.listen(asio::socket_base::max_listen_connections);
  return acceptor;
}

std::unique_ptr<asio::ip::udp::socket> open_udp(asio::io_context& ioc,
                                                const asio::ip::udp::endpoint& ep) {
  auto socket = std::make_unique<asio::ip::udp::socket>(ioc, ep.protocol());
  socket->set_option(asio::socket_base::reuse_address(true));
  socket->set_option(reuse_port(true));
  if (ep.address().is_v6()) socket->set_option(asio::ip::v6_only(true));
  socket->bind(ep);
  return socket;
}

// A listener on 0.0.0.0 or :: stays unspecified here: the policy takes it to mean that port
// on every address of the host, including addresses added later.
void add_self(std::vector<policy::Endpoint>& self, const tcp::endpoint& ep) {
  self.push_back({to_policy(ep.address()), ep.port()});
}

std::vector<std::string> denial_reasons() {
  std::vector<std::string> out;
  for (int i = 0; i <= static_cast<int>(policy::kLastReason); ++i) {
    const auto r = static_cast<policy::Reason>(i);
    if (r != policy::Reason::allowed_by_rule && r != policy::Reason::allowed_by_cidr &&
        r != policy::Reason::allowed_all_hosts && r != policy::Reason::allowed_host_service) {
      out.emplace_back(policy::reason_name(r));
    }
  }
  return out;
}

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(ep.port());
}

// Every second, closes the worker's idle upstream connections whose keep-alive ended (the
// pool itself looks only when a connection comes back). Ends with the worker's io_context.
asio::awaitable<void> expire_upstreams(UpstreamPool* pool, SharedH2Registry* h2,
                                       std::shared_ptr<Shared> shared) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(std::chrono::seconds(1));
    auto [ec] = co_await timer.async_wait(use_tuple);
    if (ec) co_return;
    pool->expire();
    h2->expire(shared->current().get());
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, ServeFn serve, WorkerDeps deps) {
  const auto ex = acceptor.get_executor();
  boost::system::error_code ignored;
  const std::string listener = endpoint_text(acceptor.local_endpoint(ignored));
  for (;;) {
    tcp::endpoint peer;  // filled by accept(2) itself: no getpeername per connection
    auto [ec, socket] = co_await acceptor.async_accept(peer, use_tuple);
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
    if (ec) {  // out of descriptors or memory: say so, and back off instead of spinning
      report_accept_failure(*deps.shared->metrics, ec, listener);
      asio::steady_timer pause(ex, kAcceptBackoff);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    auto shared = deps.shared;
    asio::co_spawn(ex, serve(std::move(socket), peer, deps), [shared](std::exception_ptr e) {
      if (e)
        shared->metrics->error(Errc::internal_error);  // a bug: sessions return errors as values
    });
  }
}

dns::ResolverOptions resolver_options(const config::Config& cfg) {
  dns::ResolverOptions o;
  o.servers = cfg.dns.servers;
  o.timeout = cfg.dns.timeout;
  o.max_ttl = cfg.dns.max_ttl;
  o.hosts = cfg.dns.hosts;
  return o;
}

// Reloads when a drop-in in sandboxes_dir is written, renamed into place or removed (the
// launcher's registration), after a short quiet period so one burst of changes is one reload.
// Hands the reload the names the burst touched, so that only they are looked at; nullopt
// when the kernel's event queue overflowed and names were lost. A directory that does not
// exist at start is not watched (SIGHUP still reloads). Runs on the main thread's io_context.
class DropInWatch {
 public:
  using OnChange = std::function<void(std::optional<std::vector<std::string>>)>;

  DropInWatch(asio::io_context& ioc, const std::string& dir, OnChange on_change)
      : stream_(ioc), debounce_(ioc), on_change_(std::move(on_change)) {
    if (dir.empty()) return;
    const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return;
    if (::inotify_add_watch(fd, dir.c_str(),
                            IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE) < 0) {
      ::close(fd);
      return;
    }
    stream_.assign(fd);
    read();
  }

 private:
  void read() {
    stream_.async_read_some(asio::buffer(events_),
                            [this](boost::system::error_code ec, std::size_t n) {
                              if (ec) return;
                              collect(n);
                              debounce_.expires_after(std::chrono::milliseconds(20));
                              debounce_.async_wait([this](boost::system::error_code wait_ec) {
                                if (wait_ec) return;
                                auto names = std::move(names_);
                                names_.emplace();
                                on_change_(std::move(names));
                              });
                              read();
                            });
  }

  // The names of the `n` bytes of events just read.
  void collect(std::size_t n) {
    for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
      inotify_event event;
      std::memcpy(&event, events_.data() + at, sizeof event);
      const char* name = events_.data() + at + sizeof event;
      at += sizeof event + event.len;
      if ((event.mask & IN_Q_OVERFLOW) != 0) names_.reset();
      if (names_ && event.len > 0 && at <= n)
        names_->emplace_back(name, ::strnlen(name, event.len));
    }
  }

  asio::posix::stream_descriptor stream_;
  asio::steady_timer debounce_;
  OnChange on_change_;
  std::optional<std::vector<std::string>> names_{std::in_place};  // nullopt: some were lost
  alignas(inotify_event) std::array<char, 4096> events_;
};

// Whether a reload to `next` may leave a sandbox out: when reload_config says exactly what
// changed and every sandbox it removed came back (rewritten), no session or memory of the
// sandboxes has to be looked at.
bool drops_sandboxes(const config::Config& next) {
  if (!next.changes) return true;
  const auto& [removed, added] = *next.changes;  // both sorted
  return !std::includes(added.begin(), added.end(), removed.begin(), removed.end());
}

// What `systemctl status` shows while the daemon serves.
std::string serving_status(const config::Config& cfg, unsigned n_workers) {
  return "serving " + std::to_string(cfg.sandboxes.size()) + " sandboxes with " +
         std::to_string(n_workers) + " workers";
}

// A sandboxes_dir the config names but nobody made (the example config copied to
// /etc/sandgate): made here, 0750 (drop-ins may hold sandbox tokens), and said on stderr.
// Only the directory itself: a missing parent is a mistake in the path, reported.
void ensure_sandboxes_dir(const config::Config& cfg) {
  const std::string& dir = cfg.sandboxes_dir;
  if (dir.empty() || !cfg.sandboxes_dir_named) return;
  if (::mkdir(dir.c_str(), 0750) != 0) {
    if (errno == EEXIST) return;
    throw std::runtime_error("sandboxes_dir " + dir +
                             " does not exist and cannot be created: " + std::strerror(errno));
  }
  ::chmod(dir.c_str(), 0750);  // whatever the umask
  const boost::json::object event{
      {"event", "sandboxes_dir_created"}, {"path", dir}, {"mode", "0750"}};
  std::cerr << boost::json::serialize(event) << std::endl;
}

}  // namespace

int run_server(std::shared_ptr<const config::Config> cfg) {
  const unsigned n_workers =
      cfg->workers ? cfg->workers : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned i = 0; i < n_workers; ++i) workers.push_back(std::make_unique<Worker>());

  // A peer that closed its socket makes write(2)/splice(2) fail with EPIPE; never a signal.
  ::signal(SIGPIPE, SIG_IGN);
  // Before the listeners and the audit log are opened: the connection limits need
  // descriptors, and the soft limit we were started with is often 1024. Listeners, event loops,
  // resolvers, DNS and the admin reserve take the fixed part.
  raise_descriptor_limit(descriptors_needed(cfg->limits, 64 + 16 * std::size_t{n_workers}));
  auto shared = std::make_shared<Shared>();
  std::vector<policy::Endpoint> self;
  // Signals and the host address watch are handled on the main thread.
  asio::io_context main_ioc{1};
  std::unique_ptr<HostAddressWatch> host_watch;
  boost::json::object ready{{"event", "ready"}, {"version", kVersion}, {"workers", n_workers}};
  try {
    ensure_sandboxes_dir(*cfg);
    shared->audit = std::make_shared<telemetry::AuditLog>(
        cfg->logging.audit, telemetry::AuditLog::kDefaultMaxQueuedLines,
        telemetry::AuditChainOptions{cfg->logging.audit_chain, cfg->logging.audit_signing_key,
                                     cfg->logging.audit_checkpoint_lines,
                                     cfg->logging.audit_checkpoint_interval});
    shared->metrics = std::make_shared<telemetry::Metrics>(kVersion, denial_reasons(),
                                                           telemetry::all_error_codes());
    shared->metrics->set_audit_failures_source(
        [audit = shared->audit] { return audit->write_failures(); });
    if (cfg->interception.enabled()) {
      shared->interception = make_interception(cfg->interception);
      ready["ca_fingerprint"] = shared->interception->authority->fingerprint();
      shared->metrics->set_leaf_counts_source([interception = shared->interception] {
        // Both caches: the intercepted names' and the DNS sink's.
        const tls::LeafCacheStats s = interception->leaves->stats();
        const tls::LeafCacheStats k = interception->sink_leaves->stats();
        return telemetry::Metrics::LeafCounts{s.hits + k.hits, s.misses + k.misses,
                                              s.mints + k.mints, s.mint_failures + k.mint_failures,
                                              s.size + k.size};
      });
    }
    secrets::StoreOptions store;
    store.dns = resolver_options(*cfg);  // token endpoints resolve as upstreams do
    store.log = [](std::string_view line) {
      std::cerr << boost::json::serialize(
                       boost::json::object{{"event", "credential"}, {"message", line}})
                << std::endl;
    };
    shared->credentials = std::make_shared<secrets::CredentialStore>(std::move(store));
    shared->credentials->update(cfg->credentials);
    shared->metrics->set_credentials_source([store = shared->credentials] {
      std::vector<telemetry::Metrics::CredentialCounts> out;
      for (const secrets::CredentialStats& c : store->stats()) {
        out.push_back({c.name, std::string(secrets::kind_name(c.kind)), c.refreshes, c.failures,
                       c.seconds_to_expiry, c.cache_entries});
      }
      return out;
    });
    // Before any listener: no connection is decided without the host's addresses.
    host_watch = std::make_unique<HostAddressWatch>(main_ioc, shared->host_addresses);

    // Each worker gets its own acceptor on the same port (SO_REUSEPORT): the kernel spreads
    // connections and no session ever changes thread.
    // port 0: the first worker's acceptor picks the port, the others join it.
    const auto open_listeners = [&](const std::vector<config::ListenAddress>& addresses,
                                    ServeFn serve, const char* name) {
      boost::json::array eps;
      for (const auto& listen : addresses) {
        tcp::endpoint ep(to_asio(listen.address), listen.port);
        for (auto& w : workers) {
          auto acceptor = std::make_unique<tcp::acceptor>(open_acceptor(*w->ioc, ep));
          // Every session turns Nagle off; an accepted socket inherits TCP_NODELAY from its
          // listener (Linux), which saves a setsockopt per connection.
          acceptor->set_option(tcp::no_delay(true));
          w->acceptors.push_back({std::move(acceptor), serve});
          ep = w->acceptors.back().acceptor->local_endpoint();
        }
        add_self(self, ep);
        eps.emplace_back(endpoint_text(ep));
      }
      if (!eps.empty() || std::string_view(name) == "explicit") ready[name] = std::move(eps);
    };
    open_listeners(cfg->listeners.explicit_proxy, &serve_explicit, "explicit");
    open_listeners(cfg->listeners.transparent, &serve_transparent, "transparent");
    // DNS: UDP and TCP on the same port. Port 0: the kernel picks a TCP port, which is
    // retried until UDP is free on it too.
    boost::json::array dns_eps;
    for (const auto& listen : cfg->listeners.dns) {
      tcp::endpoint ep(to_asio(listen.address), listen.port);
      for (int attempt = 0;; ++attempt) {
        try {
          for (auto& w : workers) {
            w->dns_tcp.push_back(std::make_unique<tcp::acceptor>(open_acceptor(*w->ioc, ep)));
            ep = w->dns_tcp.back()->local_endpoint();
            w->dns_udp.push_back(open_udp(*w->ioc, {ep.address(), ep.port()}));
          }
          break;
        } catch (const boost::system::system_error& e) {
          if (listen.port != 0 || attempt == 20 || e.code() != asio::error::address_in_use) throw;
          for (auto& w : workers) {
            w->dns_tcp.resize(dns_eps.size());
            w->dns_udp.resize(dns_eps.size());
          }
          ep.port(0);
        }
      }
      add_self(self, ep);
      dns_eps.emplace_back(endpoint_text(ep));
    }
    if (!dns_eps.empty()) ready["dns"] = std::move(dns_eps);
    if (cfg->listeners.admin) {
      const tcp::endpoint ep(to_asio(cfg->listeners.admin->address), cfg->listeners.admin->port);
      workers[0]->admin = std::make_unique<tcp::acceptor>(open_acceptor(*workers[0]->ioc, ep));
      add_self(self, workers[0]->admin->local_endpoint());
      ready["admin"] = endpoint_text(workers[0]->admin->local_endpoint());
    }
  } catch (const boost::system::system_error& e) {
    std::cerr << "sandgate: cannot start: " << e.code().message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "sandgate: cannot start: " << e.what() << "\n";
    return 1;
  }
  try {
    shared->snapshot.store(make_snapshot(cfg, self));
  } catch (const std::exception& e) {  // the placeholder key file
    std::cerr << "sandgate: cannot start: " << e.what() << "\n";
    return 1;
  }

  for (std::size_t index = 0; index < workers.size(); ++index) {
    workers[index]->thread = std::thread([&w = *workers[index], index, shared, cfg] {
      // "sg-worker-N" in top -H, ps -L and /proc/PID/task/*/comm (N as in worker_stalled).
      ::pthread_setname_np(::pthread_self(), ("sg-worker-" + std::to_string(index)).c_str());
      auto resolver =
          std::make_unique<dns::Resolver>(w.ioc->get_executor(), resolver_options(*cfg));
      auto upstreams = std::make_unique<UpstreamPool>(shared->metrics.get());
      auto h2_upstreams = std::make_unique<SharedH2Registry>(shared->metrics.get());
      const WorkerDeps deps{shared, resolver.get(), &w.sessions, upstreams.get(),
                            h2_upstreams.get()};
      for (auto& listener : w.acceptors) {
        asio::co_spawn(*w.ioc, accept_loop(*listener.acceptor, listener.serve, deps),
                       asio::detached);
      }
      for (auto& socket : w.dns_udp) {
        asio::co_spawn(*w.ioc, dns_udp_loop(*socket, deps), asio::detached);
      }
      for (auto& acceptor : w.dns_tcp) {
        asio::co_spawn(*w.ioc, dns_tcp_accept_loop(*acceptor, deps), asio::detached);
      }
      if (w.admin) asio::co_spawn(*w.ioc, admin_accept_loop(*w.admin, shared), asio::detached);
      asio::co_spawn(*w.ioc, expire_upstreams(upstreams.get(), h2_upstreams.get(), shared),
                     asio::detached);
      // Runs until the main thread calls stop(), even when no acceptor is left.
      auto work = asio::make_work_guard(*w.ioc);
      w.ioc->run();
      // Tear down on this thread, as the resolver requires, and before the io_context whose
      // services its timers use. Sessions were closed and have unwound by now.
      work.reset();
      upstreams->close_all();  // its sockets before the io_context; the pool after it
      h2_upstreams->close_all();
      resolver.reset();
      w.acceptors.clear();
      w.dns_udp.clear();
      w.dns_tcp.clear();
      w.admin.reset();
      w.ioc.reset();
      upstreams.reset();
      h2_upstreams.reset();
    });
  }
  asio::signal_set signals(main_ioc, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGUSR1);
  // A reload swaps the snapshot; connections of sandboxes it no longer has are closed, on
  // their own threads. False when the config was kept.
  // `changed`: the drop-ins the watch saw change; nullopt (SIGHUP): look at everything. After
  // a failed reload everything is looked at again, so that a drop-in refused then (and not
  // in the running config) keeps the next reload failing, as a whole load would.
  const auto reload_once = [&](const std::optional<std::vector<std::string>>& changed) -> bool {
    const std::uint64_t attempt = shared->reloads.begin();
    try {
      const auto current = shared->current();
      auto loaded =
          std::make_shared<const config::Config>(config::reload_config(*current->config, changed));
      // The CA and the leaves minted with it live as long as the process: a reload that
      // would change them (or turn interception on or off) is refused as a whole.
      if (loaded->interception != cfg->interception) {
        const std::string error = cfg->path +
                                  ": interception: [interception] differs from the running "
                                  "daemon's; restart sandgate to change it (nothing was reloaded)";
        shared->reloads.finish(attempt, true, {error});  // before the event a reader waits for
        std::cerr << error << "\n"
                  << R"({"event":"reload_failed"})" << std::endl;
        return false;
      }
      auto next = make_snapshot(loaded, self, current.get());
      // Applied with the rest at the next start; said now, so an operator is not left
      // wondering why a new listener does not answer.
      if (const auto fixed = config::restart_only_changes(*cfg, *loaded); !fixed.empty()) {
        boost::json::array sections;
        for (const std::string& s : fixed) sections.emplace_back(s);
        const boost::json::object event{
            {"event", "reload_ignored"},
            {"sections", std::move(sections)},
            {"message",
             "set up once at start; restart sandgate to apply (the rest of the "
             "config was reloaded)"}};
        std::cerr << boost::json::serialize(event) << std::endl;
      }
      shared->credentials->update(loaded->credentials);
      shared->snapshot.store(next);
      // Holds the new rules decide (or whose sandbox went) are decided again; grants of a
      // removed sandbox end.
      shared->holds.reconcile(*next->policy);
      shared->reloads.finish(attempt, false);
      if (!drops_sandboxes(*loaded)) {
        std::cerr << R"({"event":"reloaded"})" << std::endl;
        service::notify_status(serving_status(*next->config, n_workers));
        return true;
      }
      shared->dns_memory.retain(
          [&](const std::string& id) { return next->policy->has_sandbox(id); });
      shared->denials.retain([&](const std::string& id) { return next->policy->has_sandbox(id); });
      for (auto& w : workers) {
        asio::post(*w->ioc, [&w = *w, next] {
          for (Session* s : std::vector<Session*>(w.sessions.live.begin(), w.sessions.live.end())) {
            if (!s->sandbox.empty() && !next->policy->has_sandbox(s->sandbox)) s->abort();
          }
        });
      }
      std::cerr << R"({"event":"reloaded"})" << std::endl;
      service::notify_status(serving_status(*next->config, n_workers));
      return true;
    } catch (const config::ConfigErrors& e) {
      std::vector<std::string> errors;
      for (const auto& error : e.errors()) errors.push_back(error.to_string());
      shared->reloads.finish(attempt, true, errors);
      for (const std::string& error : errors) std::cerr << error << "\n";
      std::cerr << R"({"event":"reload_failed"})" << std::endl;
    } catch (const std::runtime_error& e) {  // the placeholder key file
      shared->reloads.finish(attempt, true, {std::string("reload: ") + e.what()});
      std::cerr << "sandgate: reload: " << e.what() << "\n"
                << R"({"event":"reload_failed"})" << std::endl;
    }
    return false;
  };
  bool failed_last = false;
  const auto reload = [&](const std::optional<std::vector<std::string>>& changed) -> bool {
    const bool ok = reload_once(failed_last ? std::nullopt : changed);
    failed_last = !ok;
    return ok;
  };
  std::function<void(const boost::system::error_code&, int)> on_signal;
  on_signal = [&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGUSR1) {
      shared->audit->reopen();
    } else if (sig == SIGHUP) {
      // systemd shows the unit "reloading" until the READY=1 that ends it, sent whatever the
      // outcome (a failed reload keeps the running config: the daemon still serves).
      service::notify_reloading();
      if (reload(std::nullopt)) {
        service::notify_ready(serving_status(*shared->current()->config, n_workers));
      } else {
        service::notify_ready("reload failed, still serving the previous config: " +
                              serving_status(*shared->current()->config, n_workers));
      }
    } else {
      main_ioc.stop();  // SIGINT/SIGTERM: shutdown follows
      return;
    }
    signals.async_wait(on_signal);
  };
  DropInWatch watch(main_ioc, cfg->sandboxes_dir,
                    [&](std::optional<std::vector<std::string>> changed) { reload(changed); });
  // Bursts of audit lines (a sandbox over its DNS budget) end in one summary line each.
  asio::steady_timer bursts(main_ioc);
  std::function<void()> summarise;
  summarise = [&] {
    bursts.expires_after(std::chrono::seconds(1));
    bursts.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      write_burst_summaries(*shared);
      summarise();
    });
  };
  summarise();
  signals.async_wait(on_signal);
  // Ready only now: a SIGTERM or SIGHUP (or a drop-in written) after the "ready" line must
  // find its handler in place, not kill the daemon or go unseen.
  shared->ready = true;
  std::cerr << boost::json::serialize(ready) << std::endl;
  service::notify_ready(serving_status(*cfg, n_workers));
  // Under a service manager's watchdog: pings at half its timeout, while every worker's event
  // loop answers (a stuck worker stops them, and systemd restarts the daemon).
  std::optional<service::WorkerHeartbeat> heartbeat;
  if (const auto timeout = service::watchdog_timeout()) {
    std::vector<asio::io_context*> loops;
    for (auto& w : workers) loops.push_back(w->ioc.get());
    heartbeat.emplace(
        main_ioc, std::move(loops), *timeout / 2, &service::notify_watchdog,
        [](std::size_t worker) {
          const std::string message = "worker " + std::to_string(worker) + " does not answer";
          service::notify_status(message);
          std::cerr << boost::json::serialize(
                           boost::json::object{{"event", "worker_stalled"}, {"worker", worker}})
                    << std::endl;
        },
        [&] {
          service::notify_status(serving_status(*shared->current()->config, n_workers));
          std::cerr << R"({"event":"workers_recovered"})" << std::endl;
        });
    heartbeat->start();
  }
  main_ioc.run();
  if (heartbeat) heartbeat->stop();
  service::notify_stopping("stopping: " + std::to_string(shared->connections.total.load()) +
                           " connections open");

  // Shutdown: stop accepting and give open connections a bounded grace period; then close
  // what is left and let those sessions unwind on their own threads before stopping.
  shared->ready = false;
  auto on_each_worker = [&](auto fn) {
    for (auto& w : workers) asio::post(*w->ioc, [&w = *w, fn] { fn(w); });
  };
  auto wait_for_sessions = [&](std::chrono::steady_clock::duration grace) {
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (shared->connections.total.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  // The readers of GET /holds/events are not sessions: ended now, on their own worker.
  shared->holds.events().close_all();
  on_each_worker([](Worker& w) {
    boost::system::error_code ignored;
    for (auto& a : w.acceptors) a.acceptor->close(ignored);
    for (auto& a : w.dns_tcp) a->close(ignored);
    for (auto& u : w.dns_udp) u->close(ignored);
    if (w.admin) w.admin->close(ignored);
  });
  wait_for_sessions(kShutdownGrace);
  on_each_worker([](Worker& w) {
    for (Session* s : std::vector<Session*>(w.sessions.live.begin(), w.sessions.live.end())) {
      s->abort();
    }
  });
  wait_for_sessions(kAbortGrace);
  for (auto& w : workers) w->ioc->stop();
  for (auto& w : workers) w->thread.join();
  write_burst_summaries(*shared, AuditBursts::Clock::time_point::max());
  // The audit log gets kAuditFlushGrace more, whatever its reader does: what a reader that
  // stopped reading has not taken by then is dropped and counted.
  shared->audit->flush_until(std::chrono::steady_clock::now() + kAuditFlushGrace);
  if (const std::uint64_t lost = shared->audit->write_failures(); lost > 0) {
    std::cerr << boost::json::serialize(
                     boost::json::object{{"event", "audit_lines_lost"}, {"lines", lost}})
              << std::endl;
  }
  std::cerr << R"({"event":"stopped"})" << std::endl;
  return 0;
}

}  // namespace sandgate::proxy
