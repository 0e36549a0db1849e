#include "client/lowering.h"

#include <algorithm>

#include <fmt/format.h>

#include "client/reshard.h"
#include "client/sharding.h"

namespace atl {

namespace {

Status CheckArgs(const Program::Impl& program, const std::vector<LoweringArg>& args) {
  if (args.size() != program.args.size()) {
    return InvalidArgument(
        fmt::format("the program takes {} arguments, got {}", program.args.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& want = program.args[i];
    const DType dtype = args[i].value ? args[i].value->dtype() : args[i].plan->type.dtype;
    const Shape& shape = args[i].value ? args[i].value->shape() : args[i].plan->type.shape;
    if (dtype != want.dtype || !ir::ShapeFits(want.shape, shape)) {
      return InvalidArgument(fmt::format("argument {} is {}{}, the program takes {}{}", i,
                                         DTypeName(dtype), ShapeString(shape),
                                         DTypeName(want.dtype), ShapeString(want.shape)));
    }
  }
  return Status::Ok();
}

proto::InputSource InlineInput(const Tensor& value) {
  proto::InputSource in{proto::InputSource::kInline, 0, 0, value.dtype(), value.shape(), {}};
  const auto* bytes = reinterpret_cast<const char*>(value.data());
  if (value.nbytes() > 0) in.bytes.assign(bytes, bytes + value.nbytes());
  return in;
}

Shape MeshOf(const Function::Impl& fn) {
  return ir::MeshOf(fn.def, static_cast<int>(fn.slice.devices.size()));
}

// Where a call's input or output shards live.
Layout LayoutOf(const Function::Impl& fn, const ir::TensorType& type) {
  Layout layout{type, MeshOf(fn), {}};
  for (const auto& d : fn.slice.devices) layout.hosts.push_back(d.data_endpoint);
  return layout;
}

// A future feeds shard s of a call from the object store of shard s's host: it must have
// been produced with the same layout, on the same hosts.
Status CheckFutureFeeds(const ResultPlan& plan, const Program::Impl::Call& call, size_t input) {
  const auto& devices = call.fn->slice.devices;
  const ir::TensorType& want = call.fn->def.inputs[input];
  if (plan.type.split != want.split || plan.mesh != MeshOf(*call.fn)) {
    return InvalidArgument(fmt::format(
        "a future laid out over mesh {} cannot feed '{}' input {} (mesh {}): moving it to "
        "another layout is not supported yet",
        ShapeString(plan.mesh), call.fn->def.name, input, ShapeString(MeshOf(*call.fn))));
  }
  for (size_t s = 0; s < devices.size(); ++s) {
    if (plan.shards[s].store != devices[s].store_endpoint) {
      return InvalidArgument(fmt::format(
          "a future's shard {} is held on another host than '{}' shard {} runs on; moving it "
          "is not supported yet",
          s, call.fn->def.name, s));
    }
  }
  return Status::Ok();
}

// Sparse exchange into input `input` of call `consumer`: every producer shard sends every
// consumer shard the rows routed to it, an empty piece when none are, so that the consumer
// knows when it has heard from all producers.
Status LowerRoute(const Program::Impl& program, const Program::Impl::Route& route, size_t consumer,
                  size_t input, std::vector<std::vector<proto::Entry>>& entries) {
  const auto& call = program.calls[consumer];
  const auto& to = call.fn->slice.devices;
  const ir::TensorType& want = call.fn->def.inputs[input];
  if (ir::MeshOf(call.fn->def, static_cast<int>(to.size())).size() != 1 || want.split.empty() ||
      want.split[0] != 0) {
    return InvalidArgument(
        fmt::format("'{}' input {} takes routed rows: it must be split along "
                    "dimension 0 over a 1-D slice",
                    call.fn->def.name, input));
  }
  auto& producers = entries[route.values.index];
  for (auto& producer : producers) {
    for (size_t c = 0; c < to.size(); ++c) {
      proto::OutputDest dest{proto::OutputDest::kTuple,
                             to[c].data_endpoint,
                             static_cast<uint32_t>(consumer),
                             static_cast<uint32_t>(input),
                             static_cast<uint32_t>(c),
                             0,
                             {},
                             route.destinations.output,
                             static_cast<uint32_t>(to.size())};
      dest.piece.of = static_cast<uint32_t>(producers.size());
      producer.outputs[route.values.output].push_back(std::move(dest));
    }
  }
  return Status::Ok();
}

// A node may take its place in its island's order only after every node on another island
// that feeds it took its place there (docs/design-notes.md, "One order across islands"):
// each such node lists its producers there, and each producer the schedulers to tell.
void AddCrossIslandEdges(const Program::Impl& program, LoweredRun& run) {
  std::map<std::pair<std::string, uint32_t>, proto::CrossIslandNode> nodes;
  auto node = [&](const std::string& scheduler, size_t k) -> proto::CrossIslandNode& {
    proto::CrossIslandNode& n = nodes[{scheduler, static_cast<uint32_t>(k)}];
    n.node = static_cast<uint32_t>(k);
    return n;
  };
  auto add_unique = [](auto& list, const auto& value) {
    if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
  };
  for (size_t k = 0; k < program.calls.size(); ++k) {
    for (const Traced& src : program.calls[k].args) {
      size_t producer = 0;
      if (src.kind == kTracedCall) {
        producer = static_cast<size_t>(src.index);
      } else if (src.kind == kTracedRoute) {
        producer = static_cast<size_t>(program.routes[src.index].values.index);
      } else {
        continue;  // an argument: already in the object stores
      }
      const std::string& from = program.calls[producer].fn->slice.scheduler_endpoint;
      const std::string& to = program.calls[k].fn->slice.scheduler_endpoint;
      if (from == to) continue;
      add_unique(node(to, k).after, static_cast<uint32_t>(producer));
      add_unique(node(from, producer).announce_to, to);
    }
  }
  for (auto& [where, n] : nodes)
    run.per_scheduler[where.first].cross_island.push_back(std::move(n));
}

}  // namespace

Result<LoweredRun> Lower(const Program::Impl& program, const std::vector<LoweringArg>& args,
                         uint64_t client_id, uint64_t run_id, const SubmitOptions& options,
                         double weight, const std::function<uint64_t()>& next_object_id) {
  ATOLL_RETURN_IF_ERROR(CheckArgs(program, args));
  LoweredRun run;

  // One entry per shard of every call; call k is node k. An irregular call (a shape known
  // only from the data) cannot have its buffers allocated ahead: it goes sequentially.
  std::vector<std::vector<proto::Entry>> entries(program.calls.size());
  for (size_t k = 0; k < program.calls.size(); ++k) {
    const auto& fn = *program.calls[k].fn;
    const auto n = static_cast<uint32_t>(fn.slice.devices.size());
    for (uint32_t s = 0; s < n; ++s) {
      proto::Entry e;
      e.run_id = run_id;
      e.node = static_cast<uint32_t>(k);
      e.function_id = fn.id;
      e.device = fn.slice.devices[s].local_index;
      e.slice_mapping = fn.slice.mapping;
      e.shard = s;
      e.num_shards = n;
      e.owner_client = client_id;
      e.sequential = options.sequential || ir::IsIrregular(fn.def);
      e.inputs.resize(fn.def.inputs.size());
      e.outputs.resize(fn.output_types.size());
      entries[k].push_back(std::move(e));
    }
  }

  // Edges: arguments become object-store puts next to the consuming shard; call outputs
  // become tuples pushed by the producing shard to the consuming one.
  for (size_t k = 0; k < program.calls.size(); ++k) {
    const auto& call = program.calls[k];
    const auto& devices = call.fn->slice.devices;
    const int n = static_cast<int>(devices.size());
    for (size_t j = 0; j < call.args.size(); ++j) {
      const Traced& src = call.args[j];
      const ir::TensorType& type = call.fn->def.inputs[j];
      if (src.kind == kTracedArg && args[src.index].plan != nullptr) {
        const ResultPlan& plan = *args[src.index].plan;
        ATOLL_RETURN_IF_ERROR(CheckFutureFeeds(plan, call, j));
        for (int s = 0; s < n; ++s) {
          entries[k][s].inputs[j] = {proto::InputSource::kStore, plan.shards[s].object_id,
                                     plan.shards[s].shard};
        }
        continue;
      }
      if (src.kind == kTracedArg) {
        uint64_t object = 0;  // taken for the first shard that is put
        const Shape mesh = MeshOf(*call.fn);
        for (int s = 0; s < n; ++s) {
          ATOLL_ASSIGN_OR_RETURN(Tensor shard, ShardOf(*args[src.index].value, type, mesh, s));
          if (shard.nbytes() <= kInlineArgumentBytes) {
            entries[k][s].inputs[j] = InlineInput(shard);
            continue;
          }
          if (object == 0) object = next_object_id();
          run.puts.push_back(
              {devices[s].store_endpoint, object, static_cast<uint32_t>(s), std::move(shard)});
          entries[k][s].inputs[j] = {proto::InputSource::kStore, object, static_cast<uint32_t>(s)};
        }
        continue;
      }
      if (src.kind == kTracedRoute) {
        ATOLL_RETURN_IF_ERROR(LowerRoute(program, program.routes[src.index], k, j, entries));
        continue;
      }
      const auto& producer = *program.calls[src.index].fn;
      const Layout from = LayoutOf(producer, producer.output_types[src.output]);
      const Layout to = LayoutOf(*call.fn, type);
      for (int s = 0; s < n; ++s) entries[k][s].inputs[j] = {proto::InputSource::kTuple, 0, 0};
      auto edge = [&](uint32_t from_shard, uint32_t to_shard, proto::Piece piece) {
        entries[src.index][from_shard].outputs[src.output].push_back(
            {proto::OutputDest::kTuple, devices[to_shard].data_endpoint, static_cast<uint32_t>(k),
             static_cast<uint32_t>(j), to_shard, 0, std::move(piece)});
      };
      if (SameLayout(from, to)) {
        for (int s = 0; s < n; ++s) edge(s, s, {});  // shard s feeds shard s, whole
        continue;
      }
      auto routes = PlanReshard(from, to);
      if (!routes.ok()) {
        return routes.status().WithContext(fmt::format("'{}' output {} feeding '{}' input {}",
                                                       producer.def.name, src.output,
                                                       call.fn->def.name, j));
      }
      for (auto& route : *routes) edge(route.from, route.to, std::move(route.piece));
    }
  }

  // Results land in the object store of the host that computed each shard.
  for (const Traced& r : program.results) {
    ResultPlan plan;
    if (r.kind == kTracedArg && args[r.index].plan != nullptr) {
      plan = *args[r.index].plan;
      plan.borrowed_arg = r.index;
      run.results.push_back(std::move(plan));
      continue;
    }
    if (r.kind == kTracedArg) {
      plan.type = program.args[r.index];
      plan.arg_index = r.index;
      run.results.push_back(std::move(plan));
      continue;
    }
    const auto& producer = *program.calls[r.index].fn;
    plan.type = producer.output_types[r.output];
    plan.mesh = MeshOf(producer);
    const uint64_t object = next_object_id();
    for (size_t s = 0; s < producer.slice.devices.size(); ++s) {
      entries[r.index][s].outputs[r.output].push_back(
          {proto::OutputDest::kStore, "", 0, 0, static_cast<uint32_t>(s), object, {}});
      plan.shards.push_back(
          {producer.slice.devices[s].store_endpoint, object, static_cast<uint32_t>(s)});
    }
    run.results.push_back(std::move(plan));
  }

  // One subgraph per island, nodes in trace (topological) order. The client keeps the runs
  // whose futures this one reads until every island says its gangs are done.
  const bool reads_futures =
      std::any_of(args.begin(), args.end(), [](const LoweringArg& a) { return a.plan != nullptr; });
  for (size_t k = 0; k < program.calls.size(); ++k) {
    const auto& slice = program.calls[k].fn->slice;
    auto& submit = run.per_scheduler[slice.scheduler_endpoint];
    submit.client_id = client_id;
    submit.run_id = run_id;
    submit.weight = weight;
    submit.notify_done = reads_futures;
    for (size_t s = 0; s < entries[k].size(); ++s) {
      submit.entries.push_back({slice.devices[s].control_endpoint, std::move(entries[k][s])});
    }
  }
  AddCrossIslandEdges(program, run);
  return run;
}

std::vector<OwnedObject> OwnedObjects(const LoweredRun& run) {
  std::map<std::pair<std::string, uint64_t>, uint32_t> shards;  // by (store, object)
  for (const auto& put : run.puts) shards[{put.store, put.object_id}]++;
  for (const auto& result : run.results) {
    if (result.borrowed_arg >= 0) continue;
    for (const auto& s : result.shards) shards[{s.store, s.object_id}]++;
  }
  std::vector<OwnedObject> owned;
  for (const auto& [where, count] : shards) owned.push_back({where.first, where.second, count});
  return owned;
}

}  // namespace atl
