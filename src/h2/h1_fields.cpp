#include "h2/h1_fields.hpp"

#include <string>

namespace sandgate::h2 {

Fields from_h1(const boost::beast::http::fields& fields) {
  Fields all;
  for (const auto& f : fields)
    all.push_back({std::string(f.name_string()), std::string(f.value())});
  return sendable_fields(all);
}

void to_h1(const Fields& fields, boost::beast::http::fields& out) {
  std::string cookie;
  for (const Field& f : fields) {
    if (f.name == "cookie") {
      if (!cookie.empty()) cookie += "; ";
      cookie += f.value;
      continue;
    }
    out.insert(f.name, f.value);
  }
  if (!cookie.empty()) out.insert(boost::beast::http::field::cookie, cookie);
}

}  // namespace sandgate::h2
