// `atoll dashboard`: a web page fed live by the event stream (cpp-httplib). It serves
//   GET /             the page (dashboard.html, embedded at build time)
//   GET /api/state    the ClusterView as JSON (cluster_view.h), with "rm" and "notice";
//                     ?since=N gives only the timeline spans after span seq N
//   GET /api/stream   Server-Sent Events: a "state" event (the same JSON, spans after the
//                     previous push) every --push-interval-ms; its id is the newest span
//                     seq, so a reconnecting browser (Last-Event-ID) resumes where it was
//   GET /metrics      the cluster's metrics in Prometheus's text format (cluster_metrics.h),
//                     for a Prometheus server to scrape
//   GET /healthz      "ok"
// on 127.0.0.1:8470 by default. Listening elsewhere (--listen 0.0.0.0:8470, e.g. in a
// container) serves the cluster's state to whoever can reach the port: there is no login.
//
// Threads: the command's thread reads the event bus and the RM into the view; the HTTP
// server's threads read the view; one mutex guards it.
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "cli/cluster_metrics.h"
#include "cli/cluster_view.h"
#include "cli/commands.h"
#include "cli/live_feed.h"
#include "cli/prometheus_text.h"
#include "common/base/mutex.h"
#include "common/net/event_loop.h"

namespace atl {

extern const char kDashboardPage[];  // dashboard_page.cc, generated from dashboard.html

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct DashboardOptions {
  std::string listen = "127.0.0.1:8470";
  int64_t push_interval_ms = 500;
  int64_t status_interval_ms = 2000;
};

// The view and what the feed thread knows about the RM, shared with the HTTP threads.
class SharedView {
 public:
  explicit SharedView(std::string rm) : rm_(std::move(rm)) {}

  template <typename F>
  void Update(F&& f) {
    MutexLock lock(mu_);
    f(view_, notice_);
  }

  // The JSON of /api/state.
  std::string Json(uint64_t spans_after) {
    MutexLock lock(mu_);
    auto j = view_.ToJson(spans_after);
    j["rm"] = rm_;
    j["notice"] = notice_;
    return j.dump();
  }

  // The text of /metrics.
  Result<std::string> Metrics() {
    MutexLock lock(mu_);
    return ClusterMetricsText(view_, notice_.empty());
  }

 private:
  Mutex mu_;
  ClusterView view_ GUARDED_BY(mu_);
  std::string notice_ GUARDED_BY(mu_);
  const std::string rm_;
};

uint64_t ParseSeq(const std::string& text) {
  try {
    return text.empty() ? 0 : std::stoull(text);
  } catch (const std::exception&) {
    return 0;
  }
}

// The newest span seq in a /api/state JSON text, for the SSE id; cheap: one search.
uint64_t SpanSeqOf(const std::string& json) {
  const auto at = json.rfind("\"span_seq\":");
  return at == std::string::npos ? 0 : ParseSeq(json.substr(at + 11, 20));
}

void Serve(httplib::Server& server, SharedView& shared, const DashboardOptions& opts,
           std::atomic<bool>& stopping) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(kDashboardPage, "text/html; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/api/state", [&shared](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(shared.Json(ParseSeq(req.get_param_value("since"))), "application/json");
  });
  server.Get("/metrics", [&shared](const httplib::Request&, httplib::Response& res) {
    auto text = shared.Metrics();
    if (!text.ok()) {
      res.status = 500;
      res.set_content(text.status().ToString() + "\n", "text/plain");
      return;
    }
    res.set_content(*text, PrometheusText::kContentType);
  });
  server.Get("/api/stream", [&shared, &opts, &stopping](const httplib::Request& req,
                                                        httplib::Response& res) {
    auto cursor = std::make_shared<uint64_t>(ParseSeq(req.get_header_value("Last-Event-ID")));
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "text/event-stream", [&shared, &opts, &stopping, cursor](size_t, httplib::DataSink& sink) {
          if (stopping) {
            sink.done();
            return false;
          }
          const std::string json = shared.Json(*cursor);
          const uint64_t seq = SpanSeqOf(json);
          const std::string message = fmt::format("id: {}\nevent: state\ndata: {}\n\n", seq, json);
          if (!sink.write(message.data(), message.size())) return false;
          *cursor = seq;
          const auto until = Clock::now() + milliseconds(opts.push_interval_ms);
          while (Clock::now() < until && !stopping) std::this_thread::sleep_for(milliseconds(20));
          return true;
        });
  });
}

