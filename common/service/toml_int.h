// Integers read from TOML with a range check, for the cluster configuration and job files.
// toml11 reads every integer as int64: cast straight to an unsigned field, -1 would become
// 2^64-1, so each value is checked against its documented range before it is narrowed.
// Header-only, so that a reader outside the services (job/) needs only toml11 and fmt.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <toml.hpp>

#include "atoll/status.h"

namespace atl {

// The integer at `key` of `table`, or `fallback` when there is none; InvalidArgument
// "NAME must be in MIN..MAX, not VALUE" when it lies outside [min, max]. Like toml::find, it
// throws toml's own error for a value that is not an integer.
inline Result<int64_t> IntInRange(const toml::value& table, const std::string& key,
                                  const std::string& name, int64_t fallback, int64_t min,
                                  int64_t max) {
  const int64_t value =
      table.is_table() && table.contains(key) ? toml::find<int64_t>(table, key) : fallback;
  if (value < min || value > max) {
    return InvalidArgument(fmt::format("{} must be in {}..{}, not {}", name, min, max, value));
  }
  return value;
}

// Reads `field` from `key` of `table` as IntInRange does, its current value the fallback.
// [min, max] must fit in T, so that the checked value is narrowed without loss.
template <typename T>
Status ReadInt(const toml::value& table, const std::string& key, const std::string& name,
               int64_t min, int64_t max, T& field) {
  static_assert(std::is_integral_v<T>);
  assert(std::in_range<T>(min) && std::in_range<T>(max) && std::in_range<int64_t>(field));
  ATOLL_ASSIGN_OR_RETURN(const int64_t value,
                         IntInRange(table, key, name, static_cast<int64_t>(field), min, max));
  field = static_cast<T>(value);
  return Status::Ok();
}

}  // namespace atl
