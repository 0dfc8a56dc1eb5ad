#pragma once

// Internal to src/config: what one load read (Config::load_state), so that reload_config can
// read again only the drop-ins that changed, and the helpers config.cpp and reload.cpp share.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "config/config.hpp"
#include "config/credentials.hpp"
#include "config/sandboxes.hpp"
#include "config/toml_reader.hpp"

namespace sandgate::config::detail {

// One version of a file, told apart without reading it: a rename into place (how the
// launcher writes) changes the inode, a rewrite the size or the modification time.
struct FileStamp {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// The stamp of a regular file (symlinks followed); nullopt when there is none (absent, or not
// a regular file). `failed` is set when stat(2) fails for another reason (EACCES, ...).
std::optional<FileStamp> stamp_of(const std::string& path, bool* failed = nullptr);

// Whether a name in sandboxes_dir is a drop-in: "*.toml", not a dot-file.
bool is_drop_in_name(std::string_view name);

struct LoadState {
  struct DropIn {
    FileStamp stamp;  // when it was read
    std::string id;   // the sandbox it defines (every drop-in of a good load defines one)
  };
  std::string main_text;  // the main file as read
  // The main file's profiles and credentials, as its sandboxes were read with: a drop-in read
  // later points at the same shared profile lists.
  Profiles profiles;
  Credentials credentials;
  std::unordered_map<std::string, DropIn> drop_ins;  // by path
};

std::optional<std::string> read_file(const std::string& path, ErrorSink& sink);
std::optional<toml::table> parse_toml(std::string_view text, const std::string& file,
                                      ErrorSink& sink);

// Two credentials of one sandbox that set the same variable would leave the sandbox one
// placeholder for two hosts' credentials: an error where the sandbox is defined.
void check_placeholder_env(const Config& config, std::span<const Sandbox> sandboxes,
                           ErrorSink& sink);

// Drop-in sandboxes with keys that make sandgate terminate TLS, when [interception] is off.
void require_interception_in_drop_ins(std::span<const Sandbox> sandboxes, ErrorSink& sink);

}  // namespace sandgate::config::detail
