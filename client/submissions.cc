#include "client/submissions.h"

#include <fmt/format.h>

#include "common/proto/protocol.h"

namespace atl {

void Submissions::Ended(uint64_t run) {
  failed_.erase(run);
  live_.erase(run);
}

void Submissions::Sent(const std::string& scheduler, uint64_t request, uint64_t run) {
  unanswered_[scheduler][request] = run;
  acks_missing_[run]++;
}

size_t Submissions::Unanswered(const std::string& scheduler) const {
  auto it = unanswered_.find(scheduler);
  return it == unanswered_.end() ? 0 : it->second.size();
}

const Status* Submissions::Failure(uint64_t run) const {
  auto it = failed_.find(run);
  return it == failed_.end() ? nullptr : &it->second;
}

Submissions::Heard Submissions::Take(const std::string& scheduler, const proto::Header& header) {
  // Notices carry no request id.
  if (header.request_id() == 0 && header.kind() == proto::Kind::kRunDone) {
    auto done = header.As<proto::RunDone>();
    if (!done.ok()) return {};
    return {Heard::kRunDone, done->run_id, /*ends_reads=*/true};
  }
  if (header.request_id() == 0 && header.kind() == proto::Kind::kRunFailed) {
    auto notice = header.As<proto::RunFailed>();
    // Only runs still held: a notice may come after its run was dropped.
    if (!notice.ok() || !live_.count(notice->run_id) || failed_.count(notice->run_id)) return {};
    failed_[notice->run_id] = proto::FromError({notice->error_code, notice->error})
                                  .WithContext(fmt::format("run {} failed on island scheduler {}",
                                                           notice->run_id, scheduler));
    return {Heard::kRunFailed, notice->run_id};
  }
  auto pending = unanswered_.find(scheduler);
  if (pending == unanswered_.end()) return {};
  auto it = pending->second.find(header.request_id());
  if (it == pending->second.end()) return {};
  const uint64_t run = it->second;
  pending->second.erase(it);
  if (--acks_missing_[run] == 0) acks_missing_.erase(run);
  if (header.kind() != proto::Kind::kError) return {Heard::kAccepted, run};
  auto error = header.As<proto::Error>();
  failed_[run] = (error.ok() ? proto::FromError(*error) : error.status())
                     .WithContext("scheduler " + scheduler + " refused run " + std::to_string(run));
  // It will not run there: no RunDone comes.
  return {Heard::kRefused, run, /*ends_reads=*/true};
}

}  // namespace atl
