#include "bench/client/hop_trace.h"

#include <algorithm>

#include <fmt/format.h>

#include "bench/common/bench_result.h"
#include "common/net/transport.h"

namespace atl::bench {

namespace {

constexpr const char* kTopics[] = {"program.scheduled", "dispatch.admitted", "gang.done",
                                   "object.sealed"};

int64_t Micros(const Event& e, const char* field) { return e.fields.at(field).get<int64_t>(); }
int64_t Stamp(const Event& e) { return Micros(e, "ts_us"); }

}  // namespace

const std::vector<std::string>& RoundTripHops() {
  static const std::vector<std::string> hops = {
      "client_submit", "to_scheduler",     "to_executor", "to_device_thread",
      "compute",       "to_executor_loop", "to_store",    "to_client"};
  return hops;
}

const std::vector<std::string>& ChainHops() {
  static const std::vector<std::string> hops = {"compute", "to_next_start", "report"};
  return hops;
}

const std::vector<std::string>& ChainRunHops() {
  static const std::vector<std::string> hops = {"client_submit", "to_scheduler", "to_first_start",
                                                "chain",         "last_report",  "to_store",
                                                "to_client"};
  return hops;
}

const std::vector<std::string>& OpByOpHops() {
  static const std::vector<std::string> hops = {"compute", "to_next_start", "client_ahead",
                                                "admitted_ahead"};
  return hops;
}

HopTrace::HopTrace(zmq::context_t& context, std::string events_out)
    : socket_(net::MakeSocket(context, zmq::socket_type::sub)), endpoint_(std::move(events_out)) {}

Status HopTrace::Start(const std::function<Status()>& ping) {
  for (const char* topic : kTopics) socket_.set(zmq::sockopt::subscribe, topic);
  ATOLL_RETURN_IF_ERROR(net::Connect(socket_, endpoint_));
  // A subscription takes effect a moment after connecting; events before it are lost.
  for (int attempt = 0; attempt < 100; ++attempt) {
    ATOLL_RETURN_IF_ERROR(ping());
    ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(socket_, std::chrono::milliseconds(100)));
    if (frames) {
      ATOLL_RETURN_IF_ERROR(Collect(std::chrono::milliseconds(200)));
      Clear();
      return Status::Ok();
    }
  }
  return DeadlineExceeded("no event from " + endpoint_ + " after 100 computations");
}

Status HopTrace::Collect(std::chrono::milliseconds settle) {
  while (true) {
    ATOLL_ASSIGN_OR_RETURN(auto frames, net::RecvFrames(socket_, settle));
    if (!frames) return Status::Ok();
    if (frames->size() != 2) continue;
    ATOLL_ASSIGN_OR_RETURN(Event e, DecodeEvent((*frames)[0], (*frames)[1]));
    events_.push_back(std::move(e));
  }
}

std::vector<const Event*> HopTrace::Of(uint64_t run, const std::string& topic) const {
  std::vector<const Event*> out;
  for (const Event& e : events_) {
    if (e.topic == topic && e.fields.contains("run") && e.fields["run"].get<uint64_t>() == run) {
      out.push_back(&e);
    }
  }
  return out;
}

Result<const Event*> HopTrace::SealedBetween(uint64_t run, int64_t from_us, int64_t to_us) const {
  const Event* sealed = nullptr;
  for (const Event& e : events_) {
    if (e.topic != "object.sealed" || Stamp(e) < from_us || Stamp(e) > to_us) continue;
    if (sealed != nullptr) return NotFound(fmt::format("run {}: two objects sealed", run));
    sealed = &e;
  }
  if (sealed == nullptr) return NotFound(fmt::format("run {}: no object.sealed", run));
  return sealed;
}

