// reload_config: a load that reads again only the drop-ins that changed. Registering one
// sandbox (the launcher renames one drop-in into sandboxes_dir) then costs the same with ten
// sandboxes as with ten thousand, apart from copying the kept ones' entries.

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>
#include <unordered_set>
#include <utility>

#include "config/config.hpp"
#include "config/load_state.hpp"
#include "config/sandboxes.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config {

namespace {

namespace fs = std::filesystem;
using detail::ErrorSink;
using detail::FileStamp;
using detail::LoadState;

// What the drop-in directory holds now, for the paths that may have changed: path -> stamp
// (nullopt: gone). False when it cannot be told (the directory cannot be listed, a file
// cannot be stat'ed): load_config then reports whatever is wrong.
//
// With names that are all drop-in names, only they are stat'ed. Any other name (the
// launcher's "ID.toml.tmp.PID" before its rename, a subdirectory, the "..data" link a
// Kubernetes volume swaps) may have changed what a drop-in resolves to, so the directory is
// listed: every link and every file of another inode than its stamp's is stat'ed, and so is
// every name given; a regular file under the inode it was read with is taken as unchanged
// (an in-place rewrite shows up as a name given). Without names, everything is stat'ed.
bool current_stamps(const Config& previous, const LoadState& state,
                    const std::optional<std::vector<std::string>>& changed,
                    std::map<std::string, std::optional<FileStamp>>& out) {
  const fs::path dir(previous.sandboxes_dir);
  bool failed = false;
  const auto stamp = [&](const std::string& path) {
    out[path] = detail::stamp_of(path, &failed);
    return !failed;
  };
  const auto plain = [](const std::string& name) {
    return detail::is_drop_in_name(name) && name.find('/') == std::string::npos;
  };
  if (changed && std::all_of(changed->begin(), changed->end(), plain)) {
    for (const std::string& name : *changed) {
      if (!stamp((dir / name).string())) return false;
    }
    return true;
  }
  const std::set<std::string> named =
      changed ? std::set<std::string>(changed->begin(), changed->end()) : std::set<std::string>();
  const std::string prefix = (dir / "").string();  // as dir / name spells the paths
  DIR* listing = ::opendir(previous.sandboxes_dir.c_str());
  if (listing == nullptr) return false;
  bool read_error = false;
  std::size_t known_listed = 0;     // drop-ins of `state` seen in the listing
  std::vector<std::string> listed;  // drop-in paths listed
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing);
    if (entry == nullptr) {
      read_error = errno != 0;
      break;
    }
    const std::string name = entry->d_name;
    if (!detail::is_drop_in_name(name)) continue;
    std::string path = prefix + name;
    const auto known = state.drop_ins.find(path);
    if (known != state.drop_ins.end()) ++known_listed;
    if (changed && entry->d_type == DT_REG && !named.contains(name) &&
        known != state.drop_ins.end() && known->second.stamp.inode == entry->d_ino) {
      listed.push_back(std::move(path));  // unchanged: only needed to tell what went away
      continue;
    }
    if (!stamp(path)) break;
    listed.push_back(std::move(path));
  }
  const bool ok = !read_error && !failed;
  ::closedir(listing);
  if (!ok) return false;
  if (known_listed < state.drop_ins.size()) {  // some went away
    std::sort(listed.begin(), listed.end());
    for (const auto& [path, unused] : state.drop_ins) {
      if (!std::binary_search(listed.begin(), listed.end(), path)) {
        out.try_emplace(path, std::nullopt);
      }
    }
  }
  return true;
}

}  // namespace

