// Client::Save and Client::Load: checkpoints written and read by the object stores that hold
// the shards (docs/design-notes.md, "Checkpoints"). The client plans (checkpoint_plan.h),
// waits for the futures' runs, and tells each store what to write or read; only names,
// places and the index travel through it.
#include <random>
#include <set>

#include <fmt/format.h>

#include "atoll/client.h"
#include "client/checkpoint_plan.h"
#include "client/client_impl.h"
#include "client/store_calls.h"

namespace atl {

namespace {

// The host of the object store at `endpoint`, as this client's slices say.
std::string HostOfStore(const Client::Impl& client, const std::string& endpoint) {
  for (const auto& [id, slice] : client.slices) {
    for (const auto& device : slice.devices) {
      if (device.store_endpoint == endpoint) return device.host;
    }
  }
  return "";
}

// A fresh tag for this save's file names.
std::string SaveTag() {
  std::random_device random;
  return fmt::format("{:08x}", random());
}

// The layout `sharding` gives a tensor of `entry`'s dtype and shape.
Result<ir::TensorType> TypeOf(const checkpoint::TensorEntry& entry, const Sharding& sharding) {
  if (sharding.axes.size() > entry.shape.size()) {
    return InvalidArgument(fmt::format("tensor '{}' has {} dimensions, its sharding names {}",
                                       entry.name, entry.shape.size(), sharding.axes.size()));
  }
  std::vector<int32_t> split(entry.shape.size(), -1);
  std::copy(sharding.axes.begin(), sharding.axes.end(), split.begin());
  return ir::TensorType{entry.dtype, entry.shape, std::move(split)};
}

}  // namespace

Status Client::Save(const std::vector<std::pair<std::string, Input>>& tensors,
                    const std::string& path, std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const std::string context = fmt::format("save checkpoint '{}'", path);
  impl_->ApplyNotices();
  std::vector<SaveSource> sources;
  std::map<RunState*, std::set<size_t>> runs;  // the futures' runs, to wait for
  for (const auto& [name, input] : tensors) {
    SaveSource source{name, nullptr, input.value()};
    if (const Future* f = input.future()) {
      if (!f->run_ || f->index_ >= f->run_->results.size()) {
        return InvalidArgument("tensor '" + name + "' is an empty Future");
      }
      if (f->run_->client != impl_.get()) {
        return InvalidArgument("tensor '" + name + "' is a future of another client's run");
      }
      if (f->run_->cancelled) {
        return Cancelled(fmt::format("tensor '{}' is a future of run {}, which was cancelled", name,
                                     f->run_->id));
      }
      const ResultPlan& plan = f->run_->results[f->index_];
      if (plan.arg_index >= 0) {
        source.value = &f->run_->arg_values[plan.arg_index];  // the client's own copy
      } else {
        source.plan = &plan;
        runs[f->run_.get()].insert(f->index_);
      }
    }
    sources.push_back(std::move(source));
  }
  ATOLL_ASSIGN_OR_RETURN(
      SavePlan plan, PlanSave(sources, impl_->id, path, SaveTag(), [&](const std::string& store) {
        return HostOfStore(*impl_, store);
      }));
  for (const auto& [run, which] : runs) {
    ATOLL_RETURN_IF_ERROR(
        AwaitSealed(*run, {which.begin(), which.end()}, TimeLeft(deadline)).WithContext(context));
  }
  std::map<std::string, net::Frames> data;
  for (const auto& [store, request] : plan.per_store) {
    for (const Tensor* value : plan.values) {
      data[store].emplace_back(value->data(), value->nbytes());
    }
  }
  auto written = AllAnswered(
      AskStores<proto::SaveShardsReply>(*impl_, plan.per_store, deadline, std::move(data)));
  if (!written.ok()) return written.status().WithContext(context);
  ATOLL_RETURN_IF_ERROR(ApplySaveReplies(plan, *written));
  // The index goes last, once every store has its files: a checkpoint without one is not
  // whole, and one saved over keeps its old index (and files) until here.
  std::map<std::string, proto::CommitCheckpoint> commits;
  const std::string index = checkpoint::IndexToJson(plan.index);
  for (const auto& [store, request] : plan.per_store) {
    commits[store] = {impl_->id, path, index, plan.files};
  }
  return AllAnswered(AskStores<proto::Ok>(*impl_, commits, deadline)).status().WithContext(context);
}

Result<Checkpoint> Client::Load(const std::string& path, const Slice& slice,
                                const LoadOptions& options) {
  const Deadline deadline = std::chrono::steady_clock::now() + options.timeout;
  const std::string context = fmt::format("load checkpoint '{}'", path);
  impl_->ApplyNotices();
  auto info = impl_->slices.find(slice.id());
  if (info == impl_->slices.end()) {
    return NotFound(fmt::format("slice {} was not made by this client", slice.id()));
  }
  std::vector<std::string> stores;
  for (const auto& device : info->second.devices) stores.push_back(device.store_endpoint);
  auto text = AllAnswered(AskStores<proto::CheckpointIndexText>(
      *impl_, std::map<std::string, proto::ReadCheckpointIndex>{{stores[0], {impl_->id, path}}},
      deadline));
  if (!text.ok()) return text.status().WithContext(context);
  auto index = checkpoint::IndexFromJson(text->begin()->second.index);
  if (!index.ok()) return index.status().WithContext(context);

  std::vector<std::string> names = options.names;
  if (names.empty()) {
    for (const auto& t : index->tensors) names.push_back(t.name);
  }
  auto run = std::make_shared<RunState>();
  run->client = impl_.get();
  run->id = impl_->NextRunId();
  std::map<std::string, proto::LoadShards> per_store;
  for (const std::string& name : names) {
    ATOLL_ASSIGN_OR_RETURN(const checkpoint::TensorEntry* entry, index->Find(name));
    auto sharding = options.shardings.find(name);
    const Sharding saved{{entry->split.begin(), entry->split.end()}};
    ATOLL_ASSIGN_OR_RETURN(
        const ir::TensorType type,
        TypeOf(*entry, sharding != options.shardings.end() ? sharding->second : saved));
    auto result = PlanLoad(*entry, type, slice.mesh(), stores, impl_->id, path,
                           impl_->NextObjectId(), per_store);
    if (!result.ok()) {
      return result.status().WithContext(fmt::format("{} onto slice {} (mesh {})", context,
                                                     slice.id(), ShapeString(slice.mesh())));
    }
    run->results.push_back(std::move(*result));
  }
  const auto loaded = AskStores<proto::Ok>(*impl_, per_store, deadline);
  // What the stores made is the client's, released with `run` (now, on an error). A store
  // that refused made nothing; one that did not answer in time may still make its shards,
  // and reads the release after them.
  Status status = Status::Ok();
  for (const auto& [store, request] : per_store) {
    const Status& answer = loaded.at(store).status();
    if (!answer.ok() && status.ok()) status = answer.WithContext(context);
    if (!answer.ok() && answer.code() != Code::kDeadlineExceeded) continue;
    std::map<uint64_t, uint32_t> shards;  // per object held there
    for (const auto& shard : request.shards) ++shards[shard.object_id];
    for (const auto& [object, count] : shards) run->objects.push_back({store, object, count});
    run->needs.stores.insert(store);
  }
  ATOLL_RETURN_IF_ERROR(status);
  run->losses_seen = impl_->losses.seen();
  return Checkpoint{std::move(names), Run(std::move(run))};
}

}  // namespace atl
