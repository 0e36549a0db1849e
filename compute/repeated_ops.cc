#include "compute/repeated_ops.h"

#include <bit>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace atl::compute {

namespace {

bool Merges(const ir::Op& op) {
  return !ir::IsCollective(op.code) && !ir::IsStructured(op.code) &&
         op.code != ir::OpCode::kTupleElement && op.code != ir::OpCode::kSpin;
}

// Bit for bit: 0.0 and -0.0 are different scalars (x * -0.0 keeps a sign x * 0.0 does not).
uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }

bool Same(const ir::Op& a, const ir::Op& b) {
  if (a.code != b.code || Bits(a.attr) != Bits(b.attr) || a.type != b.type ||
      a.params != b.params || a.operands.size() != b.operands.size()) {
    return false;
  }
  for (size_t i = 0; i < a.operands.size(); ++i) {
    const ir::Operand& x = a.operands[i];
    const ir::Operand& y = b.operands[i];
    if (x.kind != y.kind || x.index != y.index || Bits(x.scalar) != Bits(y.scalar)) return false;
  }
  return true;
}

size_t HashOf(const ir::Op& op) {
  size_t h =
      std::hash<uint64_t>()(static_cast<uint64_t>(op.code) * 0x9E3779B97F4A7C15ULL ^ Bits(op.attr));
  auto mix = [&h](uint64_t v) { h ^= std::hash<uint64_t>()(v) + 0x9E3779B9 + (h << 6) + (h >> 2); };
  for (const ir::Operand& o : op.operands) {
    mix(o.kind);
    mix(static_cast<uint64_t>(o.index));
    mix(Bits(o.scalar));
  }
  for (int64_t p : op.params) mix(static_cast<uint64_t>(p));
  for (int64_t d : op.type.shape) mix(static_cast<uint64_t>(d));
  return h;
}

void Renumber(ir::Operand& o, const std::vector<int32_t>& to) {
  if (o.kind == ir::Operand::kOp) o.index = to[static_cast<size_t>(o.index)];
}

}  // namespace

ir::FunctionDef MergeRepeatedOps(ir::FunctionDef fn) {
  if (ir::HasCollectives(fn)) return fn;
  const size_t n = fn.ops.size();
  // Which op's result each op's readers read: its own, or the earlier one it repeats.
  std::vector<int32_t> same_as(n);
  std::unordered_multimap<size_t, int32_t> seen;
  for (size_t i = 0; i < n; ++i) {
    ir::Op& op = fn.ops[i];
    for (ir::Operand& o : op.operands) Renumber(o, same_as);
    same_as[i] = static_cast<int32_t>(i);
    if (!Merges(op)) continue;
    const size_t h = HashOf(op);
    const auto [from, to] = seen.equal_range(h);
    for (auto it = from; it != to; ++it) {
      if (Same(fn.ops[static_cast<size_t>(it->second)], op)) {
        same_as[i] = it->second;
        break;
      }
    }
    if (same_as[i] == static_cast<int32_t>(i)) seen.emplace(h, static_cast<int32_t>(i));
  }
  for (ir::Operand& o : fn.outputs) Renumber(o, same_as);
  std::vector<int32_t> kept_as(n, -1);
  std::vector<ir::Op> ops;
  for (size_t i = 0; i < n; ++i) {
    if (same_as[i] != static_cast<int32_t>(i)) continue;  // a repeat: read by no one now
    kept_as[i] = static_cast<int32_t>(ops.size());
    ops.push_back(std::move(fn.ops[i]));
    for (ir::Operand& o : ops.back().operands) Renumber(o, kept_as);
  }
  for (ir::Operand& o : fn.outputs) Renumber(o, kept_as);
  fn.ops = std::move(ops);
  return fn;
}

}  // namespace atl::compute
