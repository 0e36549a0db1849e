// DeviceStream without processes: a real stream thread runs items on a fake backend that
// records the order it ran them in; completions are awaited with bounded waits.
#include "services/executor/device_stream.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "compute/backend_cpu.h"
#include "kernels/matmul_threads.h"
#include "tests/services/executor/executor_test_util.h"
#include "tests/status_matchers.h"

namespace atl::executor {
namespace {

using namespace std::chrono_literals;

// Multiplies by the op's scalar operand; records each input's first element, in run order,
// and the matmul threads of the thread that ran it.
class FakeBackend final : public compute::Backend {
 public:
  std::string_view name() const override { return "fake"; }
  Result<Tensor> Run(const ir::Op& op, std::span<const Tensor* const> operands) override {
    Tensor out = *operands[0];
    {
      std::lock_guard lock(mu_);
      ran_.push_back(out.as<float>()[0]);
      matmul_threads_.push_back(kernels::MatmulThreads());
    }
    for (float& v : out.as<float>()) v *= static_cast<float>(op.operands[1].scalar);
    return out;
  }
  std::vector<float> ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }
  std::vector<int> matmul_threads() {
    std::lock_guard lock(mu_);
    return matmul_threads_;
  }

 private:
  std::mutex mu_;
  std::vector<float> ran_;
  std::vector<int> matmul_threads_;
};

// What the stream handed back, in order.
class Completions {
 public:
  void Add(Completion c) {
    {
      std::lock_guard lock(mu_);
      done_.push_back(std::move(c));
    }
    cv_.notify_all();
  }
  // The first `n` completions, once there are that many (at most 10 s).
  std::vector<Completion> WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, 10s, [&] { return done_.size() >= n; }))
        << "only " << done_.size() << " of " << n << " items completed";
    return done_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Completion> done_;
};

class DeviceStreamTest : public ::testing::Test {
 protected:
  // Shard 0 of 1 of x * 3 over f32 [2], in gang `gang_seq`, its input missing.
  std::shared_ptr<WorkItem> Item(uint64_t gang_seq) {
    proto::Entry e = testutil::MakeEntry(1, 0, 1);
    e.gang_seq = gang_seq;
    auto item = testutil::MakeItem(std::move(e));
    item->function = function_;
    return item;
  }
  static Tensor Input(float first) { return Tensor::F32({2}, {first, 1}); }

  std::shared_ptr<const ir::FunctionDef> function_ = std::make_shared<const ir::FunctionDef>(
      testutil::ScaleFunction(ir::SplitType(DType::kF32, {2}, -1), 3.0));
  FakeBackend backend_;
  CollectiveHub hub_{"tcp://self:1", [](auto&&...) {}, 1s};
  Completions completions_;
  static constexpr int kMatmulThreads = 3;
  DeviceStream stream_{backend_, hub_, [this](Completion c) { completions_.Add(std::move(c)); },
                       kMatmulThreads};
};

TEST_F(DeviceStreamTest, KernelsRunWithTheDevicesShareOfTheCores) {
  auto item = Item(1);
  stream_.Enqueue(item);
  stream_.Deliver(item, 0, Input(1));
  ASSERT_EQ(completions_.WaitFor(1).size(), 1u);
  EXPECT_EQ(backend_.matmul_threads(), std::vector<int>{kMatmulThreads});
}

TEST_F(DeviceStreamTest, ItemsRunInGangOrderWhateverOrderTheirInputsCome) {
  auto third = Item(3);
  auto first = Item(1);
  auto second = Item(2);
  stream_.Enqueue(third);
  stream_.Enqueue(first);  // queued ahead of the third: gang order, not arrival order
  stream_.Enqueue(second);
  EXPECT_EQ(stream_.queued(), 3u);
  stream_.Deliver(third, 0, Input(30));
  stream_.Deliver(second, 0, Input(20));
  stream_.Deliver(first, 0, Input(10));

  const auto done = completions_.WaitFor(3);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].item, first);
  EXPECT_EQ(done[1].item, second);
  EXPECT_EQ(done[2].item, third);
  EXPECT_EQ(backend_.ran(), (std::vector<float>{10, 20, 30}));
  ASSERT_THAT(done[2].outputs, IsOk());
  EXPECT_EQ(done[2].outputs->at(0), Tensor::F32({2}, {90, 3}));
  EXPECT_LE(done[2].start_us, done[2].end_us);
  EXPECT_EQ(stream_.queued(), 0u);
}

