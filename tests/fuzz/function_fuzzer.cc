// A compiled function as a client sends it (msgpack of ir::FunctionDef, inside
// RegisterFunction): one that decodes and that ir::Validate accepts for 1, 2 or 4 shards is
// run by the interpreter on the cpu backend, shard 0, over inputs of its local shapes, as an
// executor would run it. Nothing may crash, leak or read out of bounds; every refusal is a
// Status. Functions with collectives (they need a gang) or with a value over 2^16 elements
// are only validated; a run is cancelled after 2 s (a while loop may not end).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <msgpack.hpp>

#include "common/ir/ir.h"
#include "common/proto/codec.h"
#include "compute/interpreter.h"

namespace atl::fuzz {
namespace {

bool Small(const ir::TensorType& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || d > (1 << 16)) return false;
    n *= d;
    if (n > (1 << 16)) return false;
  }
  return true;
}

bool AllSmall(const ir::FunctionDef& fn) {
  for (const auto& t : fn.inputs) {
    if (!Small(t)) return false;
  }
  for (const auto& op : fn.ops) {
    if (!Small(op.type)) return false;
  }
  for (const auto& body : fn.bodies) {
    if (!AllSmall(body)) return false;
  }
  return true;
}

void Run(const ir::FunctionDef& fn, int shards, const uint8_t* data, size_t size) {
  const Shape mesh = ir::MeshOf(fn, shards);
  std::vector<Tensor> inputs;
  size_t at = 0;
  for (const auto& t : fn.inputs) {
    Tensor x(t.dtype, ir::ShardShape(t, mesh));
    // The input's bytes from the fuzzer's, so that values (indices, trip counts) vary too.
    auto* bytes = reinterpret_cast<uint8_t*>(x.data());
    for (size_t i = 0; i < x.nbytes() && size > 0; ++i) bytes[i] = data[at++ % size];
    inputs.push_back(std::move(x));
  }
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!done_cv.wait_for(lock, std::chrono::seconds(2), [&] { return done; })) cancelled = true;
  });
  auto result = compute::RunFunction(fn, 0, shards, std::move(inputs), compute::CpuBackend::Get(),
                                     nullptr, &cancelled);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  done_cv.notify_all();
  watchdog.join();
  if (result.ok() && result->size() != fn.outputs.size()) std::abort();
}

}  // namespace
}  // namespace atl::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  atl::ir::FunctionDef fn;
  try {
    // With the limits the services decode with (a declared length is never trusted).
    const msgpack::object_handle handle =
        msgpack::unpack(reinterpret_cast<const char*>(data), size, nullptr, nullptr,
                        atl::proto::UntrustedLimit(size));
    handle.get().convert(fn);
  } catch (const std::exception&) {
    return 0;  // not a function: the codec's refusal, which message_fuzzer covers
  }
  for (int shards : {1, 2, 4}) {
    if (!atl::ir::Validate(fn, shards).ok()) continue;
    if (!atl::ir::HasCollectives(fn) && atl::fuzz::AllSmall(fn)) {
      atl::fuzz::Run(fn, shards, data, size);
    }
    break;
  }
  return 0;
}
