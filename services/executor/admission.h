// AdmissionCore: what an executor knows about its host before any shard runs, and the
// decisions it takes on each entry from that knowledge alone. It holds the functions
// compiled here and the peers the RM declared lost; from an entry it makes the WorkItem
// (failed when the entry cannot run here), the object-store reservations its outputs need
// and where each input will come from. Carrying those out (sending requests, queueing on a
// stream, waiting in the mailbox) is the executor's job.
//
// Pure logic: no sockets, no threads. Not thread-safe: the executor's loop owns it.
//
// Example:
//   AdmissionCore core("host0", /*num_devices=*/2);
//   ATOLL_RETURN_IF_ERROR(core.Compile(std::move(compile)));
//   Admission a = core.Admit(std::move(entry), scheduler);
//   for (auto& r : a.reservations) ... reserve r.create (later, when r.deferred)
//   ... queue a.item; if a.item->failure.ok(): read a.store_inputs, await a.tuple_inputs
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atoll/status.h"
#include "common/ir/ir.h"
#include "common/proto/protocol.h"
#include "services/executor/collective_hub.h"
#include "services/executor/work_item.h"

namespace atl::executor {

// A function compiled on this host for a slice of `num_shards` devices.
struct CompiledFunction {
  std::shared_ptr<const ir::FunctionDef> def;
  uint32_t num_shards = 0;
  std::shared_ptr<const GangLayout> layout;  // where the slice's shards run
  uint32_t slice_mapping = 0;                // which mapping of the slice that layout is
};

// Object-store space for one output shard of an admitted entry.
struct OutputReservation {
  proto::CreateObject create;  // on the entry's device; for the owner client
  // The output's shape depends on the data: nothing can be reserved before the shard ran,
  // and create.shape still holds kDynamicDim where the size is unknown.
  bool deferred = false;
};

// What admitting one entry decided.
struct Admission {
  std::shared_ptr<WorkItem> item;  // item->failure is set when it cannot run
  // False when the entry names a device this host lacks: there is no stream to queue the
  // item on, so it completes at once with its failure; nothing is reserved or read.
  bool has_device = true;
  // One per output destination in the object store, in output order. A failing entry
  // reserves too, so that its outputs can be sealed with its error.
  std::vector<OutputReservation> reservations;
  // The inputs, by where they come from (only meaningful while the item has not failed):
  // tuples pushed by producers, awaited by key, and reads from the local object store
  // (indices into item->entry.inputs).
  std::vector<InputKey> tuple_inputs;
  std::vector<uint32_t> store_inputs;
};

// The entries of one shard of a RunLoop, in step order, and the key of its first input.
struct LoopShard {
  std::vector<proto::Entry> steps;
  InputKey first_input;
};

class AdmissionCore {
 public:
  // `host` names this host in error messages; it has devices 0..num_devices-1.
  AdmissionCore(std::string host, uint32_t num_devices);

  // Validates `compile` and stores the function (replacing one of the same id).
  // InvalidArgument when the function is invalid for its shard count or the layout does
  // not name an endpoint per shard.
  Status Compile(proto::Compile compile);
  // The function `function_id`, or nullptr when it was never compiled here.
  const CompiledFunction* Find(uint64_t function_id) const;

  // The peer executor with control endpoint `peer` and data endpoint `data_endpoint` was
  // lost (`why`: Unavailable), or came back: while it is lost, entries that name it among
  // their peers fail, and so do entries of functions whose collectives meet it.
  void PeerLost(const std::string& peer, const std::string& data_endpoint, Status why);
  void PeerBack(const std::string& peer, const std::string& data_endpoint);

  // Admits `entry`, sent by `scheduler` (its routing id, empty for none).
  Admission Admit(proto::Entry entry, std::string scheduler) const;

  // The entries of a RunLoop, per shard: each step's output feeds the next step on the
  // same device through `data_endpoint` (this host's), the last step's goes into the
  // object store. `data_frames`: how many data frames came with it (one is needed).
  // InvalidArgument for a malformed loop, NotFound for a function never compiled here.
  Result<std::vector<LoopShard>> LoopEntries(const proto::RunLoop& loop, size_t data_frames,
                                             const std::string& data_endpoint) const;

 private:
  // Fills input `input` of `item` from the value its entry carries (kInline), or fails the
  // item when the bytes do not make a tensor of the shape given.
  static void TakeInline(WorkItem& item, uint32_t input);
  // Why `entry` cannot run with the function as compiled here; OK when it can.
  Status CheckFunction(const proto::Entry& entry, const CompiledFunction* fn) const;
  // Why an entry of `fn` cannot run because a host it sends to, receives from or meets in
  // a collective is lost; OK when none is.
  Status CheckPeers(const proto::Entry& entry, const CompiledFunction& fn) const;
  static std::vector<OutputReservation> Reservations(const WorkItem& item);

  const std::string host_;
  const uint32_t num_devices_;
  std::map<uint64_t, CompiledFunction> functions_;
  std::map<std::string, Status> lost_peers_;     // by control endpoint: why they are lost
  std::map<std::string, Status> lost_partners_;  // the same, by data endpoint
};

}  // namespace atl::executor
