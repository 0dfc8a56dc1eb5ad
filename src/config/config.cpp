#include "config/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <tuple>
#include <utility>

#include "config/credentials.hpp"
#include "config/load_state.hpp"
#include "config/sandboxes.hpp"
#include "config/sections.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config {

namespace {

namespace fs = std::filesystem;
using detail::ErrorSink;

constexpr std::string_view kDefaultSandboxesDir = "sandboxes.d";
constexpr std::int64_t kMaxWorkers = 1024;

// Everything one load collects: the errors of every file, each ranked by when its file was
// read, so the final list is ordered main file first, then drop-ins by name.
class Loader {
 public:
  ErrorSink sink_for(std::string file) { return ErrorSink(errors_, std::move(file), files_++); }

  [[noreturn]] void throw_errors() {
    std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.order, a.error.line, a.error.column) <
             std::tie(b.order, b.error.line, b.error.column);
    });
    std::vector<ConfigError> errors;
    errors.reserve(errors_.size());
    for (auto& entry : errors_) errors.push_back(std::move(entry.error));
    throw ConfigErrors(std::move(errors));
  }

  bool failed() const { return !errors_.empty(); }

 private:
  std::vector<ErrorSink::Entry> errors_;
  std::size_t files_ = 0;
};

fs::path resolve(const fs::path& base_dir, const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() ? p : (base_dir / p).lexically_normal();
}

// Reads every "*.toml" in `dir` (by name; dot-files and other entries skipped). A missing
// directory holds no sandboxes: the daemon makes it at start (a copied example config names
// one that is not there yet), and --check-config says so.
// Each file read is stamped in `stamps` (by path, sorted); a drop-in name that is a link sets
// state.links.
void load_drop_ins(const fs::path& dir, const toml::source_region* key_where, Loader& loader,
                   ErrorSink& main_sink, detail::SandboxCollector& sandboxes,
                   detail::LoadState& state,
                   std::vector<std::pair<std::string, detail::FileStamp>>& stamps) {
  const auto report = [&](const std::string& message) {
    if (key_where != nullptr) {
      main_sink.add(*key_where, "sandboxes_dir", message);
    } else {
      main_sink.add_unlocated("sandboxes_dir", message);
    }
  };
  const std::string shown = detail::in_quotes(dir.string());
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::not_found) return;
  if (ec) {
    report("cannot access " + shown + ": " + ec.message());
    return;
  }
  if (!fs::is_directory(status)) {
    report(shown + " is not a directory");
    return;
  }

  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& file = it->path();
    std::error_code type_ec;
    if (!detail::is_drop_in_name(file.filename().string())) continue;
    if (it->is_symlink(type_ec) || type_ec) state.links = true;
    if (!it->is_regular_file(type_ec)) continue;
    files.push_back(file);
  }
  if (ec) {
    report("cannot list " + shown + ": " + ec.message());
    return;
  }
  std::sort(files.begin(), files.end());

  for (const fs::path& file : files) {
    ErrorSink sink = loader.sink_for(file.string());
    // Stamped before it is read: a change in between is seen (and read) at the next reload.
    const auto stamp = detail::stamp_of(file.string());
    const auto text = detail::read_file(file.string(), sink);
    if (!text) continue;
    if (stamp) stamps.emplace_back(file.string(), *stamp);
    if (const auto root = detail::parse_toml(*text, sink.file(), sink)) {
      sandboxes.read_drop_in(*root, sink, text->starts_with(kLauncherDropinMarker));
    }
  }
}

}  // namespace

std::string ListenAddress::dial_host() const {
  const bool any = address.is_v4() ? address.v4_value() == 0 : address == policy::IpAddress::v6({});
  return any ? (address.is_v4() ? "127.0.0.1" : "::1") : address.to_string();
}