Config reload_config(const Config& previous,
                     const std::optional<std::vector<std::string>>& changed) {
  const LoadState* state = previous.load_state.get();
  if (state == nullptr || previous.sandboxes_dir.empty()) return load_config(previous.path);
  std::vector<ErrorSink::Entry> errors;
  ErrorSink main_sink(errors, previous.path, 0);
  const auto text = detail::read_file(previous.path, main_sink);
  if (!text || *text != state->main_text) return load_config(previous.path);

  std::map<std::string, std::optional<FileStamp>> now;
  if (!current_stamps(previous, *state, changed, now)) return load_config(previous.path);
  std::unordered_set<std::string> removed;                 // ids of sandboxes gone or replaced
  std::vector<std::pair<std::string, FileStamp>> to_read;  // by path, sorted
  for (const auto& [path, stamp] : now) {
    const auto known = state->drop_ins.find(path);
    const bool same = known != state->drop_ins.end() && stamp && known->second.stamp == *stamp;
    if (same) continue;
    if (known != state->drop_ins.end()) removed.insert(known->second.id);
    if (stamp) to_read.emplace_back(path, *stamp);
  }

  // The new and rewritten drop-ins, read as load_config reads them; any error and
  // load_config reports them all, in its order.
  detail::SandboxCollector collector(state->profiles, state->credentials);
  for (std::size_t i = 0; i < to_read.size(); ++i) {
    ErrorSink sink(errors, to_read[i].first, i + 1);
    const auto drop_in = detail::read_file(to_read[i].first, sink);
    if (!drop_in) continue;
    if (const auto root = detail::parse_toml(*drop_in, sink.file(), sink)) {
      collector.read_drop_in(*root, sink, drop_in->starts_with(kLauncherDropinMarker));
    }
  }
  if (!errors.empty()) return load_config(previous.path);
  std::vector<Sandbox> added = collector.take();

  // Ids and source addresses are unique across all sandboxes, kept ones included.
  std::set<policy::IpAddress> added_sources;
  for (const Sandbox& sandbox : added) {
    const Sandbox* old = previous.find_sandbox(sandbox.spec.id);
    if (old != nullptr && !removed.contains(old->spec.id)) return load_config(previous.path);
    added_sources.insert(sandbox.sources.begin(), sandbox.sources.end());
  }
  std::vector<Sandbox> kept;
  kept.reserve(previous.sandboxes.size());
  for (const Sandbox& sandbox : previous.sandboxes) {
    if (sandbox.in_drop_in && removed.contains(sandbox.spec.id)) continue;
    for (const policy::IpAddress& source : sandbox.sources) {
      if (added_sources.contains(source)) return load_config(previous.path);
    }
    kept.push_back(sandbox);
  }

  Config next;
  next.path = previous.path;
  next.workers = previous.workers;
  next.listeners = previous.listeners;
  next.limits = previous.limits;
  next.dns = previous.dns;
  next.logging = previous.logging;
  next.launcher = previous.launcher;
  next.interception = previous.interception;
  next.sandboxes_dir = previous.sandboxes_dir;
  next.credentials = previous.credentials;
  next.profile_inject = previous.profile_inject;
  next.placeholder_key_file = previous.placeholder_key_file;

  ErrorSink check_sink(errors, previous.path, 0);
  detail::check_placeholder_env(next, added, check_sink);
  if (!next.interception.enabled()) detail::require_interception_in_drop_ins(added, check_sink);
  if (!errors.empty()) return load_config(previous.path);

  auto next_state = std::make_shared<LoadState>(*state);
  SandboxChanges changes;
  for (const auto& [path, stamp] : now) {
    if (!stamp) next_state->drop_ins.erase(path);
  }
  for (const auto& [path, stamp] : to_read) next_state->drop_ins[path].stamp = stamp;
  for (const Sandbox& sandbox : added) {
    next_state->drop_ins[sandbox.file].id = sandbox.spec.id;
    changes.added.push_back(sandbox.spec.id);
  }
  changes.removed.assign(removed.begin(), removed.end());
  std::sort(changes.removed.begin(), changes.removed.end());

  next.sandboxes.reserve(kept.size() + added.size());
  std::merge(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()),
             std::make_move_iterator(added.begin()), std::make_move_iterator(added.end()),
             std::back_inserter(next.sandboxes),
             [](const Sandbox& a, const Sandbox& b) { return a.spec.id < b.spec.id; });
  next.load_state = std::move(next_state);
  next.changes = std::move(changes);
  return next;
}

}  // namespace sandgate::config
