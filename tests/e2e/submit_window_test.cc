// The client's window of unanswered submissions (client/client.cc, kMaxUnacked): a client
// streaming programs to an island scheduler that does not answer (stopped with SIGSTOP, as
// a scheduler stalled on a busy machine is) stops at the window with a clear error instead
// of piling up answers the scheduler's ROUTER would lose, and every run inside the window
// runs once the scheduler goes on.
#include <signal.h>

#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"
#include "tests/e2e/one_call_program.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kScheduler[] = "scheduler-island0";
constexpr int kWindow = 256;  // client/client.cc

class SubmitWindowTest : public ClusterTest {};

TEST_F(SubmitWindowTest, AClientStopsAtItsWindowWhileTheSchedulerIsSilentAndNothingIsLost) {
  // A short request timeout: the scheduler stays stopped well within its liveness (1 s).
  auto connected = Client::Connect({.rm_endpoint = RmEndpoint(),
                                    .name = "submit-window",
                                    .request_timeout = 200ms,
                                    .keys_dir = KeysDir()});
  ASSERT_THAT(connected, IsOk());
  std::unique_ptr<Client> client = std::move(connected).value();
  auto slice = client->CreateSlice(1, "island0");
  ASSERT_THAT(slice, IsOk());
  auto inc =
      OneCall(*client, *slice, "inc", [](FunctionBuilder& b, Value x) { return b.Add(x, 1.0); });
  ASSERT_THAT(inc, IsOk());

  ASSERT_THAT(cluster_->Signal(kScheduler, SIGSTOP), IsOk());
  std::vector<atl::Run> runs;
  Status refused;
  Clock::duration refusal_took{};
  for (int i = 0; i <= kWindow; ++i) {
    const auto start = Clock::now();
    auto run =
        client->Submit(*inc, {Tensor::F32({2}, {static_cast<float>(i), -static_cast<float>(i)})});
    if (!run.ok()) {
      refused = run.status();
      refusal_took = Clock::now() - start;
      break;
    }
    runs.push_back(std::move(run).value());
  }
  ASSERT_THAT(cluster_->Signal(kScheduler, SIGCONT), IsOk());

  EXPECT_EQ(runs.size(), size_t{kWindow}) << "the window must hold exactly its submissions";
  EXPECT_EQ(refused.code(), Code::kDeadlineExceeded) << refused.ToString();
  EXPECT_NE(refused.message().find("answered none of the last 256 submissions"), std::string::npos)
      << refused.ToString();
  EXPECT_GE(refusal_took, 150ms) << "the refusal must come after waiting for an answer";
  for (size_t i = 0; i < runs.size(); ++i) {
    auto out = runs[i].Wait(30s);
    ASSERT_THAT(out, IsOk()) << "run " << i << ": " << out.status().ToString();
    EXPECT_EQ(out->at(0), Tensor::F32({2}, {i + 1.0f, 1.0f - i}));
  }
  // The window is open again once the scheduler answers.
  auto after = client->Submit(*inc, {Tensor::F32({2}, {1, 2})});
  ASSERT_THAT(after, IsOk());
  auto out = after->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->at(0), Tensor::F32({2}, {2, 3}));
}

}  // namespace
}  // namespace atl::testing
