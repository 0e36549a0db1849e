#include "services/rm/state_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "common/proto/codec.h"

namespace atl::rm {

namespace {

constexpr uint32_t kStateVersion = 1;
constexpr uint32_t kStateFields = 10;

// The indices the records use, so that a state that passes cannot index out of range.
// Returns what is wrong with the first record that names something missing.
Status CheckReferences(const RmState& state) {
  for (size_t i = 0; i < state.devices.size(); ++i) {
    const RmState::Device& d = state.devices[i];
    if (d.id != i) return InvalidArgument(fmt::format("device {} is stored as device {}", i, d.id));
    if (!state.hosts.count(d.host)) {
      return InvalidArgument(fmt::format("device {} is on unknown host '{}'", i, d.host));
    }
  }
  for (const auto& [name, host] : state.hosts) {
    for (uint32_t id : host.device_ids) {
      if (id >= state.devices.size() || state.devices[id].host != name) {
        return InvalidArgument(
            fmt::format("host '{}' lists device {}, not one of its own", name, id));
      }
    }
  }
  for (const auto& [id, slice] : state.slices) {
    for (uint32_t d : slice.device_ids) {
      if (d >= state.devices.size()) {
        return InvalidArgument(fmt::format("slice {} maps onto unknown device {}", id, d));
      }
    }
    if (!state.scheduler_by_island.count(slice.island)) {
      return InvalidArgument(
          fmt::format("slice {} is on island '{}', which has no scheduler", id, slice.island));
    }
  }
  return Status::Ok();
}

std::string JournalPath(const std::string& path) { return path + ".functions"; }

// The bytes of the file at `path` (`what` names it in the error).
Result<std::string> ReadBytes(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Unavailable("cannot read " + what + " " + path);
  return bytes;
}

// One record of the function journal.
struct JournalRecord {
  uint64_t id = 0;
  RmState::Function function;
  MSGPACK_DEFINE(id, function);
};

// Adds to `state` the functions of the journal of `path` that it does not hold already.
Status ReplayJournal(const std::string& path, RmState& state) {
  const std::string journal = JournalPath(path);
  if (!std::filesystem::exists(journal)) return Status::Ok();
  ATOLL_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(journal, "the function journal"));
  const uint64_t written_whole = state.next_function_id;
  size_t offset = 0;
  while (offset < bytes.size()) {
    JournalRecord r;
    try {
      msgpack::object_handle record = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr,
                                                      nullptr, proto::UntrustedLimit(bytes.size()));
      record.get().convert(r);
    } catch (const msgpack::insufficient_bytes&) {
      break;  // cut short by a crash mid-append: that registration was never answered
    } catch (const std::exception& e) {
      return InvalidArgument("the function journal " + journal + " is unreadable: " + e.what());
    }
    if (r.id < written_whole) continue;
    auto slice = state.slices.find(r.function.slice);
    if (slice == state.slices.end() || slice->second.client != r.function.client) {
      return InvalidArgument(
          fmt::format("the function journal {}: function {} is on slice {} of "
                      "client {}, which the state does not hold",
                      journal, r.id, r.function.slice, r.function.client));
    }
    state.next_function_id = std::max(state.next_function_id, r.id + 1);
    state.functions[r.id] = std::move(r.function);
  }
  return Status::Ok();
}

}  // namespace

Status WriteStateFile(const std::string& path, const RmState& state) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pack(buffer);
  pack.pack_array(kStateFields);
  pack.pack(kStateVersion);
  pack.pack(state.hosts);
  pack.pack(state.devices);
  pack.pack(state.scheduler_by_island);
  pack.pack(state.clients);
  pack.pack(state.slices);
  pack.pack(state.functions);
  pack.pack(state.next_slice_id);
  pack.pack(state.next_client_id);
  pack.pack(state.next_function_id);
  const std::string temp = path + ".tmp";
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  out.close();
  std::error_code ec;
  if (out.fail()) {
    ec = std::make_error_code(std::errc::io_error);
  } else {
    std::filesystem::rename(temp, path, ec);
  }
  if (ec) return Unavailable(fmt::format("cannot write the state file {}: {}", path, ec.message()));
  // Everything the journal held is in the state file now (a journal left by a failed removal
  // is harmless: its records are older than the state file's next_function_id).
  std::filesystem::remove(JournalPath(path), ec);
  return Status::Ok();
}

Status AppendFunction(const std::string& path, uint64_t id, const RmState::Function& function) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, JournalRecord{id, function});
  const std::string journal = JournalPath(path);
  std::ofstream out(journal, std::ios::binary | std::ios::app);
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  out.close();
  if (out.fail()) return Unavailable("cannot append to the function journal " + journal);
  return Status::Ok();
}

Result<RmState> ReadStateFile(const std::string& path) {
  if (!std::filesystem::exists(path)) return NotFound("the state file " + path + " does not exist");
  // Reading a folder throws from inside the stream (EISDIR), so it is refused before.
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return InvalidArgument("the state file " + path + " is not a regular file");
  }
  ATOLL_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path, "the state file"));
  RmState state;
  try {
    // Limits as for a message from the wire: a damaged length must not allocate gigabytes.
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size(), nullptr, nullptr,
                                                    proto::UntrustedLimit(bytes.size()));
    const msgpack::object& o = handle.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != kStateFields ||
        o.via.array.ptr[0].as<uint32_t>() != kStateVersion) {
      return InvalidArgument("the state file " + path + " is not an atoll RM state of version " +
                             std::to_string(kStateVersion));
    }
    const msgpack::object* f = o.via.array.ptr;
    f[1].convert(state.hosts);
    f[2].convert(state.devices);
    f[3].convert(state.scheduler_by_island);
    f[4].convert(state.clients);
    f[5].convert(state.slices);
    f[6].convert(state.functions);
    f[7].convert(state.next_slice_id);
    f[8].convert(state.next_client_id);
    f[9].convert(state.next_function_id);
  } catch (const std::exception& e) {
    return InvalidArgument("the state file " + path + " is unreadable: " + e.what());
  }
  Status consistent = CheckReferences(state);
  if (!consistent.ok()) return consistent.WithContext("the state file " + path);
  ATOLL_RETURN_IF_ERROR(ReplayJournal(path, state));
  return state;
}

}  // namespace atl::rm
