#include "tests/cli/exposition_parser.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace atl::testing {

namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// One line, read left to right; every Read* returns false on a malformed token.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : line_(line) {}

  bool AtEnd() const { return at_ >= line_.size(); }
  char Peek() const { return AtEnd() ? '\0' : line_[at_]; }
  bool Take(char c) {
    if (Peek() != c) return false;
    ++at_;
    return true;
  }
  // Skips spaces and tabs; whether there were any.
  bool SkipBlanks() {
    const size_t from = at_;
    while (Peek() == ' ' || Peek() == '\t') ++at_;
    return at_ > from;
  }
  // A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without colons, a label name.
  bool ReadName(bool colons, std::string* out) {
    const size_t from = at_;
    while (!AtEnd() &&
           (IsLetter(Peek()) || (colons && Peek() == ':') || (at_ > from && IsDigit(Peek())))) {
      ++at_;
    }
    *out = std::string(line_.substr(from, at_ - from));
    return at_ > from;
  }
  // Up to the next blank or the end.
  std::string ReadToken() {
    const size_t from = at_;
    while (!AtEnd() && Peek() != ' ' && Peek() != '\t') ++at_;
    return std::string(line_.substr(from, at_ - from));
  }
  std::string_view Rest() const { return line_.substr(std::min(at_, line_.size())); }
  // A quoted label value with its escapes undone; the opening quote is read already.
  bool ReadQuoted(std::string* out) {
    out->clear();
    while (!AtEnd()) {
      const char c = line_[at_++];
      if (c == '"') return true;
      if (c != '\\') {
        *out += c;
        continue;
      }
      const char e = Peek();
      ++at_;
      if (e == '\\' || e == '"') {
        *out += e;
      } else if (e == 'n') {
        *out += '\n';
      } else {
        return false;
      }
    }
    return false;  // no closing quote
  }

 private:
  std::string_view line_;
  size_t at_ = 0;
};

bool ParseValue(const std::string& token, double* value) {
  if (token == "+Inf" || token == "-Inf" || token == "NaN") {
    *value = token == "NaN" ? NAN : (token[0] == '+' ? INFINITY : -INFINITY);
    return true;
  }
  if (token.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(token.c_str(), &end);
  return end == token.c_str() + token.size();
}

// HELP text with `\\` and `\n` undone; false on another escape.
bool UnescapeHelp(std::string_view text, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      *out += text[i];
    } else if (i + 1 < text.size() && (text[i + 1] == '\\' || text[i + 1] == 'n')) {
      *out += text[++i] == 'n' ? '\n' : '\\';
    } else {
      return false;
    }
  }
  return true;
}

std::string SeriesKey(const std::string& name, const std::map<std::string, std::string>& labels) {
  std::string key = name + "{";
  for (const auto& [k, v] : labels) key += k + "=" + v + "\x1f";
  return key + "}";
}

class Parser {
 public:
  Result<Exposition> Parse(std::string_view text) {
    if (!text.empty() && text.back() != '\n') return InvalidArgument("no newline at the end");
    size_t number = 0;
    for (size_t from = 0; from < text.size();) {
      const size_t newline = text.find('\n', from);
      const std::string_view line = text.substr(from, newline - from);
      from = newline + 1;
      ++number;
      if (Status s = Line(line); !s.ok()) {
        return InvalidArgument(fmt::format("line {} ({:?}): {}", number, line, s.message()));
      }
    }
    ATOLL_RETURN_IF_ERROR(CheckHistograms());
    return std::move(out_);
  }

 private:
  struct HistogramSeries {
    std::vector<std::pair<double, double>> buckets;  // (le, count) as written
    bool has_sum = false;
    bool has_count = false;
    double count = 0;
  };

  Status Line(std::string_view line) {
    if (line.empty()) return Status::Ok();
    if (line[0] == '#') return Comment(line);
    return SampleLine(line);
  }

  // Families come in one group each: entering another ends the current one for good.
  Status Enter(const std::string& family) {
    if (family == current_) return Status::Ok();
    ended_.insert(current_);
    if (ended_.count(family)) return InvalidArgument(family + " is not written as one group");
    current_ = family;
    return Status::Ok();
  }

