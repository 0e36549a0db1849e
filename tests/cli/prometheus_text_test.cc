// The Prometheus text formatter (cli/prometheus_text.h): the exposition format, escaping,
// atoll's naming rules; and the strict reader the tests check its output with
// (tests/cli/exposition_parser.h), which must refuse what a Prometheus server would.
#include "cli/prometheus_text.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli/exposition_parser.h"
#include "tests/status_matchers.h"

namespace atl {
namespace {

using ::testing::HasSubstr;
using testing::ParseExposition;

TEST(PrometheusTextTest, WritesHelpTypeAndSamples) {
  PrometheusText out;
  out.Family("atoll_host_up", MetricType::kGauge, "1 while alive.");
  out.Sample({{"island", "island0"}, {"host", "i0h0"}}, 1);
  out.Sample({{"island", "island0"}, {"host", "i0h1"}}, 0);
  out.Family("atoll_sent_bytes_total", MetricType::kCounter, "Bytes sent.");
  out.Sample({}, 1234567);
  auto text = std::move(out).Finish();
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text,
            "# HELP atoll_host_up 1 while alive.\n"
            "# TYPE atoll_host_up gauge\n"
            "atoll_host_up{island=\"island0\",host=\"i0h0\"} 1\n"
            "atoll_host_up{island=\"island0\",host=\"i0h1\"} 0\n"
            "# HELP atoll_sent_bytes_total Bytes sent.\n"
            "# TYPE atoll_sent_bytes_total counter\n"
            "atoll_sent_bytes_total 1234567\n");
  EXPECT_STREQ(PrometheusText::kContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(PrometheusText::EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(PrometheusText::EscapeLabelValue("plain é"), "plain é");
  const std::string nasty = "host \"x\"\\\nsecond line";
  PrometheusText out;
  out.Family("atoll_store_objects", MetricType::kGauge, "Objects\\in a \"store\"\nper host.");
  out.Sample({{"host", nasty}}, 3);
  auto text = std::move(out).Finish();
  ASSERT_THAT(text, IsOk());
  EXPECT_THAT(*text,
              HasSubstr("# HELP atoll_store_objects Objects\\\\in a \"store\"\\nper host.\n"));
  EXPECT_THAT(*text,
              HasSubstr("atoll_store_objects{host=\"host \\\"x\\\"\\\\\\nsecond line\"} 3\n"));
  // And a reader gets the original strings back.
  auto parsed = ParseExposition(*text);
  ASSERT_THAT(parsed, IsOk());
  ASSERT_EQ(parsed->samples.size(), 1u);
  EXPECT_EQ(parsed->samples[0].labels.at("host"), nasty);
  EXPECT_EQ(parsed->helps.at("atoll_store_objects"), "Objects\\in a \"store\"\nper host.");
}

TEST(PrometheusTextTest, FormatsValuesExactly) {
  EXPECT_EQ(PrometheusText::FormatValue(0), "0");
  EXPECT_EQ(PrometheusText::FormatValue(1), "1");
  EXPECT_EQ(PrometheusText::FormatValue(0.25), "0.25");
  EXPECT_EQ(PrometheusText::FormatValue(134217728), "134217728");
  EXPECT_EQ(PrometheusText::FormatValue(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(std::stod(PrometheusText::FormatValue(0.1 + 0.2)), 0.1 + 0.2);
  EXPECT_EQ(std::stod(PrometheusText::FormatValue(1e-7)), 1e-7);
  EXPECT_EQ(PrometheusText::FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(PrometheusText::FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(PrometheusText::FormatValue(NAN), "NaN");
}

TEST(PrometheusTextTest, WritesAHistogramCumulatively) {
  Histogram h({0.01, 0.1, 1});
  for (double v : {0.005, 0.05, 0.07, 0.1, 3.0}) h.Observe(v);
  PrometheusText out;
  out.Family("atoll_run_duration_seconds", MetricType::kHistogram, "Run durations.");
  out.Sample({{"island", "a"}}, h);
  auto text = std::move(out).Finish();
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text,
            "# HELP atoll_run_duration_seconds Run durations.\n"
            "# TYPE atoll_run_duration_seconds histogram\n"
            "atoll_run_duration_seconds_bucket{island=\"a\",le=\"0.01\"} 1\n"
            "atoll_run_duration_seconds_bucket{island=\"a\",le=\"0.1\"} 4\n"
            "atoll_run_duration_seconds_bucket{island=\"a\",le=\"1\"} 4\n"
            "atoll_run_duration_seconds_bucket{island=\"a\",le=\"+Inf\"} 5\n"
            "atoll_run_duration_seconds_sum{island=\"a\"} 3.225\n"
            "atoll_run_duration_seconds_count{island=\"a\"} 5\n");
  EXPECT_THAT(ParseExposition(*text), IsOk());
  // An empty histogram is written too: all zeros.
  PrometheusText empty;
  empty.Family("atoll_run_duration_seconds", MetricType::kHistogram, "Run durations.");
  empty.Sample({}, Histogram({1}));
  auto zeros = std::move(empty).Finish();
  ASSERT_THAT(zeros, IsOk());
  EXPECT_THAT(*zeros, HasSubstr("atoll_run_duration_seconds_bucket{le=\"+Inf\"} 0\n"));
  EXPECT_THAT(ParseExposition(*zeros), IsOk());
}

// Each case makes one mistake; Finish() must name it.
struct Misuse {
  const char* what;
  void (*write)(PrometheusText&);
  const char* message;
};

const Misuse kMisuses[] = {
    {"no atoll_ prefix", [](PrometheusText& o) { o.Family("host_up", MetricType::kGauge, ""); },
     "atoll_"},
    {"upper case", [](PrometheusText& o) { o.Family("atoll_Host_up", MetricType::kGauge, ""); },
     "snake case"},
    {"only the prefix", [](PrometheusText& o) { o.Family("atoll_", MetricType::kGauge, ""); },
     "atoll_"},
    {"a dash", [](PrometheusText& o) { o.Family("atoll_host-up", MetricType::kGauge, ""); },
     "snake case"},
    {"counter without _total",
     [](PrometheusText& o) { o.Family("atoll_sent_bytes", MetricType::kCounter, ""); },
     "not ending in _total"},
    {"gauge with _total",
     [](PrometheusText& o) { o.Family("atoll_queued_total", MetricType::kGauge, ""); },
     "no counter"},
    {"histogram with a sample suffix",
     [](PrometheusText& o) { o.Family("atoll_run_count", MetricType::kHistogram, ""); }, "suffix"},
    {"a family twice",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Family("atoll_up", MetricType::kGauge, "");
     },
     "twice"},
    {"a sample first", [](PrometheusText& o) { o.Sample({}, 1); }, "before any family"},
    {"a label name with a digit first",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Sample({{"0x", "v"}}, 1);
     },
     "label"},
    {"a reserved label name",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Sample({{"__name__", "v"}}, 1);
     },
     "label"},
    {"le outside a histogram's buckets",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Sample({{"le", "1"}}, 1);
     },
     "label"},
    {"a label twice",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Sample({{"host", "a"}, {"host", "b"}}, 1);
     },
     "repeated"},
    {"a series twice",
     [](PrometheusText& o) {
       o.Family("atoll_up", MetricType::kGauge, "");
       o.Sample({{"host", "a"}}, 1);
       o.Sample({{"host", "a"}}, 0);
     },
     "series"},
    {"a negative counter",
     [](PrometheusText& o) {
       o.Family("atoll_sent_total", MetricType::kCounter, "");
       o.Sample({}, -1);
     },
     "-1"},
    {"a NaN counter",
     [](PrometheusText& o) {
       o.Family("atoll_sent_total", MetricType::kCounter, "");
       o.Sample({}, NAN);
     },
     "NaN"},
    {"a single value for a histogram",
     [](PrometheusText& o) {
       o.Family("atoll_run_seconds", MetricType::kHistogram, "");
       o.Sample({}, 1);
     },
     "single sample in a histogram"},
    {"a histogram for a gauge",
     [](PrometheusText& o) {
       o.Family("atoll_run_seconds", MetricType::kGauge, "");
       o.Sample({}, Histogram({1}));
     },
     "histogram sample in a gauge"},
};

TEST(PrometheusTextTest, RefusesNamesAndSamplesAgainstTheRules) {
  for (const Misuse& m : kMisuses) {
    PrometheusText out;
    m.write(out);
    out.Family("atoll_fine", MetricType::kGauge, "A later family does not hide the mistake.");
    auto text = std::move(out).Finish();
    ASSERT_FALSE(text.ok()) << m.what << ": accepted";
    EXPECT_EQ(text.status().code(), Code::kInvalidArgument) << m.what;
    EXPECT_THAT(text.status().message(), HasSubstr(m.message)) << m.what;
  }
}

TEST(PrometheusTextTest, NoFamiliesIsAnEmptyText) {
  auto text = PrometheusText().Finish();
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text, "");
}