Result<Hops> HopTrace::RoundTrip(uint64_t run, int64_t submit_us, int64_t sent_us,
                                 int64_t done_us) const {
  const auto scheduled = Of(run, "program.scheduled");
  const auto admitted = Of(run, "dispatch.admitted");
  const auto done = Of(run, "gang.done");
  if (scheduled.size() != 1 || admitted.size() != 1 || done.size() != 1) {
    return NotFound(fmt::format("run {}: {} program.scheduled, {} dispatch.admitted, {} gang.done",
                                run, scheduled.size(), admitted.size(), done.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(const Event* sealed, SealedBetween(run, Stamp(*done[0]), done_us));
  const int64_t at[] = {submit_us,
                        sent_us,
                        Stamp(*scheduled[0]),
                        Stamp(*admitted[0]),
                        Micros(*done[0], "start_us"),
                        Micros(*done[0], "end_us"),
                        Stamp(*done[0]),
                        Stamp(*sealed),
                        done_us};
  Hops hops;
  for (size_t i = 0; i < RoundTripHops().size(); ++i) {
    hops[RoundTripHops()[i]] = static_cast<double>(at[i + 1] - at[i]);
  }
  return hops;
}

std::vector<const Event*> HopTrace::Gangs(uint64_t run) const {
  auto done = Of(run, "gang.done");
  std::sort(done.begin(), done.end(), [](const Event* a, const Event* b) {
    return a->fields["gang"].get<uint64_t>() < b->fields["gang"].get<uint64_t>();
  });
  return done;
}

Result<Hops> HopTrace::ChainRun(uint64_t run, int64_t submit_us, int64_t sent_us,
                                int64_t done_us) const {
  const auto scheduled = Of(run, "program.scheduled");
  const auto done = Gangs(run);
  if (scheduled.size() != 1 || done.size() < 2) {
    return NotFound(fmt::format("run {}: {} program.scheduled, {} gang.done", run, scheduled.size(),
                                done.size()));
  }
  ATOLL_ASSIGN_OR_RETURN(const Event* sealed, SealedBetween(run, Stamp(*done.back()), done_us));
  const int64_t at[] = {submit_us,
                        sent_us,
                        Stamp(*scheduled[0]),
                        Micros(*done.front(), "start_us"),
                        Micros(*done.back(), "end_us"),
                        Stamp(*done.back()),
                        Stamp(*sealed),
                        done_us};
  Hops hops;
  for (size_t i = 0; i < ChainRunHops().size(); ++i) {
    hops[ChainRunHops()[i]] = static_cast<double>(at[i + 1] - at[i]);
  }
  return hops;
}

Result<Hops> HopTrace::Chain(uint64_t run) const {
  const auto done = Gangs(run);
  if (done.size() < 2) {
    return NotFound(fmt::format("run {}: {} gang.done events, not a chain", run, done.size()));
  }
  std::vector<double> compute, to_next, report;
  for (size_t i = 0; i < done.size(); ++i) {
    compute.push_back(
        static_cast<double>(Micros(*done[i], "end_us") - Micros(*done[i], "start_us")));
    report.push_back(static_cast<double>(Stamp(*done[i]) - Micros(*done[i], "end_us")));
    if (i + 1 < done.size()) {
      to_next.push_back(
          static_cast<double>(Micros(*done[i + 1], "start_us") - Micros(*done[i], "end_us")));
    }
  }
  return Hops{
      {"compute", Median(compute)}, {"to_next_start", Median(to_next)}, {"report", Median(report)}};
}

Result<Hops> HopTrace::OpByOp(const std::vector<uint64_t>& runs,
                              const std::vector<int64_t>& sent_us) const {
  // A dispatch can carry several runs' gangs: it is found by its gangs, not its first run.
  std::vector<const Event*> admissions;
  for (const Event& e : events_) {
    if (e.topic == "dispatch.admitted") admissions.push_back(&e);
  }
  auto admission_of = [&](uint64_t gang) -> const Event* {
    for (const Event* e : admissions) {
      if (e->fields["first_gang"].get<uint64_t>() <= gang &&
          gang <= e->fields["last_gang"].get<uint64_t>()) {
        return e;
      }
    }
    return nullptr;
  };
  std::map<std::string, std::vector<double>> per_hop;
  const Event* before = nullptr;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto done = Of(runs[i], "gang.done");
    const Event* admitted =
        done.size() == 1 ? admission_of(done[0]->fields["gang"].get<uint64_t>()) : nullptr;
    if (admitted == nullptr) {
      return NotFound(fmt::format("run {}: {} gang.done, {} admission", runs[i], done.size(),
                                  admitted == nullptr ? "no" : "its"));
    }
    const Event& now = *done[0];
    per_hop["compute"].push_back(
        static_cast<double>(Micros(now, "end_us") - Micros(now, "start_us")));
    if (before != nullptr) {
      const int64_t previous_end = Micros(*before, "end_us");
      per_hop["to_next_start"].push_back(
          static_cast<double>(Micros(now, "start_us") - previous_end));
      per_hop["client_ahead"].push_back(static_cast<double>(previous_end - sent_us[i]));
      per_hop["admitted_ahead"].push_back(static_cast<double>(previous_end - Stamp(*admitted)));
    }
    before = &now;
  }
  if (per_hop["to_next_start"].empty()) return NotFound("an op-by-op trace needs two calls");
  Hops hops;
  for (const auto& [hop, us] : per_hop) hops[hop] = Median(us);
  return hops;
}

}  // namespace atl::bench
