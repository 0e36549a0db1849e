// Test helper: a strict reader of Prometheus's text exposition format 0.0.4, standing for
// the scraping server. It rejects what Prometheus's own parser (expfmt) rejects, and a
// little more that the format's description asks for:
//   - lines end in a newline; blank lines and `#` comments other than HELP/TYPE are
//     skipped;
//   - `# HELP name text` (escapes `\\` and `\n` only) and `# TYPE name type` at most once
//     per name, TYPE before the family's first sample, types counter, gauge, histogram,
//     summary, untyped;
//   - `name{label="value",...} value [timestamp]`: names [a-zA-Z_:][a-zA-Z0-9_:]*, label
//     names [a-zA-Z_][a-zA-Z0-9_]*, each once per sample, values escaping `\\`, `\"` and
//     `\n` only; a value strtod reads whole, or +Inf, -Inf, NaN;
//   - a family's lines are one group, no series (name and labels) appears twice;
//   - a histogram's buckets carry `le`, grow with it, end at +Inf, and the +Inf bucket
//     equals its `_count`, which comes with a `_sum`.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "atoll/status.h"

namespace atl::testing {

struct ExpositionSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> "counter", "gauge", ...
  std::map<std::string, std::string> helps;  // family -> text, unescaped
  std::vector<ExpositionSample> samples;     // in the order written

  // The samples named `name` whose labels include every pair of `match`.
  std::vector<const ExpositionSample*> Find(
      const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  // The sum of their values (0 when there is none).
  double Sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
};

// Parses `text`; InvalidArgument naming the line and what is wrong with it.
Result<Exposition> ParseExposition(std::string_view text);

}  // namespace atl::testing