  Status Comment(std::string_view line) {
    LineCursor c(line.substr(1));
    c.SkipBlanks();
    const std::string keyword = c.ReadToken();
    if (keyword != "HELP" && keyword != "TYPE") return Status::Ok();  // a plain comment
    std::string name;
    if (!c.SkipBlanks() || !c.ReadName(true, &name)) return InvalidArgument("no metric name");
    ATOLL_RETURN_IF_ERROR(Enter(name));
    if (keyword == "HELP") {
      if (!c.AtEnd() && !c.Take(' ')) return InvalidArgument("no blank after the name");
      if (out_.helps.count(name)) return InvalidArgument("a second HELP for " + name);
      if (!UnescapeHelp(c.Rest(), &out_.helps[name])) return InvalidArgument("a bad escape");
      return Status::Ok();
    }
    if (!c.SkipBlanks()) return InvalidArgument("no type");
    const std::string type = c.ReadToken();
    static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                 "untyped"};
    if (!kTypes.count(type)) return InvalidArgument("unknown type " + type);
    c.SkipBlanks();
    if (!c.AtEnd()) return InvalidArgument("text after the type");
    if (out_.types.count(name)) return InvalidArgument("a second TYPE for " + name);
    if (sampled_.count(name)) return InvalidArgument("TYPE after samples of " + name);
    out_.types[name] = type;
    return Status::Ok();
  }

  // The family a sample belongs to: a histogram's or summary's suffixed samples belong to
  // the family without the suffix.
  std::string FamilyOf(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!EndsWith(name, suffix)) continue;
      const std::string base = name.substr(0, name.size() - std::string_view(suffix).size());
      auto type = out_.types.find(base);
      if (type == out_.types.end()) continue;
      if (type->second == "histogram" ||
          (type->second == "summary" && std::string_view(suffix) != "_bucket")) {
        return base;
      }
    }
    return name;
  }

  Status SampleLine(std::string_view line) {
    LineCursor c(line);
    ExpositionSample sample;
    if (!c.ReadName(true, &sample.name)) return InvalidArgument("no metric name");
    bool blank = c.SkipBlanks();
    if (c.Take('{')) {
      ATOLL_RETURN_IF_ERROR(Labels(c, &sample.labels));
      blank = c.SkipBlanks();
    }
    if (!blank) return InvalidArgument("no blank before the value");
    if (!ParseValue(c.ReadToken(), &sample.value)) return InvalidArgument("a bad value");
    if (c.SkipBlanks() && !c.AtEnd()) {
      const std::string timestamp = c.ReadToken();
      char* end = nullptr;
      (void)std::strtoll(timestamp.c_str(), &end, 10);
      if (timestamp.empty() || end != timestamp.c_str() + timestamp.size()) {
        return InvalidArgument("a bad timestamp");
      }
      c.SkipBlanks();
    }
    if (!c.AtEnd()) return InvalidArgument("text after the value");

    const std::string family = FamilyOf(sample.name);
    ATOLL_RETURN_IF_ERROR(Enter(family));
    sampled_.insert(family);
    if (!series_.insert(SeriesKey(sample.name, sample.labels)).second) {
      return InvalidArgument("a series written twice");
    }
    auto type = out_.types.find(family);
    if (type != out_.types.end() && type->second == "histogram") {
      ATOLL_RETURN_IF_ERROR(HistogramSample(family, sample));
    }
    out_.samples.push_back(std::move(sample));
    return Status::Ok();
  }

  Status Labels(LineCursor& c, std::map<std::string, std::string>* labels) {
    while (true) {
      c.SkipBlanks();
      if (c.Take('}')) return Status::Ok();
      std::string name, value;
      if (!c.ReadName(false, &name)) return InvalidArgument("a bad label name");
      c.SkipBlanks();
      if (!c.Take('=')) return InvalidArgument("no = after label " + name);
      c.SkipBlanks();
      if (!c.Take('"') || !c.ReadQuoted(&value)) {
        return InvalidArgument("a bad value of label " + name);
      }
      if (!labels->emplace(name, value).second) return InvalidArgument("label " + name + " twice");
      c.SkipBlanks();
      if (c.Take('}')) return Status::Ok();
      if (!c.Take(',')) return InvalidArgument("no , or } after label " + name);
    }
  }

  Status HistogramSample(const std::string& family, const ExpositionSample& sample) {
    std::map<std::string, std::string> base = sample.labels;
    base.erase("le");
    HistogramSeries& h = histograms_[SeriesKey(family, base)];
    if (sample.name == family + "_bucket") {
      auto le = sample.labels.find("le");
      double bound = 0;
      if (le == sample.labels.end() || !ParseValue(le->second, &bound)) {
        return InvalidArgument("a bucket without a valid le");
      }
      h.buckets.emplace_back(bound, sample.value);
    } else if (sample.name == family + "_sum") {
      h.has_sum = true;
    } else if (sample.name == family + "_count") {
      h.has_count = true;
      h.count = sample.value;
    } else {
      return InvalidArgument("a histogram sample without _bucket, _sum or _count");
    }
    return Status::Ok();
  }

  Status CheckHistograms() const {
    for (const auto& [key, h] : histograms_) {
      const std::string series = key.substr(0, key.find('{'));
      if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) {
        return InvalidArgument("histogram " + series + " has no +Inf bucket last");
      }
      for (size_t i = 1; i < h.buckets.size(); ++i) {
        if (!(h.buckets[i].first > h.buckets[i - 1].first) ||
            h.buckets[i].second < h.buckets[i - 1].second) {
          return InvalidArgument("histogram " + series + ": buckets not growing with le");
        }
      }
      if (!h.has_sum || !h.has_count || h.count != h.buckets.back().second) {
        return InvalidArgument("histogram " + series + ": no _sum, or _count unlike +Inf");
      }
    }
    return Status::Ok();
  }

  Exposition out_;
  std::string current_;
  std::set<std::string> ended_;
  std::set<std::string> sampled_;  // families with a sample so far
  std::set<std::string> series_;
  std::map<std::string, HistogramSeries> histograms_;
};

}  // namespace

std::vector<const ExpositionSample*> Exposition::Find(
    const std::string& name, const std::map<std::string, std::string>& match) const {
  std::vector<const ExpositionSample*> found;
  for (const auto& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (all) found.push_back(&s);
  }
  return found;
}

double Exposition::Sum(const std::string& name,
                       const std::map<std::string, std::string>& match) const {
  double total = 0;
  for (const ExpositionSample* s : Find(name, match)) total += s->value;
  return total;
}

Result<Exposition> ParseExposition(std::string_view text) { return Parser().Parse(text); }

}  // namespace atl::testing
