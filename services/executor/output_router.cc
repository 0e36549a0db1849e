#include "services/executor/output_router.h"

#include <optional>

#include <fmt/format.h>

#include "common/base/tensor_block.h"

namespace atl::executor {

OutputRouter::OutputRouter(std::string self_endpoint, InputMailbox& mailbox, ObjectReaders& readers,
                           SendRemote send_remote, WriteStore write_store)
    : self_(std::move(self_endpoint)),
      mailbox_(mailbox),
      readers_(readers),
      send_remote_(std::move(send_remote)),
      write_store_(std::move(write_store)) {}

void OutputRouter::DeliverLocal(Completion& done) const {
  const proto::Entry& e = done.item->entry;
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    for (const auto& dest : e.outputs[o]) {
      if (dest.kind == proto::OutputDest::kStore) {
        // Failures go to its readers with the write, from the loop thread.
        if (done.outputs.ok()) readers_.Deliver({dest.object_id, dest.shard}, (*done.outputs)[o]);
        continue;
      }
      // Pieces of a reshard are cut and put together by the loop thread.
      if (dest.kind != proto::OutputDest::kTuple || dest.data_endpoint != self_ ||
          dest.piece.of > 0) {
        continue;
      }
      mailbox_.Deliver({e.run_id, dest.node, dest.input, dest.shard},
                       done.outputs.ok() ? Result<Tensor>((*done.outputs)[o])
                                         : Result<Tensor>(done.outputs.status()));
    }
  }
  done.local_tuples_delivered = true;
}

void OutputRouter::Route(const Completion& done) {
  const proto::Entry& e = done.item->entry;
  for (size_t o = 0; o < e.outputs.size(); ++o) {
    // Copied only when a store write or a remote tuple needs it: a chain on this host was
    // fed by the device thread already and needs no copy here.
    std::optional<Result<Tensor>> copy;
    auto value = [&]() -> const Result<Tensor>& {
      if (!copy) {
        copy.emplace(done.outputs.ok() ? Result<Tensor>((*done.outputs)[o])
                                       : Result<Tensor>(done.outputs.status()));
      }
      return *copy;
    };
    for (const auto& dest : e.outputs[o]) {
      if (dest.kind == proto::OutputDest::kStore) {
        write_store_(dest, value());
        continue;
      }
      const proto::Piece& piece = dest.piece;
      if (dest.data_endpoint == self_ && piece.of == 0 && done.local_tuples_delivered) continue;
      proto::TupleHeader h;
      h.run_id = e.run_id;
      h.node = dest.node;
      h.input = dest.input;
      h.shard = dest.shard;
      if (piece.of == 0) {
        Queue(dest.data_endpoint, std::move(h), value());
        continue;
      }
      if (dest.route_by >= 0) {
        h.kind = proto::TupleHeader::kRows;
        h.pieces = piece.of;
        h.part = e.shard;
        Queue(dest.data_endpoint, std::move(h), RoutedRows(done, o, dest));
        continue;
      }
      h.dst_begin = piece.dst_begin;
      h.dst_shape = piece.dst_shape;
      h.pieces = piece.of;
      // Without a value, `dtype` tells the consumer what its shard will be made of.
      h.dtype = value().ok() ? value()->dtype() : DType::kF32;
      Queue(dest.data_endpoint, std::move(h),
            value().ok() ? ExtractBlock(*value(), piece.begin, piece.size)
                         : Result<Tensor>(value().status()));
    }
  }
}

void OutputRouter::Receive(const proto::TupleHeader& h, Result<Tensor> value) {
  const InputKey key{h.run_id, h.node, h.input, h.shard};
  if (h.kind == proto::TupleHeader::kRows && h.pieces == 0) {
    mailbox_.Deliver(key, InvalidArgument("routed rows that name no producer count"));
    return;
  }
  if (h.pieces == 0) {
    mailbox_.Deliver(key, std::move(value));
    return;
  }
  if (auto whole = pieces_.Add(key, h, std::move(value))) mailbox_.Deliver(key, std::move(*whole));
}

void OutputRouter::Queue(const std::string& endpoint, proto::TupleHeader h, Result<Tensor> value) {
  if (endpoint == self_ && !h.collective()) {
    Receive(h, std::move(value));  // same host: no socket
    return;
  }
  // A collective partial or total holds up its whole gang: it never waits for the window.
  const bool urgent = h.collective();
  send_remote_(endpoint, std::move(h), std::move(value), urgent);
}

Result<Tensor> OutputRouter::RoutedRows(const Completion& done, size_t output,
                                        const proto::OutputDest& dest) {
  if (!done.outputs.ok()) return done.outputs.status();
  const auto& outputs = *done.outputs;
  if (dest.route_by < 0 || static_cast<size_t>(dest.route_by) >= outputs.size()) {
    return InvalidArgument(
        fmt::format("rows routed by output {} of {}", dest.route_by, outputs.size()));
  }
  const Tensor& destinations = outputs[dest.route_by];
  if (destinations.dtype() == DType::kI32) {
    for (int32_t d : destinations.as<int32_t>()) {
      if (d < 0 || static_cast<uint32_t>(d) >= dest.route_shards) {
        // Every consumer shard hears the error: a row routed nowhere must not vanish.
        return InvalidArgument(
            fmt::format("a row is routed to shard {}, but the consumer has shards 0..{}", d,
                        dest.route_shards - 1));
      }
    }
  }
  return SelectRows(outputs[output], destinations, static_cast<int32_t>(dest.shard));
}

}  // namespace atl::executor