TEST_F(DeviceStreamTest, AnItemWaitsForItsOutputReservations) {
  auto held = Item(2);
  held->reservations_missing = 1;
  stream_.Enqueue(held);
  stream_.Deliver(held, 0, Input(20));
  // An earlier gang still runs; the held item cannot, whatever the timing.
  auto earlier = Item(1);
  stream_.Enqueue(earlier);
  stream_.Deliver(earlier, 0, Input(10));
  const auto before = completions_.WaitFor(1);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].item, earlier);
  EXPECT_EQ(stream_.queued(), 1u);

  stream_.Reserved(held);
  const auto after = completions_.WaitFor(2);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[1].item, held);
  EXPECT_THAT(after[1].outputs, IsOk());
}

TEST_F(DeviceStreamTest, AFailedItemCompletesWithItsFirstFailureWithoutRunning) {
  auto doomed = Item(1);
  stream_.Enqueue(doomed);
  stream_.Fail(doomed, Unavailable("peer lost"));
  stream_.Fail(doomed, Internal("later news"));
  const auto done = completions_.WaitFor(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].item, doomed);
  EXPECT_EQ(done[0].outputs.status().code(), Code::kUnavailable);
  EXPECT_EQ(done[0].outputs.status().message(), "peer lost");
  EXPECT_TRUE(backend_.ran().empty());
}

TEST_F(DeviceStreamTest, AFailingKernelIsTheItemsResult) {
  auto item = Item(1);
  stream_.Enqueue(item);
  stream_.Deliver(item, 0, Tensor::F32({3}, {1, 2, 3}));  // not the declared [2]
  const auto done = completions_.WaitFor(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].outputs.status().code(), Code::kInvalidArgument);
}

// Cancelling a run on a real cpu stream: its running spin stops at once, its queued items
// fail without running, and another run's item runs next.
TEST(DeviceStreamCancelTest, CancelRunStopsTheRunningItemAndFailsTheRunsQueuedOnes) {
  const ir::TensorType type = ir::SplitType(DType::kF32, {2}, -1);
  constexpr double kSpinUs = 60e6;
  ir::FunctionDef spin_fn;
  spin_fn.name = "spin";
  spin_fn.inputs = {type};
  spin_fn.ops = {ir::Op{ir::OpCode::kSpin, {testutil::InputOperand(0)}, kSpinUs, type}};
  spin_fn.outputs = {testutil::OpOperand(0)};
  auto spin = std::make_shared<const ir::FunctionDef>(spin_fn);
  auto scale = std::make_shared<const ir::FunctionDef>(testutil::ScaleFunction(type, 3.0));
  auto item = [](uint64_t run, uint64_t gang, std::shared_ptr<const ir::FunctionDef> fn) {
    proto::Entry e = testutil::MakeEntry(1, 0, 1);
    e.run_id = run;
    e.gang_seq = gang;
    auto it = testutil::MakeItem(std::move(e));
    it->function = std::move(fn);
    return it;
  };
  CollectiveHub hub{"tcp://self:1", [](auto&&...) {}, 1s};
  Completions completions;
  DeviceStream stream(
      compute::CpuBackend::Get(), hub, [&](Completion c) { completions.Add(std::move(c)); }, 1);
  auto running = item(1, 1, spin);
  auto queued = item(1, 2, scale);
  auto other = item(2, 3, scale);
  for (const auto& i : {running, queued, other}) {
    stream.Enqueue(i);
    stream.Deliver(i, 0, Tensor::F32({2}, {1, 2}));
  }
  // The spin left the queue: it runs.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (stream.queued() == 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(stream.queued(), 2u) << "the spin never started";

  const std::chrono::duration<double, std::micro> kPrompt(kSpinUs / 10);
  const auto cancelled_at = std::chrono::steady_clock::now();
  stream.CancelRun(1, Cancelled("run 1 was cancelled"));
  const auto done = completions.WaitFor(3);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].item, running);
  EXPECT_EQ(done[0].outputs.status().code(), Code::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, kPrompt);
  EXPECT_EQ(done[1].item, queued);
  EXPECT_EQ(done[1].outputs.status().message(), "run 1 was cancelled");
  EXPECT_EQ(done[2].item, other);
  ASSERT_THAT(done[2].outputs, IsOk());
  EXPECT_EQ(done[2].outputs->at(0), Tensor::F32({2}, {3, 6}));
}

