#include "common/net/rejection_log.h"

#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace atl::net {

namespace {

constexpr char kOtherPeers[] = "other peers";

}  // namespace

std::string HexBytes(std::string_view bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) fmt::format_to(std::back_inserter(hex), "{:02x}", b);
  return hex;
}

RejectionLog::RejectionLog(RejectionLogOptions options) : options_(std::move(options)) {
  if (!options_.sink) {
    options_.sink = [](const std::string& line) { spdlog::warn("{}", line); };
  }
}

RejectionLog::TimePoint RejectionLog::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void RejectionLog::Reject(const std::string& peer, const Status& error) {
  ++total_;
  const TimePoint now = Now();
  // Past the first max_peers peers of an interval, every new one counts as "other peers".
  std::string_view key = peer;
  if (!peers_.contains(peer) && peers_.size() >= options_.max_peers) key = kOtherPeers;
  auto [it, fresh] = peers_.try_emplace(std::string(key));
  Peer& p = it->second;
  if (fresh || (p.unlogged == 0 && now - p.since >= options_.interval)) {
    options_.sink(fmt::format("{} 1 {} from {}: {}", options_.verb, options_.one, it->first,
                              error.ToString()));
    p = Peer{now, 0, Status::Ok()};
    return;
  }
  ++p.unlogged;
  p.last = error;
  if (now - p.since >= options_.interval) WriteCount(it->first, p, now);
}

void RejectionLog::Flush() {
  const TimePoint now = Now();
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& p = it->second;
    if (now - p.since < options_.interval) {
      ++it;
    } else if (p.unlogged > 0) {
      WriteCount(it->first, p, now);
      ++it;
    } else {
      it = peers_.erase(it);
    }
  }
}

void RejectionLog::WriteCount(const std::string& peer, Peer& p, TimePoint now) {
  const double seconds = std::chrono::duration<double>(now - p.since).count();
  options_.sink(fmt::format("{} {} {} from {} in the last {:.1f} s; last: {}", options_.verb,
                            p.unlogged, p.unlogged == 1 ? options_.one : options_.many, peer,
                            seconds, p.last.ToString()));
  p.since = now;
  p.unlogged = 0;
  p.last = Status::Ok();
}

}  // namespace atl::net
