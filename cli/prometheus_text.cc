#include "cli/prometheus_text.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace atl {

namespace {

bool IsLowerSnake(std::string_view s) {
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]*, and `__` starts its own reserved names.
bool IsLabelName(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9') || s.substr(0, 2) == "__") return false;
  for (char c : s) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text escapes only backslash and newline.
std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}`, or "" without labels.
std::string LabelText(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name + "=\"" + PrometheusText::EscapeLabelValue(value) + "\"";
  }
  return out + "}";
}

}  // namespace

std::string PrometheusText::EscapeLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

void PrometheusText::Fail(std::string why) {
  if (error_.ok()) error_ = InvalidArgument(std::move(why));
}

void PrometheusText::Family(std::string_view name, MetricType type, std::string_view help) {
  const std::string quoted = fmt::format("metric {:?}", name);
  if (name.substr(0, 6) != "atoll_" || name.size() == 6 || !IsLowerSnake(name)) {
    return Fail(quoted + " is not atoll_ and lower-case snake case");
  }
  if ((type == MetricType::kCounter) != EndsWith(name, "_total")) {
    return Fail(quoted + (type == MetricType::kCounter ? " is a counter not ending in _total"
                                                       : " ends in _total but is no counter"));
  }
  if (type == MetricType::kHistogram &&
      (EndsWith(name, "_bucket") || EndsWith(name, "_sum") || EndsWith(name, "_count"))) {
    return Fail(quoted + " is a histogram ending in a suffix of its samples");
  }
  if (!families_.insert(std::string(name)).second) return Fail(quoted + " is written twice");
  family_ = name;
  type_ = type;
  label_texts_.clear();
  text_ +=
      fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(help), name, TypeName(type));
}

bool PrometheusText::CheckSample(const MetricLabels& labels, bool histogram) {
  if (!error_.ok()) return false;
  if (family_.empty()) {
    Fail("a sample before any family");
    return false;
  }
  if (histogram != (type_ == MetricType::kHistogram)) {
    Fail(fmt::format("metric {:?}: a {} sample in a {}", family_,
                     histogram ? "histogram" : "single", TypeName(type_)));
    return false;
  }
  std::set<std::string_view> names;
  for (const auto& [name, value] : labels) {
    if (!IsLabelName(name) || name == "le" || !names.insert(name).second) {
      Fail(fmt::format("metric {:?}: label {:?} is no identifier, reserved or repeated", family_,
                       name));
      return false;
    }
  }
  if (!label_texts_.insert(LabelText(labels)).second) {
    Fail(fmt::format("metric {:?}: series {} is written twice", family_, LabelText(labels)));
    return false;
  }
  return true;
}

void PrometheusText::WriteSample(std::string_view name, const std::string& labels, double value) {
  text_ += fmt::format("{}{} {}\n", name, labels, FormatValue(value));
}

void PrometheusText::Sample(const MetricLabels& labels, double value) {
  if (!CheckSample(labels, /*histogram=*/false)) return;
  if (type_ == MetricType::kCounter && !(value >= 0)) {
    return Fail(fmt::format("counter {:?} is given {}", family_, FormatValue(value)));
  }
  WriteSample(family_, LabelText(labels), value);
}

void PrometheusText::Sample(const MetricLabels& labels, const Histogram& histogram) {
  if (!CheckSample(labels, /*histogram=*/true)) return;
  const std::vector<uint64_t> cumulative = histogram.CumulativeCounts();
  MetricLabels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i <= cumulative.size(); ++i) {
    const bool last = i == cumulative.size();
    with_le.back().second =
        FormatValue(last ? std::numeric_limits<double>::infinity() : histogram.bounds()[i]);
    WriteSample(family_ + "_bucket", LabelText(with_le),
                static_cast<double>(last ? histogram.count() : cumulative[i]));
  }
  WriteSample(family_ + "_sum", LabelText(labels), histogram.sum());
  WriteSample(family_ + "_count", LabelText(labels), static_cast<double>(histogram.count()));
}

Result<std::string> PrometheusText::Finish() && {
  if (!error_.ok()) return error_;
  return std::move(text_);
}

}  // namespace atl
