#include "services/executor/admission.h"

#include <cstring>

#include <fmt/format.h>

#include "common/proto/codec.h"
#include "compute/repeated_ops.h"

namespace atl::executor {

AdmissionCore::AdmissionCore(std::string host, uint32_t num_devices)
    : host_(std::move(host)), num_devices_(num_devices) {}

Status AdmissionCore::Compile(proto::Compile compile) {
  ATOLL_RETURN_IF_ERROR(ir::Validate(compile.function, static_cast<int>(compile.num_shards)));
  if (compile.shard_endpoints.size() != compile.num_shards) {
    return InvalidArgument(fmt::format("compile of function {}: {} shard endpoints for {} shards",
                                       compile.function_id, compile.shard_endpoints.size(),
                                       compile.num_shards));
  }
  // Merged once here rather than per run: a traced step repeats its forward pass.
  functions_[compile.function_id] = {
      std::make_shared<const ir::FunctionDef>(
          compute::MergeRepeatedOps(std::move(compile.function))),
      compile.num_shards, std::make_shared<const GangLayout>(std::move(compile.shard_endpoints)),
      compile.slice_mapping};
  return Status::Ok();
}

const CompiledFunction* AdmissionCore::Find(uint64_t function_id) const {
  auto it = functions_.find(function_id);
  return it == functions_.end() ? nullptr : &it->second;
}

void AdmissionCore::PeerLost(const std::string& peer, const std::string& data_endpoint,
                             Status why) {
  lost_partners_[data_endpoint] = why;
  lost_peers_[peer] = std::move(why);
}

void AdmissionCore::PeerBack(const std::string& peer, const std::string& data_endpoint) {
  lost_peers_.erase(peer);
  lost_partners_.erase(data_endpoint);
}

Status AdmissionCore::CheckPeers(const proto::Entry& e, const CompiledFunction& fn) const {
  for (const auto& peer : e.peers) {
    if (auto lost = lost_peers_.find(peer); lost != lost_peers_.end()) return lost->second;
  }
  // Its collectives would wait for the lost host's messages, holding the device meanwhile.
  if (!ir::HasCollectives(*fn.def)) return Status::Ok();
  for (const auto& host : fn.layout->hosts) {
    if (auto lost = lost_partners_.find(host); lost != lost_partners_.end()) return lost->second;
  }
  return Status::Ok();
}

Status AdmissionCore::CheckFunction(const proto::Entry& e, const CompiledFunction* fn) const {
  if (fn == nullptr) {
    return NotFound(fmt::format("function {} was never compiled on host {}", e.function_id, host_));
  }
  if (fn->num_shards != e.num_shards) {
    return InvalidArgument(fmt::format("function {} was compiled for {} shards, not {}",
                                       e.function_id, fn->num_shards, e.num_shards));
  }
  if (fn->slice_mapping != e.slice_mapping) {
    // Lowered before a remap (or compiled here before one): its shards' placement and the
    // one the collectives here expect differ. Transient: the run, submitted again, is
    // lowered for the slice's current mapping.
    return Unavailable(fmt::format(
        "function {} is compiled on host {} for mapping {} of its slice, the run was lowered "
        "for mapping {}: the slice was remapped (a host was lost); submit the run again",
        e.function_id, host_, fn->slice_mapping, e.slice_mapping));
  }
  if (fn->def->inputs.size() != e.inputs.size() || fn->def->outputs.size() != e.outputs.size()) {
    return InvalidArgument(fmt::format(
        "entry for function {} has {} inputs and {} outputs; the function has {} and {}",
        e.function_id, e.inputs.size(), e.outputs.size(), fn->def->inputs.size(),
        fn->def->outputs.size()));
  }
  if (ir::HasCollectives(*fn->def) && fn->layout->shard_endpoints.size() != e.num_shards) {
    return FailedPrecondition(fmt::format(
        "function {} has collectives but was compiled without its slice's layout", e.function_id));
  }
  return Status::Ok();
}

std::vector<OutputReservation> AdmissionCore::Reservations(const WorkItem& item) {
  const proto::Entry& e = item.entry;
  // Without a function (it failed to resolve) the outputs are sealed empty with the error.
  const auto types = item.function ? ir::OutputTypes(*item.function)
                                   : std::vector<ir::TensorType>(e.outputs.size());
  const Shape mesh = item.function ? ir::MeshOf(*item.function, static_cast<int>(e.num_shards))
                                   : Shape{e.num_shards};
  std::vector<OutputReservation> out;
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    for (const auto& dest : e.outputs[o]) {
      if (dest.kind != proto::OutputDest::kStore) continue;
      OutputReservation r;
      r.create = {dest.object_id, dest.shard, e.owner_client, types[o].dtype,
                  ir::ShardShape(types[o], mesh)};
      // The output is device-resident: it takes the memory of the device it runs on.
      r.create.device = static_cast<int32_t>(e.device);
      r.deferred = !ir::IsStatic(types[o]);
      out.push_back(std::move(r));
    }
  }
  return out;
}

