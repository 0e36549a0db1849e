// PrometheusText: metrics written in Prometheus's text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): per family a `# HELP` and
// a `# TYPE` line, then its samples, `name{label="value",...} value`, one per line.
//
// It also holds atoll's naming rules, so that a misnamed metric fails its unit test rather
// than reaching a Prometheus server: every name is `atoll_` and lower-case snake case,
// counters and only counters end in `_total`, a unit is spelt out at the end of a name
// (`_bytes`, `_seconds`; the naming is the caller's, the formatter cannot check units).
// Label values are escaped (`\`, `"` and newline); label names must be identifiers.
//
// Like the client's ProgramBuilder, the writing calls return nothing and Finish() returns
// the text or the first mistake made (InvalidArgument naming it).
//
// Example:
//   PrometheusText out;
//   out.Family("atoll_host_up", MetricType::kGauge, "1 while the host's executor is alive.");
//   out.Sample({{"island", "island0"}, {"host", "i0h0"}}, 1);
//   ATOLL_ASSIGN_OR_RETURN(std::string text, std::move(out).Finish());
//   // # HELP atoll_host_up 1 while the host's executor is alive.
//   // # TYPE atoll_host_up gauge
//   // atoll_host_up{island="island0",host="i0h0"} 1
//
// Not thread-safe.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atoll/status.h"
#include "cli/histogram.h"

namespace atl {

enum class MetricType { kCounter, kGauge, kHistogram };

// A sample's labels, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  // The HTTP Content-Type of the text.
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // Starts a family: writes its HELP and TYPE lines; the samples that follow belong to it.
  // A family is written once.
  void Family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the current counter or gauge family. A counter's value must be >= 0.
  void Sample(const MetricLabels& labels, double value);
  // One histogram of the current histogram family: a `_bucket` sample per bound and one
  // for +Inf (label `le`, cumulative), `_sum` and `_count`.
  void Sample(const MetricLabels& labels, const Histogram& histogram);

  // The text, or InvalidArgument naming the first mistake.
  Result<std::string> Finish() &&;

  // `value` with `\`, `"` and newline escaped, as a label value is written.
  static std::string EscapeLabelValue(std::string_view value);
  // A sample value: the shortest decimal that reads back as `value`, or +Inf, -Inf, NaN.
  static std::string FormatValue(double value);

 private:
  // Whether a sample can go into the current family; records the mistake if not.
  bool CheckSample(const MetricLabels& labels, bool histogram);
  void WriteSample(std::string_view name, const std::string& labels, double value);
  void Fail(std::string why);

  std::string text_;
  Status error_;
  std::string family_;  // the current family's name; empty before the first
  MetricType type_ = MetricType::kGauge;
  std::set<std::string> families_;     // every family written
  std::set<std::string> label_texts_;  // the current family's series, by label text
};

}  // namespace atl
