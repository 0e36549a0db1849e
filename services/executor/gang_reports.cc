#include "services/executor/gang_reports.h"

#include <algorithm>

namespace atl::executor {

void GangReports::Expect(const std::string& scheduler, uint64_t gang_seq) {
  Pending& p = pending_[{scheduler, gang_seq}];
  p.report.gang_seq = gang_seq;
  p.shards_left++;
}

namespace {

void Count(proto::GangDone& report, uint64_t busy_us, const Status& outcome) {
  report.shards++;
  report.busy_us = std::max(report.busy_us, busy_us);
  if (report.error_code == 0 && !outcome.ok()) {
    report.error_code = static_cast<int32_t>(outcome.code());
    report.error = outcome.message();
  }
}

}  // namespace

void GangReports::ShardDone(const std::string& scheduler, uint64_t gang_seq, uint64_t busy_us,
                            const Status& outcome) {
  auto it = pending_.find({scheduler, gang_seq});
  if (it == pending_.end()) {
    proto::GangDone alone;
    alone.gang_seq = gang_seq;
    Count(alone, busy_us, outcome);
    ready_.emplace_back(scheduler, alone);
    return;
  }
  proto::GangDone& report = it->second.report;
  Count(report, busy_us, outcome);
  if (--it->second.shards_left > 0) return;
  ready_.emplace_back(scheduler, report);
  pending_.erase(it);
}

std::vector<std::pair<std::string, proto::GangDone>> GangReports::TakeReady() {
  return std::exchange(ready_, {});
}

}  // namespace atl::executor