void AdmissionCore::TakeInline(WorkItem& item, uint32_t input) {
  proto::InputSource& src = item.entry.inputs[input];
  std::vector<std::byte> bytes(src.bytes.size());
  if (!bytes.empty()) std::memcpy(bytes.data(), src.bytes.data(), bytes.size());
  auto value = Tensor::FromBytes(src.dtype, src.shape, std::move(bytes));
  if (!value.ok()) {
    if (item.failure.ok()) item.failure = value.status().WithContext("inline argument");
    return;
  }
  item.inputs[input] = std::move(value).value();
  item.inputs_missing--;
  src.bytes = {};  // the item keeps the tensor; the entry need not keep a copy
}

Admission AdmissionCore::Admit(proto::Entry entry, std::string scheduler) const {
  Admission a;
  a.item = std::make_shared<WorkItem>();
  WorkItem& item = *a.item;
  item.entry = std::move(entry);
  item.scheduler = std::move(scheduler);
  const proto::Entry& e = item.entry;
  item.inputs.resize(e.inputs.size());
  item.inputs_missing = e.inputs.size();
  if (e.device >= num_devices_) {
    a.has_device = false;
    item.failure =
        InvalidArgument(fmt::format("device {} does not exist on host {}", e.device, host_));
    return a;
  }

  const CompiledFunction* fn = Find(e.function_id);
  item.failure = CheckFunction(e, fn);
  if (item.failure.ok()) {
    item.function = fn->def;
    item.layout = fn->layout;
  }
  // The scheduler gave up on the gang (its cross-island producers were never scheduled, or
  // its client is gone).
  if (e.error_code != 0) item.failure = proto::FromError({e.error_code, e.error});
  if (item.failure.ok()) item.failure = CheckPeers(e, *fn);
  a.reservations = Reservations(item);
  for (uint32_t i = 0; i < e.inputs.size(); ++i) {
    if (e.inputs[i].kind == proto::InputSource::kInline) {
      TakeInline(item, i);
    } else if (e.inputs[i].kind == proto::InputSource::kStore) {
      a.store_inputs.push_back(i);
    } else {
      a.tuple_inputs.push_back({e.run_id, e.node, i, e.shard});
    }
  }
  return a;
}

Result<std::vector<LoopShard>> AdmissionCore::LoopEntries(const proto::RunLoop& loop,
                                                          size_t data_frames,
                                                          const std::string& data_endpoint) const {
  if (loop.steps == 0 || loop.shards.size() != loop.devices.size() || data_frames != 1) {
    return InvalidArgument("RunLoop needs steps > 0, a device per shard and one data frame");
  }
  const CompiledFunction* fn = Find(loop.function_id);
  if (fn == nullptr) {
    return NotFound(
        fmt::format("function {} was never compiled on host {}", loop.function_id, host_));
  }
  std::vector<LoopShard> shards;
  for (size_t i = 0; i < loop.shards.size(); ++i) {
    const uint32_t shard = loop.shards[i];
    LoopShard& s = shards.emplace_back();
    s.first_input = {loop.run_id, 0, 0, shard};
    for (uint32_t step = 0; step < loop.steps; ++step) {
      proto::Entry& e = s.steps.emplace_back();
      e.run_id = loop.run_id;
      e.node = step;
      e.gang_seq = step + 1;  // this executor's own order: it runs nothing else meanwhile
      e.function_id = loop.function_id;
      e.device = loop.devices[i];
      e.shard = shard;
      e.num_shards = fn->num_shards;
      e.owner_client = loop.owner_client;
      e.inputs = {{proto::InputSource::kTuple, 0, 0}};
      if (step + 1 < loop.steps) {
        e.outputs = {{{proto::OutputDest::kTuple, data_endpoint, step + 1, 0, shard, 0, {}}}};
      } else {
        e.outputs = {{{proto::OutputDest::kStore, "", 0, 0, shard, loop.result_object, {}}}};
      }
    }
  }
  return shards;
}

}  // namespace atl::executor
