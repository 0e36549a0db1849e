// Functions as Client::Register leaves them, made without a cluster: for the tests of
// tracing and lowering. Every host `h` has endpoints "tcp://h:control", "tcp://h:data" and
// "tcp://h:store".
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/internal.h"

namespace atl::test {

// One device of a slice: its host and its index among the host's devices.
struct HostDevice {
  std::string host;
  uint32_t local_index = 0;
};

// Slice `id` of the island whose scheduler is `scheduler`; virtual device i is devices[i].
inline proto::SliceInfo SliceOn(uint64_t id, const std::string& scheduler,
                                const std::vector<HostDevice>& devices) {
  proto::SliceInfo slice{id, "island-of-" + scheduler, scheduler, {}};
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string& h = devices[i].host;
    slice.devices.push_back({static_cast<uint32_t>(100 + i), h, devices[i].local_index,
                             "tcp://" + h + ":control", "tcp://" + h + ":data",
                             "tcp://" + h + ":store"});
  }
  return slice;
}

// A function that returns its inputs as they are, one output per input.
inline ir::FunctionDef PassThrough(std::string name, std::vector<ir::TensorType> inputs) {
  ir::FunctionDef def;
  def.name = std::move(name);
  def.inputs = std::move(inputs);
  for (size_t i = 0; i < def.inputs.size(); ++i) {
    def.outputs.push_back({ir::Operand::kInput, static_cast<int32_t>(i)});
  }
  return def;
}

// `def` registered as function `id` on `slice`.
inline Function Registered(uint64_t id, ir::FunctionDef def, proto::SliceInfo slice) {
  auto impl = std::make_shared<Function::Impl>();
  impl->id = id;
  impl->def = std::move(def);
  impl->output_types = ir::OutputTypes(impl->def);
  impl->slice = std::move(slice);
  return HandleAccess::MakeFunction(std::move(impl));
}

}  // namespace atl::test
