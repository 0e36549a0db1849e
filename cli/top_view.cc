#include "cli/top_view.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace atl {

namespace {

constexpr size_t kBarWidth = 20;
// Column layout shared by the header and every row.
constexpr const char* kHeader =
    "{:<24} {:<5} {:<28} {:>6} {:>7}  {}";  // name, kind, busy, queued, gangs, memory

std::string Bar(double pct) {
  const auto filled =
      static_cast<size_t>(std::lround(std::clamp(pct, 0.0, 100.0) / 100.0 * kBarWidth));
  return "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
}

// Programs that still run come first, then the newest.
std::vector<const ClusterView::Program*> OrderedPrograms(const ClusterView& view) {
  std::vector<const ClusterView::Program*> out;
  for (const auto& [run, p] : view.programs()) out.push_back(&p);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    if (a->finished() != b->finished()) return !a->finished();
    const int64_t ta = std::max(a->scheduled_us, a->last_end_us);
    const int64_t tb = std::max(b->scheduled_us, b->last_end_us);
    return ta != tb ? ta > tb : a->run > b->run;
  });
  return out;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const double kib = static_cast<double>(bytes) / 1024.0;
  if (kib < 1024) return fmt::format("{:.1f} KiB", kib);
  const double mib = kib / 1024.0;
  if (bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (mib < 1024) return fmt::format("{:.1f} MiB", mib);
  return fmt::format("{:.2f} GiB", mib / 1024.0);
}

std::vector<std::string> RenderTop(const ClusterView& view, const TopRenderOptions& options) {
  std::vector<std::string> lines;
  size_t alive = 0;
  for (const auto& [name, h] : view.hosts()) alive += h.alive ? 1 : 0;
  size_t connected = 0;
  for (const auto& [id, c] : view.clients()) connected += c.connected ? 1 : 0;
  lines.push_back(
      fmt::format("atoll top  rm {}  {} islands  {} hosts ({} alive)  {} devices  {} clients  {}",
                  options.rm_endpoint, view.islands().size(), view.hosts().size(), alive,
                  view.devices().size(), connected, options.clock));
  lines.push_back(options.notice);
  lines.push_back(fmt::format(fmt::runtime(kHeader), "ISLAND / HOST / DEVICE", "KIND", "BUSY",
                              "QUEUED", "GANGS", "MEMORY IN USE"));
  for (const auto& island : view.islands()) {
    uint64_t queued = 0;
    for (const auto& name : island.hosts) {
      for (uint32_t id : view.hosts().at(name).devices) queued += view.devices().at(id).queued;
    }
    lines.push_back(
        fmt::format("{:<24} {:<34} {:>6}", island.name,
                    "scheduler " +
                        (island.scheduler_endpoint.empty() ? std::string("(not registered)")
                                                           : island.scheduler_endpoint) +
                        (island.scheduler_alive ? "" : " LOST"),
                    queued));
    for (const auto& name : island.hosts) {
      const auto& h = view.hosts().at(name);
      std::string memory = "-";
      if (h.has_store_stats) {
        memory = fmt::format("{} / {}, {} objects", FormatBytes(h.bytes_in_use),
                             FormatBytes(h.arena_bytes), h.objects);
      }
      lines.push_back(fmt::format(fmt::runtime(kHeader), "  " + h.name, "",
                                  !h.alive        ? "DEAD"
                                  : h.store_alive ? "alive"
                                                  : "NO STORE",
                                  "", "", memory));
      for (uint32_t id : h.devices) {
        const auto& d = view.devices().at(id);
        const std::string busy =
            d.has_stats ? fmt::format("{} {:>3.0f}%", Bar(d.busy_pct), d.busy_pct) : "(no stats)";
        std::string last;
        if (d.last_client != 0) last = "last: " + view.ClientLabel(d.last_client);
        lines.push_back(fmt::format(fmt::runtime(kHeader), fmt::format("    device {}", d.id),
                                    d.kind, busy, d.queued, d.gangs_done, last));
      }
    }
  }
  lines.push_back("");
  lines.push_back(fmt::format("{:<32} {:>9} {:>8} {:>8} {:>7}", "CLIENTS", "SCHEDULED", "RUNNING",
                              "DONE", "FAILED"));
  std::map<uint64_t, std::map<std::string, uint64_t>> counts;
  for (const auto& [run, p] : view.programs()) counts[p.client][p.state]++;
  for (const auto& [id, c] : view.clients()) {
    auto& n = counts[id];
    std::string label = view.ClientLabel(id);
    if (!c.connected) label += " (gone)";
    lines.push_back(fmt::format("  {:<30} {:>9} {:>8} {:>8} {:>7}", label, n["scheduled"],
                                n["running"], c.done, c.failed));
  }
  lines.push_back("");
  lines.push_back(fmt::format("{:<16} {:<28} {:<10} {:<16} {}", "PROGRAMS (RUN)", "CLIENT", "STATE",
                              "ISLANDS", "PROGRESS"));
  std::vector<std::string> program_lines;
  for (const auto* p : OrderedPrograms(view)) {
    std::string progress = fmt::format("{} shards", p->shards_done);
    if (const uint64_t expected = p->shards_expected(); expected > 0) {
      progress = fmt::format("{}/{} shards", p->shards_done, expected);
    }
    if (!p->error.empty()) progress += "  " + p->error;
    program_lines.push_back(fmt::format("  {:<14} {:<28} {:<10} {:<16} {}", p->run,
                                        view.ClientLabel(p->client), p->state,
                                        fmt::format("{}", fmt::join(p->islands, ",")), progress));
  }
  size_t room = options.max_programs;
  if (options.height > 0) {
    room = std::min(room, options.height > lines.size() ? options.height - lines.size() : 0);
  }
  if (program_lines.size() > room) {
    const size_t more = program_lines.size() - (room > 0 ? room - 1 : 0);
    program_lines.resize(room > 0 ? room - 1 : 0);
    if (room > 0) program_lines.push_back(fmt::format("  ... {} more", more));
  }
  lines.insert(lines.end(), program_lines.begin(), program_lines.end());
  if (options.height > 0 && lines.size() > options.height) lines.resize(options.height);
  for (auto& line : lines) {
    if (options.width > 0 && line.size() > options.width) line.resize(options.width);
    line.erase(line.find_last_not_of(' ') + 1);
  }
  return lines;
}

}  // namespace atl
