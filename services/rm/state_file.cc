#include "services/rm/state_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace atl::rm {

namespace {

constexpr uint32_t kStateVersion = 1;
constexpr uint32_t kStateFields = 10;

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
  return Status::Ok();
}

Result<RmState> ReadStateFile(const std::string& path) {
  if (!std::filesystem::exists(path)) return NotFound("the state file " + path + " does not exist");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Unavailable("cannot read the state file " + path);
  RmState state;
  try {
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
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
  return state;
}

}  // namespace atl::rm
