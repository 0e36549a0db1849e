// OutputRouter: where a finished shard's outputs go, and where tuples for this host's
// shards go once received. Each output destination of an entry is the object store (handed
// to `write_store`), a consumer shard on this host (its mailbox, no socket), or one on
// another host (handed to `send_remote`, which batches per host). A destination may take
// a piece of the output (a resharding edge: a block, or the rows routed to it); pieces
// for this host are put together here before the consumer gets them.
//
// Thread-safety: DeliverLocal may run on a device thread (it touches only the mailbox and
// the object readers); everything else runs on the executor's loop.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "atoll/status.h"
#include "atoll/tensor.h"
#include "common/proto/protocol.h"
#include "services/executor/input_mailbox.h"
#include "services/executor/object_readers.h"
#include "services/executor/piece_assembler.h"
#include "services/executor/work_item.h"

namespace atl::executor {

class OutputRouter {
 public:
  // Queues a tuple for the executor whose data endpoint is `endpoint`; `urgent` tuples (a
  // collective partial: it holds up a whole gang) must not wait for a batching window.
  using SendRemote = std::function<void(const std::string& endpoint, proto::TupleHeader header,
                                        Result<Tensor> value, bool urgent)>;
  // Writes an output shard (or the producer's error) into the object store.
  using WriteStore = std::function<void(const proto::OutputDest& dest, const Result<Tensor>&)>;

  // `self_endpoint`: this host's data endpoint. `mailbox` and `readers` must outlive the
  // router.
  OutputRouter(std::string self_endpoint, InputMailbox& mailbox, ObjectReaders& readers,
               SendRemote send_remote, WriteStore write_store);

  // Hands whole outputs of `done` to their consumers on this host, straight from the
  // device thread (a chain of shards on one host never waits for the loop), and marks
  // them delivered so that Route skips them. The shards reading an output it writes into
  // the store get its value too (op-by-op calls); the write itself is left to Route.
  void DeliverLocal(Completion& done) const;
  // Sends every output of `done` (its values, or its error) to every destination it has not
  // reached yet. Copies an output only when a destination keeps it.
  void Route(const Completion& done);
  // A tuple for a shard on this host: delivered, or added to the shard's pieces.
  void Receive(const proto::TupleHeader& h, Result<Tensor> value);
  // A tuple for `endpoint`: received here when it is this host (except collective
  // partials, which meet in the hub), else sent.
  void Queue(const std::string& endpoint, proto::TupleHeader h, Result<Tensor> value);

  size_t partial_shards() const { return pieces_.partial(); }  // awaiting more pieces

 private:
  // Of output `output`, the rows a sparse-exchange destination gets (or why none can go).
  static Result<Tensor> RoutedRows(const Completion& done, size_t output,
                                   const proto::OutputDest& dest);

  const std::string self_;
  InputMailbox& mailbox_;
  ObjectReaders& readers_;
  const SendRemote send_remote_;
  const WriteStore write_store_;
  PieceAssembler pieces_;  // consumer shards being put together from reshard pieces
};

}  // namespace atl::executor
