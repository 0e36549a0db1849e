// The executor's data plane, receiving side: a TupleBatch message (header frame, then its
// data frames) is split into values by TupleValues, and each value goes where
// ExecutorService::OnTupleBatch sends it: reshard pieces and routed rows are put together
// by the OutputRouter's PieceAssembler, whole tuples land in the InputMailbox. (Collective
// partials only go into CollectiveHub's map, keyed as sent: nothing there parses them.)
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "common/proto/codec.h"
#include "services/executor/input_mailbox.h"
#include "services/executor/output_router.h"
#include "services/executor/tuple_frames.h"
#include "tests/fuzz/fuzz_frames.h"

namespace atl::executor {
namespace {

// No shard waits for a tuple here, so nothing reaches the sink.
class NoSink final : public ItemSink {
 public:
  void Deliver(const std::shared_ptr<WorkItem>&, uint32_t, Tensor) override { std::abort(); }
  void Reserved(const std::shared_ptr<WorkItem>&) override { std::abort(); }
  void Fail(const std::shared_ptr<WorkItem>&, Status) override { std::abort(); }
};

void ReceiveBatch(net::Frames frames) {
  auto in = proto::ParseIncoming(std::move(frames), /*routed=*/false);
  if (!in.ok() || in->header.kind() != proto::Kind::kTupleBatch) return;
  auto batch = in->header.As<proto::TupleBatch>();
  if (!batch.ok()) return;
  auto values = TupleValues(*batch, in->data);
  if (!values.ok()) {
    if (values.status().code() != Code::kInvalidArgument) std::abort();
    return;
  }
  if (values->size() != batch->tuples.size()) std::abort();
  NoSink sink;
  InputMailbox mailbox(sink);
  ObjectReaders readers(sink);
  OutputRouter router(
      "tcp://127.0.0.1:1", mailbox, readers,
      [](const std::string&, proto::TupleHeader, Result<Tensor>, bool) { std::abort(); },
      [](const proto::OutputDest&, const Result<Tensor>&) { std::abort(); });
  for (size_t i = 0; i < values->size(); ++i) {
    const proto::TupleHeader& h = batch->tuples[i];
    if (!h.collective()) router.Receive(h, std::move((*values)[i]));
  }
}

}  // namespace
}  // namespace atl::executor

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  atl::executor::ReceiveBatch(atl::fuzz::SplitFrames(data, size));
  return 0;
}