// A shard cancelled part way, before its gang's all-reduce, abandons it: the gang's other
// shard (on another device of the host) fails at once instead of holding its device until
// the hub's timeout.
TEST(DeviceStreamCancelTest, AShardCancelledBeforeItsAllReduceReleasesTheRestOfItsGang) {
  const ir::TensorType type = ir::SplitType(DType::kF32, {2}, -1);
  constexpr double kSpinUs = 60e6;
  // Both shards' functions have the all-reduce as op 1: shard 0 spins first, shard 1 scales.
  auto with_all_reduce = [&](ir::Op first) {
    ir::FunctionDef fn;
    fn.name = "then_all_reduce";
    fn.inputs = {type};
    fn.ops = {std::move(first),
              ir::Op{ir::OpCode::kAllReduceSum, {testutil::OpOperand(0)}, 0.0, type}};
    fn.outputs = {testutil::OpOperand(1)};
    return std::make_shared<const ir::FunctionDef>(fn);
  };
  auto spin_then_reduce =
      with_all_reduce(ir::Op{ir::OpCode::kSpin, {testutil::InputOperand(0)}, kSpinUs, type});
  auto scale_then_reduce = with_all_reduce(ir::Op{
      ir::OpCode::kMul, {testutil::InputOperand(0), testutil::ScalarOperand(2.0)}, 0.0, type});
  const std::string self = "tcp://self:1";
  auto layout = std::make_shared<const GangLayout>(std::vector<std::string>{self, self});
  auto shard = [&](uint32_t index, std::shared_ptr<const ir::FunctionDef> fn) {
    auto item = testutil::MakeItem(testutil::MakeEntry(1, index, 2, index));
    item->function = std::move(fn);
    item->layout = layout;
    return item;
  };
  // Longer than the completions' own bound: a gang left waiting shows as a missing
  // completion, not as a late one.
  CollectiveHub hub{self, [](auto&&...) {}, 60s};
  Completions spun, reduced;
  DeviceStream device0(
      compute::CpuBackend::Get(), hub, [&](Completion c) { spun.Add(std::move(c)); }, 1);
  DeviceStream device1(
      compute::CpuBackend::Get(), hub, [&](Completion c) { reduced.Add(std::move(c)); }, 1);
  auto spinning = shard(0, spin_then_reduce);
  auto waiting = shard(1, scale_then_reduce);
  device0.Enqueue(spinning);
  device1.Enqueue(waiting);
  device0.Deliver(spinning, 0, Tensor::F32({2}, {1, 2}));
  device1.Deliver(waiting, 0, Tensor::F32({2}, {1, 2}));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((device0.queued() > 0 || device1.queued() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(device0.queued() + device1.queued(), 0u) << "a shard never started";

  device0.CancelRun(spinning->entry.run_id, Cancelled("the run was cancelled"));
  const auto cancelled = spun.WaitFor(1);
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0].outputs.status().code(), Code::kCancelled);
  const auto released = reduced.WaitFor(1);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].outputs.status().code(), Code::kCancelled)
      << released[0].outputs.status().ToString();
}

}  // namespace
}  // namespace atl::executor
