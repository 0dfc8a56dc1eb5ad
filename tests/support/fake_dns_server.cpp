#include "support/fake_dns_server.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <stdexcept>

namespace sandgate::test {

namespace asio = boost::asio;
using asio::ip::udp;

namespace {

constexpr std::size_t kHeaderSize = 12;

std::uint16_t read16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

void put16(std::vector<std::uint8_t>& out, unsigned v) {
  out.push_back(static_cast<std::uint8_t>((v >> 8) & 0xff));
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, v >> 16);
  put16(out, v & 0xffff);
}

struct Question {
  std::string name;  // lowercase, no trailing dot
  std::uint16_t type = 0;
  std::size_t end = 0;  // offset just past the question
};

// The first question of a query, or nullopt if the message is not one we can answer.
std::optional<Question> parse_question(const std::uint8_t* msg, std::size_t size) {
  if (size < kHeaderSize || read16(msg + 4) != 1) return std::nullopt;
  Question q;
  std::size_t pos = kHeaderSize;
  while (true) {
    if (pos >= size) return std::nullopt;
    const std::size_t len = msg[pos++];
    if (len == 0) break;
    if ((len & 0xc0) != 0 || pos + len > size) return std::nullopt;  // no compression in queries
    if (!q.name.empty()) q.name += '.';
    for (std::size_t i = 0; i < len; ++i) {
      q.name += static_cast<char>(std::tolower(msg[pos + i]));
    }
    pos += len;
  }
  if (pos + 4 > size) return std::nullopt;
  q.type = read16(msg + pos);
  q.end = pos + 4;
  return q;
}

std::vector<std::uint8_t> header(const std::uint8_t* query, unsigned rcode, unsigned ancount) {
  std::vector<std::uint8_t> out;
  out.insert(out.end(), query, query + 2);                           // id
  put16(out, 0x8000 | (read16(query + 2) & 0x0100) | 0x80 | rcode);  // QR, RD copied, RA
  put16(out, 1);                                                     // qdcount
  put16(out, ancount);
  put16(out, 0);  // nscount
  put16(out, 0);  // arcount
  return out;
}

// Appends the SOA of `zone` (a suffix of the question name, or the name itself) to a negative
// reply: owner and names as compression pointers into the question, NSCOUNT set to 1.
void append_soa(std::vector<std::uint8_t>& out, const Question& q, const std::string& zone,
                std::uint32_t ttl, std::uint32_t minimum) {
  std::size_t offset = kHeaderSize;
  std::string rest = q.name;
  while (rest != zone) {
    const std::size_t dot = rest.find('.');
    offset += dot + 1;
    rest = rest.substr(dot + 1);
  }
  const unsigned pointer = 0xc000 | static_cast<unsigned>(offset);
  put16(out, pointer);
  put16(out, 6);  // SOA
  put16(out, 1);  // IN
  put32(out, ttl);
  put16(out, 1 + 3 + 2 + 1 + 10 + 2 + 20);
  out.push_back(3);
  out.insert(out.end(), {'n', 's', '1'});
  put16(out, pointer);
  out.push_back(10);
  for (const char c : std::string("hostmaster")) out.push_back(static_cast<std::uint8_t>(c));
  put16(out, pointer);
  for (const std::uint32_t v : {2026120101U, 7200U, 3600U, 1209600U, minimum}) put32(out, v);
  out[9] = 1;  // NSCOUNT
}

}  // namespace

void FakeDnsServer::set_soa(const std::string& zone, std::uint32_t ttl, std::uint32_t minimum) {
  const std::lock_guard lock(mutex_);
  soa_[zone] = {ttl, minimum};
}

FakeDnsServer::FakeDnsServer()
    : socket_(io_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
  port_ = socket_.local_endpoint().port();
  receive();
  thread_ = std::thread([this] { io_.run(); });
}

FakeDnsServer::~FakeDnsServer() {
  io_.stop();
  thread_.join();
}

std::string FakeDnsServer::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

void FakeDnsServer::add_record(const std::string& name, const std::string& ip, std::uint32_t ttl) {
  Record rec{kTypeA, {}, ttl};
  std::array<std::uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, ip.c_str(), bytes.data()) == 1) {
    rec.rdata.assign(bytes.begin(), bytes.begin() + 4);
  } else if (inet_pton(AF_INET6, ip.c_str(), bytes.data()) == 1) {
    rec.type = kTypeAaaa;
    rec.rdata.assign(bytes.begin(), bytes.end());
  } else {
    throw std::invalid_argument("FakeDnsServer: not an IP address: " + ip);
  }
  const std::lock_guard lock(mutex_);
  table_[name].records.push_back(std::move(rec));
}

void FakeDnsServer::set_reply(const std::string& name, Reply reply) {
  const std::lock_guard lock(mutex_);
  table_[name].reply = reply;
}