void RunDashboard(const DashboardOptions& opts, const GlobalOptions& global) {
  const auto colon = opts.listen.rfind(':');
  if (colon == std::string::npos) Fail("dashboard: --listen wants HOST:PORT, got " + opts.listen);
  const std::string host = opts.listen.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(opts.listen.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) Fail("dashboard: bad port in --listen " + opts.listen);

  auto info = ResolveCluster(global);
  if (!info.ok()) Fail(info.status());
  InstallShutdownSignals();
  signal(SIGPIPE, SIG_IGN);  // a browser that goes away must not end the dashboard
  zmq::context_t context(1);
  if (Status s = SecureContext(context, global); !s.ok()) Fail(s.WithContext("dashboard"));
  LiveFeed feed(context, *info);
  if (Status s = feed.Connect(); !s.ok()) Fail(s.WithContext("dashboard"));
  SharedView shared(info->rm_endpoint);
  auto status = feed.ClusterStatus(milliseconds(3000));
  if (!status.ok()) {
    Fail("dashboard: RM at " + info->rm_endpoint + " did not answer: " +
         status.status().ToString() + " (is the cluster running? see `atoll up`)");
  }
  shared.Update([&](ClusterView& view, std::string&) { view.ApplyStatus(*status); });

  httplib::Server server;
  std::atomic<bool> stopping{false};
  Serve(server, shared, opts, stopping);
  const int bound =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) Fail("dashboard: cannot listen on " + opts.listen);
  if (host != "127.0.0.1" && host != "localhost" && host != "::1") {
    std::cerr << "atoll: dashboard: listening on " << host
              << ": anyone who can reach it sees the cluster (there is no login)" << std::endl;
  }
  std::thread http([&server] { server.listen_after_bind(); });
  std::cout << "atoll dashboard: serving http://"
            << (host.find(':') != std::string::npos ? "[" + host + "]" : host) << ":" << bound
            << "/ for the cluster at " << info->rm_endpoint << " (Ctrl-C stops)" << std::endl;

  auto next_status = Clock::now() + milliseconds(opts.status_interval_ms);
  Status failure;
  while (!ShutdownRequested()) {
    auto events = feed.Receive(milliseconds(100));
    if (!events.ok()) {
      if (!ShutdownRequested()) failure = events.status().WithContext("dashboard");
      break;
    }
    if (!events->empty()) {
      shared.Update([&](ClusterView& view, std::string&) {
        for (const Event& e : *events) view.Apply(e);
      });
    }
    if (Clock::now() >= next_status) {
      auto s = feed.ClusterStatus(milliseconds(1000));
      shared.Update([&](ClusterView& view, std::string& notice) {
        if (s.ok()) {
          view.ApplyStatus(*s);
          notice.clear();
        } else {
          notice = "the RM is not answering: " + s.status().ToString();
        }
      });
      next_status = Clock::now() + milliseconds(opts.status_interval_ms);
    }
  }
  stopping = true;
  server.stop();
  http.join();
  if (!failure.ok()) Fail(failure);
}

}  // namespace

void AddDashboardCommand(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<DashboardOptions>();
  auto* cmd = app.add_subcommand(
      "dashboard",
      "Serve a live web dashboard (cluster, programs, a gang timeline per device) and the "
      "cluster's metrics for Prometheus on /metrics");
  cmd->add_option("--listen", opts->listen,
                  "HOST:PORT to serve on; port 0 picks a free one (printed on stdout)")
      ->capture_default_str();
  cmd->add_option("--push-interval-ms", opts->push_interval_ms,
                  "Time between two pushes to each open page")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{60000}));
  cmd->add_option("--status-interval-ms", opts->status_interval_ms,
                  "Time between two GetClusterStatus calls to the RM (host liveness, slices)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}));
  cmd->callback([opts, &global] { RunDashboard(*opts, global); });
}

}  // namespace atl