// The reader must be able to fail, or the tests that use it prove nothing.
TEST(ExpositionParserTest, AcceptsTheFormatsOwnExample) {
  auto parsed = ParseExposition(
      "# HELP http_requests_total The total number of HTTP requests.\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\",}    3 1395066363000\n"
      "\n"
      "# A normal comment.\n"
      "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find "
      "file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
      "metric_without_timestamp_and_labels 12.47\n"
      "something_weird{problem=\"division by zero\"} +Inf -3982045\n"
      "# TYPE rpc_duration_seconds summary\n"
      "rpc_duration_seconds{quantile=\"0.5\"} 4773\n"
      "rpc_duration_seconds_sum 1.7560473e+07\n"
      "rpc_duration_seconds_count 2693\n");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->types.at("rpc_duration_seconds"), "summary");
  EXPECT_EQ(parsed->Sum("http_requests_total", {{"method", "post"}}), 1030);
  EXPECT_EQ(parsed->Find("msdos_file_access_time_seconds")[0]->labels.at("error"),
            "Cannot find file:\n\"FILE.TXT\"");
  EXPECT_TRUE(std::isinf(parsed->Sum("something_weird")));
}

TEST(ExpositionParserTest, RefusesWhatPrometheusRefuses) {
  const std::pair<const char*, const char*> bad[] = {
      {"a_metric 1", "no newline"},
      {"a-metric 1\n", "no blank before the value"},
      {"a_metric{0a=\"x\"} 1\n", "label name"},
      {"a_metric{a=\"x\\t\"} 1\n", "label a"},
      {"a_metric{a=\"x} 1\n", "label a"},
      {"a_metric{a=\"x\",a=\"y\"} 1\n", "twice"},
      {"a_metric 1,5\n", "bad value"},
      {"a_metric 1 2 3\n", "after the value"},
      {"a_metric 1 soon\n", "timestamp"},
      {"# HELP a_metric bad \\t escape\n", "escape"},
      {"# TYPE a_metric counter\n# TYPE a_metric counter\n", "second TYPE"},
      {"# TYPE a_metric sometimes\n", "unknown type"},
      {"a_metric 1\n# TYPE a_metric gauge\n", "TYPE after samples"},
      {"a_metric{x=\"1\"} 1\nb_metric 1\na_metric{x=\"2\"} 1\n", "one group"},
      {"a_metric 1\na_metric 2\n", "twice"},
      {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
       "growing"},
      {"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "+Inf"},
      {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n", "_count"},
      {"# TYPE h histogram\nh_bucket 1\n", "le"},
      {"# TYPE h histogram\nh 1\n", "without _bucket"},
  };
  for (const auto& [text, why] : bad) {
    auto parsed = ParseExposition(text);
    ASSERT_FALSE(parsed.ok()) << "accepted: " << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(why)) << text;
  }
}

}  // namespace
}  // namespace atl