namespace detail {

void check_placeholder_env(const Config& config, const SandboxList& sandboxes, ErrorSink& sink) {
  for (const Sandbox& sandbox : sandboxes) {
    std::vector<const std::vector<secrets::InjectRule>*> rule_sets{&sandbox.inject};
    if (const auto it = config.profile_inject.find(sandbox.profile);
        it != config.profile_inject.end()) {
      rule_sets.push_back(&it->second);
    }
    std::map<std::string, std::string> owner;  // variable -> credential
    for (const auto* rules : rule_sets) {
      for (const secrets::InjectRule& rule : *rules) {
        const secrets::CredentialSpec* spec = config.find_credential(rule.credential);
        if (spec == nullptr) continue;
        for (const std::string& env : spec->env) {
          const auto [it, fresh] = owner.emplace(env, spec->name);
          if (fresh || it->second == spec->name) continue;
          sink.add_unlocated((sandbox.in_drop_in ? sandbox.file + ": " : std::string()) +
                                 "sandboxes." + sandbox.spec.id,
                             "credentials " + detail::in_quotes(it->second) + " and " +
                                 detail::in_quotes(spec->name) + " both set " + env +
                                 " (env) in this sandbox");
        }
      }
    }
  }
}

// Keys that make sandgate terminate TLS need a CA to do it with: without [interception], each
// one is an error where it is written (a drop-in's sandbox: named by its file).
constexpr std::string_view kNeedsInterception =
    "needs [interception] ca_cert and ca_key (create them with `sandgate ca init DIR`): "
    "sandgate terminates TLS for these hosts";

void require_interception_in_drop_ins(const SandboxList& sandboxes, ErrorSink& sink) {
  const auto inspects = [](const policy::RuleLists& lists) {
    return !lists.inspect.empty() || !lists.inspect_addresses.empty() ||
           !lists.http_rules.empty() || !lists.git_rules.empty();
  };
  for (const Sandbox& sandbox : sandboxes) {
    const policy::SandboxSpec& spec = sandbox.spec;
    if (sandbox.in_drop_in &&
        (inspects(spec) || (spec.profile && inspects(*spec.profile)) || !sandbox.inject.empty())) {
      sink.add_unlocated(sandbox.file + ": sandboxes." + spec.id, kNeedsInterception);
    }
  }
}

}  // namespace detail