void FakeDnsServer::set_reply(const std::string& name, std::uint16_t qtype, Reply reply) {
  const std::lock_guard lock(mutex_);
  table_[name].reply_by_type[qtype] = reply;
}

void FakeDnsServer::set_reply_below(const std::string& zone, Reply reply) {
  const std::lock_guard lock(mutex_);
  below_[zone] = reply;
}

std::size_t FakeDnsServer::queries(const std::string& name, std::uint16_t qtype) const {
  const std::lock_guard lock(mutex_);
  const auto it = counts_.find({name, qtype});
  return it == counts_.end() ? 0 : it->second;
}

std::size_t FakeDnsServer::queries(const std::string& name) const {
  const std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, count] : counts_) {
    if (key.first == name) n += count;
  }
  return n;
}

std::size_t FakeDnsServer::total_queries() const {
  const std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, count] : counts_) n += count;
  return n;
}

void FakeDnsServer::receive() {
  socket_.async_receive_from(asio::buffer(buffer_), peer_,
                             [this](const boost::system::error_code& ec, std::size_t size) {
                               if (ec == asio::error::operation_aborted) return;
                               if (!ec) {
                                 const auto reply = respond(buffer_.data(), size);
                                 boost::system::error_code ignored;
                                 if (!reply.empty()) {
                                   socket_.send_to(asio::buffer(reply), peer_, 0, ignored);
                                 }
                               }
                               receive();
                             });
}

std::vector<std::uint8_t> FakeDnsServer::respond(const std::uint8_t* query, std::size_t size) {
  const auto q = parse_question(query, size);
  if (!q) return {};
  const std::lock_guard lock(mutex_);
  ++counts_[{q->name, q->type}];
  // The SOA negative replies carry: the longest zone set for the name or a parent of it.
  const auto with_soa = [&](std::vector<std::uint8_t> out) {
    const std::pair<const std::string, std::pair<std::uint32_t, std::uint32_t>>* best = nullptr;
    for (const auto& zone : soa_) {
      if ((q->name == zone.first || q->name.ends_with("." + zone.first)) &&
          (best == nullptr || zone.first.size() > best->first.size())) {
        best = &zone;
      }
    }
    if (best != nullptr) append_soa(out, *q, best->first, best->second.first, best->second.second);
    return out;
  };

  const auto it = table_.find(q->name);
  Entry below_entry;
  if (it == table_.end()) {
    for (const auto& [zone, zone_reply] : below_) {
      if (q->name.size() > zone.size() && q->name.ends_with("." + zone))
        below_entry.reply = zone_reply;
    }
    if (!below_entry.reply) {
      auto out = header(query, 3, 0);
      out.insert(out.end(), query + kHeaderSize, query + q->end);
      return with_soa(std::move(out));
    }
  }
  const Entry& entry = it == table_.end() ? below_entry : it->second;
  Reply reply = entry.reply.value_or(Reply::answer);
  if (const auto by_type = entry.reply_by_type.find(q->type);
      by_type != entry.reply_by_type.end()) {
    reply = by_type->second;
  }
  unsigned rcode = 0;
  switch (reply) {
    case Reply::drop:
      return {};
    case Reply::garbage: {
      std::vector<std::uint8_t> out(query, query + 2);
      for (unsigned i = 0; i < 40; ++i) out.push_back(static_cast<std::uint8_t>(0xa5 ^ i));
      return out;
    }
    case Reply::malformed: {
      auto out = header(query, 0, 2);
      out.insert(out.end(), query + kHeaderSize, query + q->end);
      put16(out, 0xc00c);  // name: pointer to the question
      put16(out, q->type);
      put16(out, 1);
      put32(out, 60);
      put16(out, 16);  // claims 16 bytes of rdata, carries 2
      put16(out, 0x0102);
      return out;
    }
    case Reply::nxdomain:
      rcode = 3;
      break;
    case Reply::servfail:
      rcode = 2;
      break;
    case Reply::refused:
      rcode = 5;
      break;
    case Reply::answer:
      break;
  }

  std::vector<const Record*> answers;
  if (rcode == 0) {
    for (const Record& rec : entry.records) {
      if (rec.type == q->type) answers.push_back(&rec);
    }
  }
  auto out = header(query, rcode, static_cast<unsigned>(answers.size()));
  out.insert(out.end(), query + kHeaderSize, query + q->end);
  for (const Record* rec : answers) {
    put16(out, 0xc00c);
    put16(out, rec->type);
    put16(out, 1);  // class IN
    put32(out, rec->ttl);
    put16(out, static_cast<unsigned>(rec->rdata.size()));
    out.insert(out.end(), rec->rdata.begin(), rec->rdata.end());
  }
  if (rcode == 3 || (rcode == 0 && answers.empty())) return with_soa(std::move(out));
  return out;
}

}  // namespace sandgate::test
