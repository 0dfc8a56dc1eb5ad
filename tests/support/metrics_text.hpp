#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::test {

// The value of the sample `name{labels}` in Prometheus text, where every label given must
// match (the sample may carry more). nullopt when no sample matches.
std::optional<double> metric_value(std::string_view text, std::string_view name,
                                   const std::map<std::string, std::string>& labels = {});

}  // namespace sandgate::test
