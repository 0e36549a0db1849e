#include "compute/control_flow.h"

#include <cstring>

#include <fmt/format.h>

namespace atl::compute {

namespace {

using TensorList = std::vector<Tensor>;

TensorList CopyArgs(std::span<const Tensor* const> args, size_t from, size_t count) {
  TensorList out;
  out.reserve(count);
  for (size_t i = from; i < from + count; ++i) out.push_back(*args[i]);
  return out;
}

void AppendArgs(TensorList& to, std::span<const Tensor* const> args, size_t from, size_t count) {
  for (size_t i = from; i < from + count; ++i) to.push_back(*args[i]);
}

Result<const ir::FunctionDef*> StructuredBody(const ir::FunctionDef& fn, const ir::Op& op,
                                              size_t at) {
  if (at >= op.params.size() || op.params[at] < 0 ||
      static_cast<size_t>(op.params[at]) >= fn.bodies.size()) {
    return InvalidArgument(fmt::format("{}: no body {}", ir::OpName(op.code), at));
  }
  return &fn.bodies[static_cast<size_t>(op.params[at])];
}

// The value of a bool[] or i32[] tensor.
int64_t IndexValue(const Tensor& t) {
  if (t.dtype() == DType::kBool) return t.as<bool>()[0] ? 1 : 0;
  return t.as<int32_t>()[0];
}

Result<TensorList> RunWhile(const ir::FunctionDef& fn, const ir::Op& op,
                            std::span<const Tensor* const> args, const BodyRunner& run_body,
                            const std::atomic<bool>* cancelled) {
  ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef* cond, StructuredBody(fn, op, 0));
  ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef* body, StructuredBody(fn, op, 1));
  const auto cond_consts = static_cast<size_t>(op.params[2]);
  const auto body_consts = static_cast<size_t>(op.params[3]);
  const size_t carried = args.size() - cond_consts - body_consts;
  TensorList carry = CopyArgs(args, 0, carried);
  for (int64_t trip = 0;; ++trip) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return Cancelled(fmt::format("while: cancelled before trip {}", trip));
    }
    TensorList cond_in = carry;
    AppendArgs(cond_in, args, carried, cond_consts);
    ATOLL_ASSIGN_OR_RETURN(TensorList go, run_body(*cond, std::move(cond_in)));
    if (go.size() != 1 || go[0].dtype() != DType::kBool || go[0].nbytes() != 1) {
      return InvalidArgument("while: its cond did not give one bool[]");
    }
    if (!go[0].as<bool>()[0]) return carry;
    AppendArgs(carry, args, carried + cond_consts, body_consts);
    ATOLL_ASSIGN_OR_RETURN(carry, run_body(*body, std::move(carry)));
  }
}

Result<TensorList> RunScan(const ir::FunctionDef& fn, const ir::Op& op,
                           std::span<const Tensor* const> args, const Shape& mesh,
                           const std::vector<ir::TensorType>& types, const BodyRunner& run_body) {
  ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef* body, StructuredBody(fn, op, 0));
  const auto carried = static_cast<size_t>(op.params[1]);
  const auto consts = static_cast<size_t>(op.params[2]);
  const int64_t length = op.params[3];
  const bool reverse = op.params[4] != 0;
  const size_t scanned = args.size() - carried - consts;
  // The stacked ys, allocated whole from their types; each step writes its row.
  TensorList results = CopyArgs(args, 0, carried);
  for (size_t r = carried; r < types.size(); ++r) {
    results.emplace_back(types[r].dtype, ir::ShardShape(types[r], mesh));
  }
  for (int64_t step = 0; step < length; ++step) {
    const int64_t row = reverse ? length - 1 - step : step;
    TensorList in(std::make_move_iterator(results.begin()),
                  std::make_move_iterator(results.begin() + static_cast<ptrdiff_t>(carried)));
    for (size_t x = carried; x < carried + scanned; ++x) {
      const Tensor& xs = *args[x];
      const Shape shape(xs.shape().begin() + 1, xs.shape().end());
      const size_t row_bytes = xs.nbytes() / static_cast<size_t>(length);
      std::vector<std::byte> bytes(xs.data() + row * row_bytes, xs.data() + (row + 1) * row_bytes);
      ATOLL_ASSIGN_OR_RETURN(Tensor slice, Tensor::FromBytes(xs.dtype(), shape, std::move(bytes)));
      in.push_back(std::move(slice));
    }
    AppendArgs(in, args, carried + scanned, consts);
    ATOLL_ASSIGN_OR_RETURN(TensorList out, run_body(*body, std::move(in)));
    if (out.size() != types.size()) {
      return InvalidArgument(
          fmt::format("scan: its body gave {} values, not {}", out.size(), types.size()));
    }
    for (size_t c = 0; c < carried; ++c) results[c] = std::move(out[c]);
    for (size_t y = carried; y < out.size(); ++y) {
      Tensor& ys = results[y];
      const size_t row_bytes = ys.nbytes() / static_cast<size_t>(length);
      if (out[y].nbytes() != row_bytes) {
        return InvalidArgument(fmt::format("scan: its body's output {} has {} bytes, not {}", y,
                                           out[y].nbytes(), row_bytes));
      }
      std::memcpy(ys.data() + row * row_bytes, out[y].data(), row_bytes);
    }
  }
  return results;
}

Result<TensorList> RunCond(const ir::FunctionDef& fn, const ir::Op& op,
                           std::span<const Tensor* const> args, const BodyRunner& run_body) {
  const size_t branches = op.params.size() / 2;
  size_t consts = 0;
  for (size_t b = 0; b < branches; ++b) consts += static_cast<size_t>(op.params[branches + b]);
  const size_t passed = args.size() - 1 - consts;
  int64_t index = IndexValue(*args[0]);
  // Out of range: the last branch, as XLA's conditional.
  if (index < 0 || index >= static_cast<int64_t>(branches)) index = branches - 1;
  size_t first_const = 1 + passed;
  for (int64_t b = 0; b < index; ++b) first_const += static_cast<size_t>(op.params[branches + b]);
  ATOLL_ASSIGN_OR_RETURN(const ir::FunctionDef* branch,
                         StructuredBody(fn, op, static_cast<size_t>(index)));
  TensorList in = CopyArgs(args, 1, passed);
  AppendArgs(in, args, first_const, static_cast<size_t>(op.params[branches + index]));
  return run_body(*branch, std::move(in));
}

}  // namespace

Result<std::vector<Tensor>> RunStructured(const ir::FunctionDef& fn, const ir::Op& op,
                                          std::span<const Tensor* const> args, const Shape& mesh,
                                          const BodyRunner& run_body,
                                          const std::atomic<bool>* cancelled) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == nullptr) {
      return InvalidArgument(fmt::format("{}: operand {} is a scalar", ir::OpName(op.code), i));
    }
  }
  // The rule checked the layout; a corrupt op that slipped past it is refused, not read.
  ATOLL_ASSIGN_OR_RETURN(const std::vector<ir::TensorType> types, ir::ResultTypes(fn, op));
  switch (op.code) {
    case ir::OpCode::kWhile:
      return RunWhile(fn, op, args, run_body, cancelled);
    case ir::OpCode::kScan:
      return RunScan(fn, op, args, mesh, types, run_body);
    case ir::OpCode::kCond:
      return RunCond(fn, op, args, run_body);
    default:
      return InvalidArgument(fmt::format("{} is not a structured op", ir::OpName(op.code)));
  }
}

}  // namespace atl::compute
