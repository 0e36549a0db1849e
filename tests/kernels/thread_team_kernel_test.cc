// kernels/thread_team.h: every part of every job runs once, on its own thread, for teams of
// 0 to 7 helpers and jobs of any size up to the team's, many jobs in a row.
#include "kernels/thread_team.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace atl::kernels::internal {
namespace {

TEST(ThreadTeamKernelTest, RunsEveryPartOnceEachOnItsOwnThread) {
  for (int helpers : {0, 1, 2, 3, 7}) {
    ThreadTeam team(helpers);
    EXPECT_EQ(team.helpers(), helpers);
    for (int job = 0; job < 200; ++job) {
      const int parts = 1 + job % (helpers + 1);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(parts));
      std::mutex mu;
      std::set<std::thread::id> threads;
      team.Run(parts, [&](int i) {
        runs[static_cast<size_t>(i)]++;
        std::lock_guard lock(mu);
        threads.insert(std::this_thread::get_id());
      });
      for (int i = 0; i < parts; ++i) {
        ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1)
            << "part " << i << " of " << parts << ", helpers " << helpers << ", job " << job;
      }
      ASSERT_EQ(threads.size(), static_cast<size_t>(parts));
      ASSERT_TRUE(threads.count(std::this_thread::get_id())) << "part 0 runs on the caller";
    }
  }
}

TEST(ThreadTeamKernelTest, RunReturnsOnlyWhenEveryPartHasReturned) {
  ThreadTeam team(3);
  for (int job = 0; job < 100; ++job) {
    std::atomic<int> done{0};
    team.Run(4, [&](int i) {
      if (i != 0) std::this_thread::yield();  // helpers finish after the caller's part
      done++;
    });
    ASSERT_EQ(done.load(), 4) << "job " << job;
  }
}

}  // namespace
}  // namespace atl::kernels::internal
