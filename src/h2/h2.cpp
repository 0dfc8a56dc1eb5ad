#include "h2/h2.hpp"

#include <algorithm>
#include <string>

#include "common/ascii.hpp"

namespace sandgate::h2 {

std::string_view find_field(const Fields& fields, std::string_view name) {
  for (const Field& f : fields) {
    if (f.name == name) return f.value;
  }
  return {};
}

std::string_view find_field_ascii(const Fields& fields, std::string_view name) {
  for (const Field& f : fields) {
    if (iequals_ascii(f.name, name)) return f.value;
  }
  return {};
}

bool sendable(std::string_view name, std::string_view value) {
  static constexpr std::string_view kNotSent[] = {
      "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"};
  if (std::ranges::any_of(kNotSent, [&](std::string_view n) { return iequals_ascii(name, n); })) {
    return false;
  }
  return !iequals_ascii(name, "te") || iequals_ascii(value, "trailers");
}

void add_sendable(Fields& out, std::string_view name, std::string_view value) {
  if (!sendable(name, value)) return;
  Field& f = out.emplace_back(Field{std::string(name), std::string(value)});
  for (char& c : f.name) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

Fields sendable_fields(const Fields& fields) {
  Fields out;
  out.reserve(fields.size());
  for (const Field& f : fields) add_sendable(out, f.name, f.value);
  return out;
}

namespace {

class Category : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "h2"; }
  std::string message(int ev) const override {
    switch (static_cast<Error>(ev)) {
      case Error::stream_reset:
        return "stream reset by the peer";
      case Error::refused:
        return "stream refused by the peer (not processed)";
      case Error::connection_closed:
        return "HTTP/2 connection closed";
      case Error::goaway:
        return "HTTP/2 connection going away: no new stream";
      case Error::header_too_large:
        return "header block too large";
      case Error::invalid_state:
        return "HTTP/2 exchange used out of order";
      case Error::protocol:
        return "HTTP/2 protocol error";
    }
    return "unknown h2 error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const Category c;
  return c;
}

boost::system::error_code make_error_code(Error e) {
  return {static_cast<int>(e), category()};
}

}  // namespace sandgate::h2
