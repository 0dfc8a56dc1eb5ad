#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sandgate::dns {

// A bounds-checked cursor over a DNS message (the listener's queries, upstream replies); every
// read fails once past the end. Internal to src/dns.
class WireReader {
 public:
  explicit WireReader(std::span<const std::uint8_t> in) : in_(in) {}

  bool u8(std::uint8_t& out) {
    if (pos_ + 1 > in_.size()) return false;
    out = in_[pos_++];
    return true;
  }
  bool u16(std::uint16_t& out) {
    if (pos_ + 2 > in_.size()) return false;
    out = static_cast<std::uint16_t>(in_[pos_] << 8 | in_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool u32(std::uint32_t& out) {
    std::uint16_t hi = 0, lo = 0;
    if (!u16(hi) || !u16(lo)) return false;
    out = std::uint32_t{hi} << 16 | lo;
    return true;
  }
  bool skip(std::size_t n) {
    if (n > in_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::span<const std::uint8_t> bytes(std::size_t from, std::size_t to) const {
    return in_.subspan(from, to - from);
  }
  std::span<const std::uint8_t> message() const { return in_; }
  std::size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

}  // namespace sandgate::dns
