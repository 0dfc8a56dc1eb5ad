// SkippedStreamIds (src/h2/core.hpp): which client stream ids a server saw skipped, so that a
// HEADERS frame on one is refused (RFC 9113 section 5.1.1), in a fixed amount of memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "h2/core.hpp"

namespace sandgate::h2::detail {
namespace {

struct Row {
  std::string name;
  std::vector<std::int32_t> opened;   // in order
  std::vector<std::int32_t> skipped;  // each must be skipped()
  std::vector<std::int32_t> not_skipped;
};

TEST(SkippedStreamIds, Table) {
  const std::vector<Row> rows = {
      {"nothing opened yet", {}, {}, {1, 3}},
      {"ids one by one leave no gap", {1, 3, 5, 7}, {}, {1, 3, 5, 7, 9}},
      {"a first id past 1 skips the ones below", {5}, {1, 3}, {5, 7}},
      {"a jump skips the ids in between", {1, 3, 11}, {5, 7, 9}, {1, 3, 11, 13}},
      {"a lower id arriving later opens nothing", {1, 9, 5}, {3, 5, 7}, {1, 9}},
      {"two gaps are both kept", {1, 7, 9, 15}, {3, 5, 11, 13}, {1, 7, 9, 15}},
      // 17 gaps: the first (id 1) is forgotten, the other 16 are kept.
      {"only the last 16 gaps are kept",
       {3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63, 67},
       {5, 9, 65},
       {1, 3, 67}},
  };
  for (const Row& r : rows) {
    SkippedStreamIds ids;
    for (const std::int32_t id : r.opened) ids.opened(id);
    for (const std::int32_t id : r.skipped) EXPECT_TRUE(ids.skipped(id)) << r.name << ": " << id;
    for (const std::int32_t id : r.not_skipped) {
      EXPECT_FALSE(ids.skipped(id)) << r.name << ": " << id;
    }
  }
}

}  // namespace
}  // namespace sandgate::h2::detail
