#include "launcher/commands.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "launcher/admin_client.hpp"
#include "launcher/approver.hpp"
#include "launcher/cgroup.hpp"
#include "launcher/dropin.hpp"
#include "launcher/environment.hpp"
#include "launcher/layout.hpp"
#include "launcher/outcome.hpp"
#include "launcher/session.hpp"
#include "launcher/settings.hpp"
#include "launcher/status_sink.hpp"
#include "launcher/system.hpp"
#include "secrets/placeholder.hpp"

extern char** environ;

namespace sandgate::launcher {
namespace fs = std::filesystem;
namespace {

void warn(const std::string& message) {
  std::cerr << "sandgate-launch: " << message << "\n";
}

SandboxRequest request_from(const Options& o, const char* mode) {
  return SandboxRequest{o.sandbox, o.profile, o.allow, o.netns_path, mode};
}

// setpriv arguments that drop to `user` (its uid, primary group and supplementary groups) with
// no capabilities and no way to regain them. Without this the command runs as the caller
// (root), which can leave the namespace (setns) and so must be trusted. Empty user: none.
std::vector<std::string> drop_privileges_argv(const std::string& user) {
  if (user.empty()) return {};
  const passwd* pw = ::getpwnam(user.c_str());
  if (pw == nullptr) throw LaunchError(2, "unknown user \"" + user + "\" for --user");
  return {tool_path("setpriv"),
          "--reuid=" + std::to_string(pw->pw_uid),
          "--regid=" + std::to_string(pw->pw_gid),
          "--init-groups",
          "--inh-caps=-all",
          "--bounding-set=-all",
          "--no-new-privs",
          "--"};
}

// argv the child execs once it is inside the sandbox (enter_sandbox): the command, through
// setpriv when a user is given.
std::vector<std::string> command_argv(const std::string& user,
                                      const std::vector<std::string>& command) {
  std::vector<std::string> argv = drop_privileges_argv(user);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

// The environment the command gets.
std::vector<std::string> command_environment(const Settings& settings) {
  std::vector<std::string> parent;
  for (char** e = environ; *e != nullptr; ++e) parent.emplace_back(*e);
  return sandbox_environment(parent, ca_bundle_path(settings));
}

// ... with the placeholders of the credentials sandbox `id`'s rules name, each in the `env`
// variables its credential lists (docs/credentials.md), and with every other variable any
// credential lists removed: a value the launcher's own environment had for one (a real token in
// a CI shell) never reaches the sandbox, whether or not the sandbox's rules name its credential.
// Computed from the config as the daemon now has it (the sandbox's drop-in included) and the
// key file the daemon shares.
std::vector<std::string> command_environment(const Settings& settings, const std::string& id) {
  std::vector<std::string> env = command_environment(settings);
  std::vector<std::string> declared;
  std::vector<std::string> placeholders;
  try {
    const config::Config cfg = config::load_config(settings.config_path);
    if (cfg.credentials.empty()) return env;
    declared = cfg.credential_env_names();
    const auto key = secrets::PlaceholderKey::load_or_create(cfg.placeholder_key_file);
    for (const config::PlaceholderEnv& e : cfg.placeholder_env(id, key)) {
      placeholders.push_back(e.name + "=" + e.value);
    }
  } catch (const config::ConfigErrors& e) {
    throw LaunchError(2, "the config no longer loads: " + e.errors().front().to_string());
  } catch (const std::runtime_error& e) {
    throw LaunchError(1, std::string("credential placeholders: ") + e.what());
  }
  return with_credential_variables(std::move(env), declared, placeholders);
}

// A command that cannot be found exits 127 before anything is set up, with the launcher's
// prefix (not `setpriv:`'s), as a shell would.
void check_command(const Options& o, const std::vector<std::string>& env) {
  std::optional<std::string> path;
  for (const std::string& e : env) {
    if (e.starts_with("PATH=")) path = e.substr(5);
  }
  const std::string& name = o.command.front();
  if (find_command(name, path)) return;
  if (name.find('/') != std::string::npos) {
    throw LaunchError(127, "cannot run " + name + ": no such executable file");
  }
  throw LaunchError(
      127, "command not found: " + name + " (not in PATH " + path.value_or("/bin:/usr/bin") + ")");
}

// Runs the command inside the sandbox in a session of its own (session.hpp) and returns how it
// ended. It joins the sandbox's cgroup (if any) and enters the sandbox's network namespace and
// a mount namespace of its own with a private /run (unless --share-run): enter_sandbox.
// If the launcher is killed meanwhile, its DeathWatch ends the command's session and, for
// `run` (whose sandbox is its own), everything in the sandbox's namespace and cgroup.
// With a timeout, the deadline's TERM and KILL go to the command's process group, the
// cgroup's processes and everything in an owned namespace (for --netns: the command's session).
SessionResult run_in_sandbox(const Settings& settings, const SandboxState& state, const Options& o,
                             const std::vector<std::string>& env,
                             const std::function<void()>& started = {}) {
  const std::vector<std::string> argv = command_argv(o.user, o.command);
  EnterPlan plan;
  plan.netns_path = state.netns_path();
  plan.owned_netns = state.owned_netns;
  if (state.owned_netns) plan.resolv_conf = "/etc/netns/" + state.netns + "/resolv.conf";
  plan.private_run = !o.share_run;
  plan.ca_bundle = ca_bundle_path(settings);
  const bool whole_netns = o.verb == Verb::run && state.owned_netns;
  const std::vector<std::string> cgroups =
      o.verb == Verb::run ? state.cgroups : std::vector<std::string>{};
  DeathWatch watch([whole_netns, cgroups, netns = state.netns_path()](long command) {
    kill_session(command);
    if (whole_netns) kill_processes_in_netns(netns);
    signal_cgroup(cgroups, SIGKILL);
  });
  pid_t command = -1;
  std::optional<Deadline> deadline;
  if (o.timeout) {
    const std::string netns = state.netns_path();
    deadline = Deadline{std::chrono::steady_clock::now() + *o.timeout, o.kill_after,
                        [&command, &cgroups, whole_netns, netns](int sig) {
                          if (command > 1) ::kill(-command, sig);  // its process group
                          // Each process gets `sig` once: a second TERM would run a trap
                          // again. The group's got it above.
                          std::set<pid_t> sent;
                          const auto first = [&](pid_t pid) {
                            if (command > 1 && ::getpgid(pid) == command) return false;
                            return sent.insert(pid).second;
                          };
                          signal_cgroup(cgroups, sig, first);
                          if (whole_netns) signal_processes_in_netns(netns, sig, first);
                          if (!whole_netns && command > 1) signal_session(command, sig, first);
                        },
                        [&command, &cgroups, whole_netns, netns] {
                          return cgroup_populated(cgroups) ||
                                 (whole_netns ? signal_processes_in_netns(netns, 0) > 0
                                              : command > 1 && signal_session(command, 0) > 0);
                        }};
  }
  return run_session(
      argv, env,
      [&watch, &command, &started](pid_t pid) {
        command = pid;
        watch.started(pid);
        if (started) started();
      },
      [&plan, &cgroups] {
        if (std::string error = join_cgroup(cgroups); !error.empty()) return error;
        return enter_sandbox(plan);
      },
      deadline);
}

int report_teardown(const std::string& id, const std::vector<std::string>& errors) {
  for (const std::string& e : errors) {
    warn("teardown of sandbox \"" + id + "\": " + e + "; run `sandgate-launch gc` to retry");
  }
  return errors.empty() ? 0 : 1;
}

// The daemon's denial counts of the sandbox (best effort: the status object says why they are
// missing).
std::optional<DenialSnapshot> denial_snapshot(const Settings& settings, const std::string& id,
                                              std::string* error) {
  return query_denials(settings.admin_host, settings.admin_port, id, std::chrono::seconds(3),
                       error);
}

// run: create the sandbox (and its cgroup), run the command under its limits, tear down on every
// way out, report the outcome (stderr line, exit status, and with --json the status object).
int run(const Options& o) {
  RunOutcome outcome;
  outcome.sandbox = o.sandbox;
  outcome.timeout = o.timeout;
  outcome.kill_after = o.kill_after;
  outcome.memory_bytes = o.memory;
  outcome.pids = o.pids;
  const StatusSink sink(o.verb == Verb::run && o.json, o.json_file, o.json_fd);
  const CgroupLimits limits{o.memory, o.pids};
  std::optional<Settings> settings;
  std::optional<SandboxState> state;
  // Tears the sandbox down once, on whichever way out of run comes first.
  auto teardown = [&] {
    if (!state || !settings) return;
    const SandboxState s = *state;
    state.reset();
    report_teardown(s.id, destroy_sandbox(StateDir(settings->state_dir), s, *settings,
                                          settings->ready_timeout));
  };
  try {
    block_stop_signals();
    settings = load_settings(o.config_path, true);
    std::optional<ApproverSettings> approving;
    if (!o.approve_with.empty()) {
      approving = approver_settings(*settings, o.approve_with, o.sandbox);
    }
    drop_privileges_argv(o.user);  // an unknown user fails before anything is set up
    check_command(o, command_environment(*settings));
    if (limits.any()) plan_cgroup(o.sandbox, limits);  // the host can enforce them at all
    state = create_sandbox(*settings, request_from(o, "run"));
    if (limits.any()) {
      const CgroupPlan plan = plan_cgroup(state->id, limits);
      state->cgroups = plan.dirs;  // recorded first: teardown and gc remove them
      StateDir(settings->state_dir).write(*state);
      create_cgroup(plan, limits);
    }
    const std::vector<std::string> env = command_environment(*settings, state->id);
    std::optional<DenialSnapshot> before;
    if (o.json || !o.quiet) before = denial_snapshot(*settings, state->id, &outcome.denials_error);
    // Stop signals are forwarded to the command; the launcher waits for it either way. The
    // approver starts once the command is forked (its threads must not be there at the fork
    // that enters the sandbox) and ends with it; holds pending by then come first on its stream.
    std::optional<Approver> approver;
    const SessionResult ended = run_in_sandbox(*settings, *state, o, env, [&] {
      if (approving) approver.emplace(std::move(*approving));
    });
    approver.reset();
    outcome.started = true;
    outcome.status = ended.status;
    if (ended.signal != 0) {
      outcome.signal = ended.signal;
    } else {
      outcome.exit_code = ended.exit_code;
    }
    outcome.duration = std::chrono::duration_cast<std::chrono::milliseconds>(ended.duration);
    outcome.killed_after_grace = ended.killed;
    if (limits.any()) {
      const CgroupEvents events = read_cgroup_events(state->cgroups);
      if (o.memory) outcome.oom_kills = events.oom_kills;
      if (o.pids) outcome.pids_limit_hits = events.pids_max;
    }
    if (before) {
      if (const auto after = denial_snapshot(*settings, state->id, &outcome.denials_error)) {
        outcome.denials = denials_between(*before, *after);
      }
    }
    classify(outcome, ended.timed_out);
    teardown();
    if (!outcome.error.empty()) warn(outcome.message);
    if (!o.quiet && outcome.denials) std::cerr << denial_summary(o.sandbox, *outcome.denials);
  } catch (const std::exception& e) {
    teardown();
    const auto* launch_error = dynamic_cast<const LaunchError*>(&e);
    outcome.status = launch_error != nullptr ? launch_error->exit_code() : 1;
    outcome.message = e.what();
    // A command that cannot be found is the command's failure (127, as a shell), not the
    // sandbox's.
    if (outcome.status != 127) {
      outcome.error = kSandboxCreateFailed;
      outcome.retryable = outcome.status != 2;  // 2: the request or the config must change
    } else {
      outcome.exit_code = 127;
    }
    sink.write(outcome);
    throw;
  }
  sink.write(outcome);
  return outcome.status;
}

int up(const Options& o) {
  block_stop_signals();
  const Settings settings = load_settings(o.config_path, true);
  const SandboxState state = create_sandbox(settings, request_from(o, "up"));
  std::cout << state.id << " " << state.sandbox_ip << " " << state.netns << "\n";
  return 0;
}

SandboxState find_or_throw(const Settings& settings, const std::string& id) {
  if (!valid_sandbox_id(id)) {
    throw LaunchError(2, "invalid sandbox id \"" + id + "\": " + std::string(kSandboxIdRule));
  }
  auto state = StateDir(settings.state_dir).find(id);
  if (!state) {
    throw LaunchError(1, "no sandbox \"" + id + "\" in " + settings.state_dir +
                             "; `sandgate-launch list` shows the ones there are");
  }
  return *state;
}

int exec(const Options& o) {
  const Settings settings = load_settings(o.config_path, false);
  check_privileges_and_tools();  // before the state files, which only root reads
  const SandboxState state = find_or_throw(settings, o.sandbox);
  if (!state.ready) {
    throw LaunchError(1, "sandbox \"" + o.sandbox +
                             "\" is not ready (being set up, or left by a "
                             "crashed launcher: run `sandgate-launch gc`)");
  }
  check_command(o, command_environment(settings));
  block_stop_signals();  // forwarded to the command from here on
  const std::vector<std::string> env = command_environment(settings, state.id);
  // What the daemon refused the sandbox while the command ran (best effort; other commands
  // in the same sandbox are counted too).
  std::optional<DenialSnapshot> before;
  if (!o.quiet) before = denial_snapshot(settings, state.id, nullptr);
  const int status = run_in_sandbox(settings, state, o, env).status;
  if (before) {
    if (const auto after = denial_snapshot(settings, state.id, nullptr)) {
      std::cerr << denial_summary(o.sandbox, denials_between(*before, *after));
    }
  }
  return status;
}

int down(const Options& o) {
  const Settings settings = load_settings(o.config_path, false);
  check_privileges_and_tools();
  const SandboxState state = find_or_throw(settings, o.sandbox);
  const StateDir dir(settings.state_dir);
  return report_teardown(state.id, destroy_sandbox(dir, state, settings, settings.ready_timeout));
}

// ready: set up; starting: a live launcher is still setting it up; stale: its launcher died
// before it was ready, or a `run` launcher died (gc removes it).
std::string state_word(const SandboxState& s) {
  const bool alive = process_alive(s.pid);
  if (s.ready && (s.mode == "up" || alive)) return "ready";
  return alive ? "starting" : "stale";
}

int list(const Options& o) {
  const Settings settings = load_settings(o.config_path, false);
  check_privileges();  // else the root-only state files read as "no sandboxes"
  const auto states = StateDir(settings.state_dir).all();
  if (o.json) {
    boost::json::array out;
    for (const auto& s : states) {
      out.push_back(boost::json::object{{"id", s.id},
                                        {"address", s.sandbox_ip},
                                        {"netns", s.netns},
                                        {"state", state_word(s)},
                                        {"mode", s.mode}});
    }
    std::cout << boost::json::serialize(out) << "\n";
    return 0;
  }
  for (const auto& s : states) {
    std::cout << s.id << " " << s.sandbox_ip << " " << s.netns << " " << state_word(s) << "\n";
  }
  return 0;
}

int gc(const Options& o) {
  const Settings settings = load_settings(o.config_path, false);
  check_privileges_and_tools();
  const StateDir dir(settings.state_dir);
  const StateLock lock(dir);
  int status = 0;
  std::set<std::string> known;  // links, tables, netns and drop-ins of live sandboxes
  for (const SandboxState& s : dir.all()) {
    if (state_word(s) == "stale") {
      const auto errors = destroy_sandbox(dir, s, settings, std::chrono::milliseconds(0));
      if (report_teardown(s.id, errors) != 0) status = 1;
      if (errors.empty()) std::cout << "removed sandbox " << s.id << "\n";
      continue;
    }
    known.insert({s.host_if, s.table, s.netns, s.dropin});
  }
  // Only what this state directory made (its marks): names are host-wide, so another
  // config's sandboxes have links, tables and drop-ins of the same shape.
  const std::set<std::string> links = current_links();
  for (const std::string& link : dir.marks("links")) {
    if (known.contains(link)) continue;
    if (links.contains(link) && !run_tool({"ip", "link", "del", link}).ok()) continue;
    dir.unmark("links", link);
    if (links.contains(link)) std::cout << "removed link " << link << "\n";
  }
  const std::set<std::string> tables = current_inet_tables();
  for (const std::string& table : dir.marks("tables")) {
    if (known.contains(table)) continue;
    if (tables.contains(table) && !run_tool({"nft", "delete", "table", "inet", table}).ok()) {
      continue;
    }
    dir.unmark("tables", table);
    if (tables.contains(table)) std::cout << "removed nft table inet " << table << "\n";
  }
  // Namespaces are global, not per network namespace: only those this state_dir created.
  for (const std::string& name : dir.marks("netns")) {
    if (known.contains(name)) continue;
    kill_processes_in_netns("/run/netns/" + name);
    if (fs::exists("/run/netns/" + name) && !run_tool({"ip", "netns", "del", name}).ok()) continue;
    std::error_code ignored;
    fs::remove_all("/etc/netns/" + name, ignored);
    dir.unmark("netns", name);
    std::cout << "removed netns " << name << "\n";
  }
  for (const std::string& name : dir.marks("dropins")) {
    const std::string path = settings.sandboxes_dir + "/" + name;
    if (settings.sandboxes_dir.empty() || known.contains(path)) continue;
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    if (in && is_launcher_dropin(first) && ::unlink(path.c_str()) == 0) {
      std::cout << "removed drop-in " << path << "\n";
    }
    if (!fs::exists(path)) dir.unmark("dropins", name);
  }
  return status;
}

// `env`: what a client outside any launched sandbox (one that uses the explicit proxy, a
// sidecar) needs to be treated as sandbox `id` is: the CA bundle (the system roots, sandgate's
// CA, launcher.ca_file; written now) in every variable common clients read, and the
// sandbox's credential placeholders. Shell lines (`eval "$(sandgate-launch env ...)"`); the
// values are paths and placeholders, never a secret.
int print_env(const Options& o) {
  const Settings settings = load_settings(o.config_path, false);
  write_ca_bundle(settings);
  const auto quoted = [](const std::string& value) {
    std::string out = "'";
    for (const char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  for (const std::string_view name : kCaVariables) {
    std::cout << "export " << name << "=" << quoted(ca_bundle_path(settings)) << "\n";
  }
  try {
    const config::Config cfg = config::load_config(settings.config_path);
    if (cfg.find_sandbox(o.sandbox) == nullptr) {
      warn("no sandbox \"" + o.sandbox + "\" in " + settings.config_path +
           ": only the CA bundle (placeholders are per sandbox)");
      return 0;
    }
    if (cfg.credentials.empty()) return 0;
    const auto key = secrets::PlaceholderKey::load_or_create(cfg.placeholder_key_file);
    for (const config::PlaceholderEnv& e : cfg.placeholder_env(o.sandbox, key)) {
      std::cout << "export " << e.name << "=" << quoted(e.value) << "\n";
    }
  } catch (const config::ConfigErrors& e) {
    throw LaunchError(2, "the config does not load: " + e.errors().front().to_string());
  } catch (const std::runtime_error& e) {
    throw LaunchError(1, std::string("credential placeholders: ") + e.what());
  }
  return 0;
}

}  // namespace

int run_command(const Options& o) {
  switch (o.verb) {
    case Verb::run:
      return run(o);
    case Verb::up:
      return up(o);
    case Verb::exec:
      return exec(o);
    case Verb::down:
      return down(o);
    case Verb::list:
      return list(o);
    case Verb::gc:
      return gc(o);
    case Verb::env:
      return print_env(o);
    case Verb::help:
      std::cout << usage_text(o.help_command);
      return 0;
  }
  return 2;
}

}  // namespace sandgate::launcher
