#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sandgate::test {

// A real UDP DNS server on 127.0.0.1, port chosen by the kernel, that answers A and AAAA
// questions from a table the test programs. It runs its own io_context on its own thread, so the
// code under test can drive its io_context however it likes. All methods are thread-safe.
//
// A name with no records and no reply setting gets NXDOMAIN; a name with records of the other
// type only gets an empty NOERROR (NODATA).
class FakeDnsServer {
 public:
  static constexpr std::uint16_t kTypeA = 1;
  static constexpr std::uint16_t kTypeAaaa = 28;

  enum class Reply {
    answer,     // the records added for the name (default)
    nxdomain,   // rcode 3
    servfail,   // rcode 2
    refused,    // rcode 5
    drop,       // never answer: the client must time out
    malformed,  // right id and question, then an answer record cut short
    garbage,    // right id, then bytes that are no DNS message at all
  };

  FakeDnsServer();
  ~FakeDnsServer();
  FakeDnsServer(const FakeDnsServer&) = delete;
  FakeDnsServer& operator=(const FakeDnsServer&) = delete;

  std::uint16_t port() const { return port_; }
  // "127.0.0.1:PORT", as ResolverOptions::servers takes it.
  std::string address() const;

  // Adds an A (IPv4 text) or AAAA (IPv6 text) record with the given TTL. Repeats are kept.
  void add_record(const std::string& name, const std::string& ip, std::uint32_t ttl);
  // How questions for `name` are treated: of any type, or of one type (which wins).
  void set_reply(const std::string& name, Reply reply);
  void set_reply(const std::string& name, std::uint16_t qtype, Reply reply);
  // How questions for every name below `zone` (not `zone` itself) with no entry of their own
  // are treated: a wildcard whose server never answers, for instance.
  void set_reply_below(const std::string& zone, Reply reply);

  // Negative replies (NXDOMAIN, and NOERROR without answers) for `zone` and every name below it
  // carry the zone's SOA in the authority section, its names compressed as real servers send
  // them: owner `zone`, mname "ns1.<zone>", rname "hostmaster.<zone>", the given TTL and MINIMUM.
  void set_soa(const std::string& zone, std::uint32_t ttl, std::uint32_t minimum);

  // Questions received (answered or not), per name and type, or per name over all types.
  std::size_t queries(const std::string& name, std::uint16_t qtype) const;
  std::size_t queries(const std::string& name) const;
  std::size_t total_queries() const;

 private:
  struct Record {
    std::uint16_t type;
    std::vector<std::uint8_t> rdata;
    std::uint32_t ttl;
  };
  struct Entry {
    std::vector<Record> records;
    std::optional<Reply> reply;
    std::map<std::uint16_t, Reply> reply_by_type;
  };

  void receive();
  std::vector<std::uint8_t> respond(const std::uint8_t* query, std::size_t size);

  boost::asio::io_context io_;
  boost::asio::ip::udp::socket socket_;
  boost::asio::ip::udp::endpoint peer_;
  std::array<std::uint8_t, 4096> buffer_{};
  std::uint16_t port_ = 0;

  mutable std::mutex mutex_;  // guards table_ and counts_
  std::map<std::string, Entry> table_;
  std::map<std::string, Reply> below_;  // zone -> reply for names under it
  std::map<std::string, std::pair<std::uint32_t, std::uint32_t>> soa_;  // zone -> ttl, minimum
  std::map<std::pair<std::string, std::uint16_t>, std::size_t> counts_;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace sandgate::test
