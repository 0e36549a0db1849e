// Reading ahead (client/read_ahead.h): waiting for the first of a batch of runs reads the
// later runs' small results at once, so the rest cost no request each; a read ahead that
// outlived its wait in the store is read again, a later run's failure comes through its
// read ahead, and a run dropped while its read ahead is open still has its objects freed.
// The client's requests are counted by the process's sent-message counters
// (common/net/sent_counters.h): the client is the only sender of GetObject in this process.
#include <optional>
#include <thread>

#include "common/net/sent_counters.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/member_context.h"
#include "tests/e2e/one_call_program.h"
#include "tests/e2e/store_stats.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

uint64_t ReadsSent() { return net::SentCounts()[proto::Kind::kGetObject].messages; }

Value Inc(FunctionBuilder& b, Value x) { return b.Add(x, 1.0); }

class ReadAheadTest : public ClusterTest {
 protected:
  void SetUp() override {
    client_ = Connect("read-ahead");
    ASSERT_NE(client_, nullptr);
    auto slice = client_->CreateSlice(1, "island0");
    ASSERT_THAT(slice, IsOk());
    slice_ = *slice;
    auto inc = OneCall(*client_, slice_, "inc", Inc);
    ASSERT_THAT(inc, IsOk());
    inc_ = *inc;
  }

  // A run spinning `micros` on the slice's device before it adds 1.
  atl::Run Spinning(double micros) {
    auto spin = OneCall(*client_, slice_, "spin", [micros](FunctionBuilder& b, Value x) {
      return b.Add(b.Spin(x, micros), 1.0);
    });
    EXPECT_THAT(spin, IsOk());
    auto run = client_->Submit(*spin, {Tensor::F32({2}, {0, 0})});
    EXPECT_THAT(run, IsOk());
    return std::move(run).value();
  }

  atl::Run IncRun(float x) {
    auto run = client_->Submit(inc_, {Tensor::F32({2}, {x, -x})});
    EXPECT_THAT(run, IsOk());
    return std::move(run).value();
  }

  uint64_t ObjectsHeld() {
    return ObjectsOf(StoreStatsByHost(context_, RmEndpoint()), client_->id());
  }

  std::unique_ptr<Client> client_;
  Slice slice_;
  Program inc_;
  MemberContext context_;
};

TEST_F(ReadAheadTest, WaitingForTheFirstOfABatchReadsTheOthersAhead) {
  constexpr int kRuns = 20;
  std::vector<atl::Run> runs;
  for (int i = 0; i < kRuns; ++i) runs.push_back(IncRun(static_cast<float>(i)));
  const uint64_t before = ReadsSent();
  auto first = runs[0].Wait(30s);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->at(0), Tensor::F32({2}, {1, 1}));
  EXPECT_EQ(ReadsSent() - before, uint64_t{kRuns}) << "its own read and one ahead per later run";
  for (int i = 1; i < kRuns; ++i) {
    auto out = runs[i].Wait(30s);
    ASSERT_THAT(out, IsOk()) << "run " << i << ": " << out.status().ToString();
    EXPECT_EQ(out->at(0), Tensor::F32({2}, {i + 1.0f, 1.0f - i}));
  }
  EXPECT_EQ(ReadsSent() - before, uint64_t{kRuns}) << "the later waits sent no read of their own";
  // A second wait for a run reads it again: what was read ahead is handed out once.
  auto again = runs[kRuns - 1].Wait(30s);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->at(0), Tensor::F32({2}, {kRuns, 1.0f - (kRuns - 1)}));
  EXPECT_EQ(ReadsSent() - before, uint64_t{kRuns} + 1);
}

TEST_F(ReadAheadTest, AReadAheadThatOutlivedItsWaitIsReadAgain) {
  atl::Run quick = IncRun(1);
  atl::Run slow = Spinning(4e6);  // queued behind `quick` on the same device
  const uint64_t before = ReadsSent();
  // The read ahead of `slow` waits in its store only as long as this wait could have.
  ASSERT_THAT(quick.Wait(2s), IsOk());
  auto out = slow.Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {1, 1}));
  EXPECT_EQ(ReadsSent() - before, 3u) << "quick's read, slow's read ahead, and slow's again";
}

TEST_F(ReadAheadTest, ALaterRunsFailureComesThroughItsReadAhead) {
  atl::Run quick = IncRun(1);
  atl::Run spinning = Spinning(60e6);
  auto reader = client_->Submit(inc_, {spinning.Output(0)});
  ASSERT_THAT(reader, IsOk());
  ASSERT_THAT(quick.Wait(30s), IsOk());  // reads `spinning` and `reader` ahead
  const uint64_t before = ReadsSent();
  ASSERT_THAT(spinning.Cancel(), IsOk());
  const auto cancelled_at = Clock::now();
  auto read = reader->Wait(30s);
  EXPECT_EQ(read.status().code(), Code::kCancelled) << read.status().ToString();
  EXPECT_LT(Clock::now() - cancelled_at, 10s);
  EXPECT_EQ(ReadsSent(), before) << "the reader's failure came without a read of its own";
}

TEST_F(ReadAheadTest, ARunDroppedWhileReadAheadStillHasItsObjectsFreed) {
  const uint64_t held = ObjectsHeld();
  atl::Run quick = IncRun(1);
  std::optional<atl::Run> slow = Spinning(300e3);
  ASSERT_THAT(quick.Wait(30s), IsOk());  // `slow` is read ahead, still spinning
  slow.reset();                          // released after its read, on the same socket
  // Left: quick's result alone (its argument travelled inside the submission), and no
  // release that met no object.
  uint64_t objects = 0, tombstones = 0;
  const auto deadline = Clock::now() + 10s;
  do {
    std::this_thread::sleep_for(5ms);
    const auto stores = StoreStatsByHost(context_, RmEndpoint());
    objects = ObjectsOf(stores, client_->id());
    tombstones = TombstonesOf(stores, client_->id());
  } while ((objects != held + 1 || tombstones != 0) && Clock::now() < deadline);
  EXPECT_EQ(objects, held + 1) << "the dropped run's objects were not freed";
  EXPECT_EQ(tombstones, 0u);
  // The store answers this client's reads as before.
  auto after = IncRun(5).Wait(30s);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->at(0), Tensor::F32({2}, {6, -4}));
}

}  // namespace
}  // namespace atl::testing