namespace {

// Keys that make sandgate terminate TLS need a CA to do it with: without [interception], each
// one is an error where it is written (a drop-in's sandbox: named by its file).
void require_interception(const toml::table& root, const SandboxList& sandboxes, ErrorSink& sink) {
  for (const std::string_view section : {"profiles", "sandboxes"}) {
    const toml::table* tables = root.get_as<toml::table>(section);
    if (tables == nullptr) continue;
    for (const auto& [name, node] : *tables) {
      const toml::table* table = node.as_table();
      if (table == nullptr) continue;
      for (const std::string_view key : {"inspect", "http_rules", "git", "inject"}) {
        if (const toml::node* value = table->get(key)) {
          sink.add(value->source(),
                   std::string(section) + "." + std::string(name.str()) + "." + std::string(key),
                   detail::kNeedsInterception);
        }
      }
    }
  }
  detail::require_interception_in_drop_ins(sandboxes, sink);
}

// The drop-ins read (`stamps`) with the sandbox each defines, and every sandbox's source
// addresses, for reload_config.
void index_sandboxes(const SandboxList& sandboxes,
                     std::vector<std::pair<std::string, detail::FileStamp>> stamps,
                     detail::LoadState& state) {
  std::map<std::string_view, std::string_view> id_of_file;
  std::vector<std::pair<policy::IpAddress, std::string>> sources;
  for (const Sandbox& sandbox : sandboxes) {
    if (sandbox.in_drop_in) id_of_file.emplace(sandbox.file, sandbox.spec.id);
    for (const policy::IpAddress& source : sandbox.sources) {
      sources.emplace_back(source, sandbox.spec.id);
    }
  }
  std::sort(stamps.begin(), stamps.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, detail::LoadState::DropIn>> drop_ins;
  drop_ins.reserve(stamps.size());
  for (auto& [path, stamp] : stamps) {
    const auto id = id_of_file.find(path);
    drop_ins.push_back(
        {std::move(path), {stamp, id != id_of_file.end() ? std::string(id->second) : ""}});
  }
  state.drop_ins =
      common::ChunkedMap<std::string, detail::LoadState::DropIn>::from_sorted(std::move(drop_ins));
  std::sort(sources.begin(), sources.end());  // unique: a load with a duplicate failed
  state.sources =
      common::ChunkedMap<policy::IpAddress, std::string>::from_sorted(std::move(sources));
}

Config load(std::string_view text, const std::string& name, Loader& loader, ErrorSink& sink) {
  Config config;
  config.path = name;
  const auto root = detail::parse_toml(text, name, sink);
  if (!root) return config;
  auto state = std::make_shared<detail::LoadState>();

  check_known_keys(*root, "",
                   {"workers", "sandboxes_dir", "listeners", "limits", "dns", "log", "launcher",
                    "interception", "credentials", "profiles", "sandboxes"},
                   sink);
  const fs::path base_dir = fs::path(name).parent_path();
  if (const toml::node* node = root->get("workers")) {
    // In [0, kMaxWorkers], so the cast cannot truncate.
    config.workers =
        static_cast<unsigned>(detail::read_int(*node, "workers", 0, kMaxWorkers, sink).value_or(0));
  }
  const toml::node* listeners = root->get("listeners");
  config.listeners =
      listeners != nullptr ? detail::read_listeners(*listeners, sink) : detail::default_listeners();
  if (const toml::node* node = root->get("limits")) {
    config.limits = detail::read_limits(*node, sink);
  }
  if (const toml::node* node = root->get("dns")) config.dns = detail::read_dns(*node, sink);
  if (const toml::node* node = root->get("log")) {
    config.logging = detail::read_logging(*node, base_dir, sink);
  }

  if (const toml::node* node = root->get("launcher")) {
    config.launcher = detail::read_launcher(*node, base_dir, sink);
  }

  if (const toml::node* node = root->get("interception")) {
    config.interception = detail::read_interception(*node, base_dir, sink);
  }

  detail::CredentialsSection credentials;
  if (const toml::node* node = root->get("credentials")) {
    credentials = detail::read_credentials(*node, base_dir, sink);
  }
  // A token endpoint trusts what the upstream leg trusts (a private GitHub Enterprise's CA,
  // a test CA), unless its credential names a ca_file of its own.
  for (auto& [unused, spec] : credentials.credentials) {
    if (secrets::uses_https(spec.kind) && spec.ca_file.empty()) {
      spec.ca_file = config.interception.upstream_ca_file;
    }
  }
  detail::Profiles profiles;
  if (const toml::node* node = root->get("profiles")) {
    profiles = detail::read_profiles(*node, credentials.credentials, sink);
  }
  detail::SandboxCollector sandboxes(profiles, credentials.credentials, config.launcher.pool);
  if (const toml::node* node = root->get("sandboxes")) sandboxes.read_main_table(*node, sink);

  const toml::node* dir_node = root->get("sandboxes_dir");
  std::optional<std::string> dir(kDefaultSandboxesDir);
  if (dir_node != nullptr) dir = detail::read_string(*dir_node, "sandboxes_dir", sink);
  std::vector<std::pair<std::string, detail::FileStamp>> stamps;
  if (dir && !dir->empty()) {
    const fs::path resolved = resolve(base_dir, *dir);
    config.sandboxes_dir = resolved.string();
    config.sandboxes_dir_named = dir_node != nullptr;
    load_drop_ins(resolved, dir_node != nullptr ? &dir_node->source() : nullptr, loader, sink,
                  sandboxes, *state, stamps);
  }
  config.sandboxes = SandboxList::from_sorted(sandboxes.take());
  index_sandboxes(config.sandboxes, std::move(stamps), *state);
  for (auto& [unused, spec] : credentials.credentials) config.credentials.push_back(spec);
  for (auto& [profile_name, rules] : profiles) {
    if (!rules.inject.empty()) config.profile_inject.emplace(profile_name, rules.inject);
  }
  config.placeholder_key_file =
      !credentials.placeholder_key_file.empty()
          ? credentials.placeholder_key_file
          : (fs::path(config.launcher.state_dir) / "placeholder.key").string();
  detail::check_placeholder_env(config, config.sandboxes, sink);
  // Checked once everything else reads cleanly, so that it never buries the errors above.
  if (!config.interception.enabled() && !sink.any()) {
    require_interception(*root, config.sandboxes, sink);
  }
  // The sandboxes' specs point at the profiles' lists (shared_ptr), not into the map.
  state->main = std::make_shared<const detail::LoadState::Main>(detail::LoadState::Main{
      std::string(text), std::move(profiles), std::move(credentials.credentials)});
  config.load_state = std::move(state);
  return config;
}

std::string join_errors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& error : errors) {
    if (!out.empty()) out += '\n';
    out += error.to_string();
  }
  return out;
}

}  // namespace

