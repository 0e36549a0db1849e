// The fields of one event: named values, in the order they are published.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace atl {

using EventValue = std::variant<int64_t, uint64_t, double, bool, std::string>;
using EventFields = std::vector<std::pair<std::string, EventValue>>;

}  // namespace atl
