#include "h2/h2.hpp"

#include <string>

namespace sandgate::h2 {

std::string_view find_field(const Fields& fields, std::string_view name) {
  for (const Field& f : fields) {
    if (f.name == name) return f.value;
  }
  return {};
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