namespace detail {

std::optional<std::string> read_file(const std::string& path, ErrorSink& sink) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.bad() && !text.bad()) return std::move(text).str();
  }
  sink.add_unlocated("", std::string("cannot read file: ") + std::strerror(errno));
  return std::nullopt;
}

std::optional<toml::table> parse_toml(std::string_view text, const std::string& file,
                                      ErrorSink& sink) {
  try {
    return toml::parse(text, std::string_view(file));
  } catch (const toml::parse_error& e) {
    sink.add(e.source(), "", std::string(e.description()));
    return std::nullopt;
  }
}

std::optional<FileStamp> stamp_of(const std::string& path, bool* failed) {
  return stamp_of(path, failed, nullptr);
}

std::optional<FileStamp> stamp_of(const std::string& path, bool* failed, bool* link) {
  struct ::stat st {};
  // lstat(2) first when asked about links: one call for a regular file, as stat(2) would be.
  const bool looked =
      link != nullptr ? ::lstat(path.c_str(), &st) == 0 : ::stat(path.c_str(), &st) == 0;
  bool through = looked;
  if (looked && link != nullptr) {
    *link = S_ISLNK(st.st_mode);
    if (*link) through = ::stat(path.c_str(), &st) == 0;
  }
  if (!through) {
    if (failed != nullptr) *failed = errno != ENOENT && errno != ENOTDIR;
    return std::nullopt;
  }
  if (failed != nullptr) *failed = false;
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  return FileStamp{
      static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
      static_cast<std::int64_t>(st.st_size),
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

bool is_drop_in_name(std::string_view name) {
  return !name.starts_with('.') && name.size() > 5 && name.ends_with(".toml");
}

}  // namespace detail

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line != 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

ConfigErrors::ConfigErrors(std::vector<ConfigError> errors)
    : std::runtime_error(join_errors(errors)), errors_(std::move(errors)) {}

policy::SandboxHome home_of(const Sandbox& sandbox) {
  policy::SandboxHome home;
  home.id = sandbox.spec.id;
  home.ports = sandbox.spec.ports;
  if (sandbox.launcher_made) {
    home.kind = policy::SandboxHome::Kind::launched;
    home.profile = sandbox.profile;
  } else if (sandbox.in_drop_in) {
    home.kind = policy::SandboxHome::Kind::file;
    home.file = sandbox.file;
  }
  return home;
}

policy::SandboxHome home_of(const Config& config, std::string_view id) {
  if (const Sandbox* sandbox = config.find_sandbox(id)) return home_of(*sandbox);
  policy::SandboxHome home;
  home.kind = policy::SandboxHome::Kind::unknown;
  home.id = id;
  return home;
}

SandboxList SandboxList::from_sorted(std::vector<Sandbox> sandboxes) {
  std::vector<Index::value_type> entries;
  entries.reserve(sandboxes.size());
  for (Sandbox& sandbox : sandboxes) {
    std::string id = sandbox.spec.id;
    entries.emplace_back(std::move(id), std::make_shared<const Sandbox>(std::move(sandbox)));
  }
  assert(std::is_sorted(entries.begin(), entries.end(),
                        [](const auto& a, const auto& b) { return a.first < b.first; }));
  SandboxList list;
  list.index_ = Index::from_sorted(std::move(entries));
  return list;
}

const Sandbox* SandboxList::find(std::string_view id) const {
  const auto* found = index_.find(id);
  return found != nullptr ? found->get() : nullptr;
}

std::shared_ptr<const Sandbox> SandboxList::share(std::string_view id) const {
  const auto* found = index_.find(id);
  return found != nullptr ? *found : nullptr;
}

void SandboxList::insert(std::shared_ptr<const Sandbox> sandbox) {
  std::string id = sandbox->spec.id;
  index_.insert_or_assign(std::move(id), std::move(sandbox));
}

void SandboxList::erase(std::string_view id) {
  index_.erase(id);
}

const Sandbox* Config::find_sandbox(std::string_view id) const {
  return sandboxes.find(id);
}

std::shared_ptr<const policy::Policy> Config::build_policy(
    std::vector<policy::Endpoint> self_endpoints) const {
  std::vector<policy::SandboxSpec> specs;
  specs.reserve(sandboxes.size());
  for (const Sandbox& sandbox : sandboxes) specs.push_back(sandbox.spec);
  // The launcher's pool holds every sandbox link, host side included: never a destination.
  return std::make_shared<const policy::Policy>(std::move(specs), std::move(self_endpoints),
                                                std::vector<policy::Cidr>{launcher.pool});
}

const secrets::CredentialSpec* Config::find_credential(std::string_view name) const {
  const auto it = std::lower_bound(credentials.begin(), credentials.end(), name,
                                   [](const secrets::CredentialSpec& spec,
                                      std::string_view wanted) { return spec.name < wanted; });
  return it != credentials.end() && it->name == name ? &*it : nullptr;
}

namespace {

// Compiles one sandbox's inject rules into `table`: its own, then its profile's; a sandbox with
// none of its own shares its profile's compiled rules.
void add_injection(const Config& config, secrets::InjectionTable& table, const Sandbox& sandbox) {
  const auto profile = config.profile_inject.find(sandbox.profile);
  const std::vector<secrets::InjectRule>* inherited =
      profile != config.profile_inject.end() ? &profile->second : nullptr;
  if (sandbox.inject.empty()) {
    if (inherited != nullptr) {
      table.add(sandbox.spec.id,
                table.profile_rules(sandbox.profile, sandbox.spec.ports, *inherited));
    }
    return;
  }
  std::vector<secrets::InjectRule> rules = sandbox.inject;
  if (inherited != nullptr) rules.insert(rules.end(), inherited->begin(), inherited->end());
  table.add(sandbox.spec.id,
            std::make_shared<const secrets::InjectionRules>(std::move(rules), sandbox.spec.ports));
}

}  // namespace

std::shared_ptr<const secrets::InjectionTable> Config::build_injection(
    const secrets::InjectionTable* previous) const {
  if (previous != nullptr && changes) {
    // Only drop-ins changed, so the profiles' rules are the ones `previous` was built from.
    auto table = std::make_shared<secrets::InjectionTable>(*previous);
    for (const std::string& id : changes->removed) table->remove(id);
    for (const std::string& id : changes->added) add_injection(*this, *table, *find_sandbox(id));
    return table;
  }
  auto table = std::make_shared<secrets::InjectionTable>();
  for (const Sandbox& sandbox : sandboxes) add_injection(*this, *table, sandbox);
  return table;
}

std::vector<std::string> Config::credentials_of(const Sandbox& sandbox) const {
  std::vector<std::string> names;
  for (const auto& rule : sandbox.inject) names.push_back(rule.credential);
  if (const auto it = profile_inject.find(sandbox.profile); it != profile_inject.end()) {
    for (const auto& rule : it->second) names.push_back(rule.credential);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::pair<std::string, std::string>> Config::placeholder_pairs() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Sandbox& sandbox : sandboxes) {
    for (std::string& name : credentials_of(sandbox)) {
      out.emplace_back(sandbox.spec.id, std::move(name));
    }
  }
  return out;
}

std::vector<PlaceholderEnv> Config::placeholder_env(std::string_view id,
                                                    const secrets::PlaceholderKey& key) const {
  std::vector<PlaceholderEnv> out;
  const Sandbox* sandbox = find_sandbox(id);
  if (sandbox == nullptr) return out;
  for (const std::string& name : credentials_of(*sandbox)) {
    const secrets::CredentialSpec* spec = find_credential(name);
    if (spec == nullptr || spec->env.empty()) continue;
    const std::string value = key.placeholder_for(sandbox->spec.id, name);
    for (const std::string& env : spec->env) out.push_back({env, value, name});
  }
  return out;
}

std::vector<std::string> Config::credential_env_names() const {
  std::vector<std::string> out;
  for (const secrets::CredentialSpec& spec : credentials) {
    out.insert(out.end(), spec.env.begin(), spec.env.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Config load_config(const std::string& path) {
  Loader loader;
  ErrorSink sink = loader.sink_for(path);
  Config config;
  if (const auto text = detail::read_file(path, sink)) config = load(*text, path, loader, sink);
  if (loader.failed()) loader.throw_errors();
  return config;
}

Config load_config_from_string(std::string_view toml, const std::string& name) {
  Loader loader;
  ErrorSink sink = loader.sink_for(name);
  Config config = load(toml, name, loader, sink);
  if (loader.failed()) loader.throw_errors();
  return config;
}

std::vector<std::string> Config::profile_names() const {
  std::vector<std::string> out;
  if (!load_state || !load_state->main) return out;
  for (const auto& [name, unused] : load_state->main->profiles) out.push_back(name);
  return out;
}

std::optional<Sandbox> Config::launched_with(std::string_view profile) const {
  if (!load_state || !load_state->main || !load_state->main->profiles.contains(profile)) {
    return std::nullopt;
  }
  // Read as the launcher's drop-in for it would be.
  std::vector<detail::ErrorSink::Entry> errors;
  detail::ErrorSink sink(errors, path, 0);
  detail::SandboxCollector collector(load_state->main->profiles, load_state->main->credentials,
                                     launcher.pool);
  // Its address: the pool's first sandbox address (.2 of the first /30), as the launcher
  // would give it.
  policy::IpAddress address = launcher.pool.network;
  address.bytes[3] = static_cast<std::uint8_t>(address.bytes[3] | 2);
  const toml::table drop_in{{"id", std::string(profile)},
                            {"profile", std::string(profile)},
                            {"sources", toml::array{address.to_string()}}};
  collector.read_drop_in(drop_in, sink, true);
  std::vector<Sandbox> made = collector.take();
  if (!errors.empty() || made.size() != 1) return std::nullopt;
  return std::move(made.front());
}

std::vector<std::string> restart_only_changes(const Config& running, const Config& loaded) {
  const auto texts = [](const Listeners& l) {
    const auto list = [](const std::vector<ListenAddress>& v) {
      std::vector<std::string> out;
      for (const ListenAddress& a : v) out.push_back(a.text);
      return out;
    };
    return std::make_tuple(list(l.explicit_proxy), list(l.transparent), list(l.dns),
                           l.admin ? l.admin->text : std::string());
  };
  const auto dns = [](const Dns& d) { return std::tie(d.servers, d.timeout, d.max_ttl, d.hosts); };
  std::vector<std::string> out;
  if (texts(running.listeners) != texts(loaded.listeners)) out.emplace_back("listeners");
  if (dns(running.dns) != dns(loaded.dns)) out.emplace_back("dns");
  if (running.workers != loaded.workers) out.emplace_back("workers");
  if (running.logging.audit != loaded.logging.audit) out.emplace_back("log.audit");
  const auto chain = [](const Logging& l) {
    return std::tie(l.audit_chain, l.audit_signing_key, l.audit_checkpoint_lines,
                    l.audit_checkpoint_interval);
  };
  if (chain(running.logging) != chain(loaded.logging)) out.emplace_back("log.audit_chain");
  if (running.sandboxes_dir != loaded.sandboxes_dir) out.emplace_back("sandboxes_dir");
  return out;
}

}  // namespace sandgate::config
