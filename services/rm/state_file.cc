// The RM's state file: everything a restarted RM needs to carry on as if it had not
// stopped (hosts and their devices, island schedulers, clients, slices with their
// virtual->physical map, registered functions, id counters), as one msgpack array written
// on every change: to a temporary file, then renamed over the old one, so that a crash
// mid-write leaves the previous state whole. Liveness is not kept: a restarted RM gives
// every host and client a fresh `liveness` window to heartbeat again (their connections
// come back by themselves: ZeroMQ reconnects to the same endpoint).
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "services/rm/rm_service.h"

namespace atl::rm {

namespace {

constexpr uint32_t kStateVersion = 1;

}  // namespace

void RmService::SaveState() {
  if (state_file_.empty()) return;
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pack(buffer);
  pack.pack_array(10);
  pack.pack(kStateVersion);
  pack.pack(hosts_);
  pack.pack(devices_);
  pack.pack(scheduler_by_island_);
  pack.pack(clients_);
  pack.pack(slices_);
  pack.pack(functions_);
  pack.pack(next_slice_id_);
  pack.pack(next_client_id_);
  pack.pack(next_function_id_);
  const std::string temp = state_file_ + ".tmp";
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  out.close();
  std::error_code ec;
  if (out.fail()) {
    ec = std::make_error_code(std::errc::io_error);
  } else {
    std::filesystem::rename(temp, state_file_, ec);
  }
  if (ec) {
    const std::string error =
        fmt::format("cannot write the state file {}: {}", state_file_, ec.message());
    spdlog::error("{}", error);
    events_->Publish("error.rm", {{"error", error}});
  }
}

Status RmService::LoadState() {
  if (state_file_.empty() || !std::filesystem::exists(state_file_)) return Status::Ok();
  std::ifstream in(state_file_, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Unavailable("cannot read the state file " + state_file_);
  try {
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
    const msgpack::object& o = handle.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 10 ||
        o.via.array.ptr[0].as<uint32_t>() != kStateVersion) {
      return InvalidArgument("the state file " + state_file_ +
                             " is not an atoll RM state of version " +
                             std::to_string(kStateVersion));
    }
    const msgpack::object* f = o.via.array.ptr;
    f[1].convert(hosts_);
    f[2].convert(devices_);
    f[3].convert(scheduler_by_island_);
    f[4].convert(clients_);
    f[5].convert(slices_);
    f[6].convert(functions_);
    f[7].convert(next_slice_id_);
    f[8].convert(next_client_id_);
    f[9].convert(next_function_id_);
  } catch (const std::exception& e) {
    return InvalidArgument("the state file " + state_file_ + " is unreadable: " + e.what());
  }
  const auto now = Clock::now();
  for (auto& [name, host] : hosts_) host.last_heard = now;
  for (auto& [id, client] : clients_) client.last_heard = now;
  spdlog::info("state from {}: {} hosts, {} clients, {} slices, {} functions", state_file_,
               hosts_.size(), clients_.size(), slices_.size(), functions_.size());
  return Status::Ok();
}

}  // namespace atl::rm
