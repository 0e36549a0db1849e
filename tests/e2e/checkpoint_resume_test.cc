// A training run survives the loss of its whole cluster: the MLP example trains with a
// checkpoint every few steps; once one is saved, every service is SIGKILLed mid-training
// (the example dies with them); a new cluster starts on the same state directory (its
// stores have the same checkpoint root), training resumes from the checkpoint, and its next
// 5 losses are exactly those of a run that was never interrupted.
//
// Exactly, not within a tolerance: the weights are saved and loaded bit for bit, the data
// of step s depends only on the seed and s, and every sum the step makes across devices is
// of two terms (two devices per host, two hosts), which floating-point addition gives the
// same whichever order they meet in, so both clusters compute the same bits.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "examples/mlp/mlp.h"
#include "launcher/local_cluster.h"
#include "tests/launcher/subprocess.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

class CheckpointResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atoll-resume-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    state_dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(state_dir_); }

  // A cluster of config/test.toml on this test's state directory.
  std::unique_ptr<LocalCluster> StartCluster() {
    LocalClusterOptions options;
    options.config_path = ATOLL_SOURCE_DIR "/config/test.toml";
    options.state_dir = state_dir_;
    options.bin_dir = ATOLL_BIN_DIR;
    auto cluster = std::make_unique<LocalCluster>(options);
    const Status started = cluster->Start();
    EXPECT_THAT(started, IsOk());
    if (!started.ok()) return nullptr;
    setenv("ATOLL_KEYS", cluster->keys_dir().c_str(), 1);  // the example's client finds them
    return cluster;
  }

  static examples::MlpConfig Config() {
    examples::MlpConfig config;
    config.batch = 32;
    config.hidden = 16;
    config.checkpoint = "runs/mlp";
    config.checkpoint_every = 4;
    return config;
  }

  std::string state_dir_;
};

TEST_F(CheckpointResumeTest, TrainingResumesAfterEveryServiceWasKilledWithTheSameLosses) {
  auto first = StartCluster();
  ASSERT_NE(first, nullptr);
  const examples::MlpConfig config = Config();
  Subprocess training({ATOLL_BIN_DIR "/atoll-example-mlp", "--rm", first->info().rm_endpoint,
                       "--steps", "100000", "--batch", std::to_string(config.batch), "--hidden",
                       std::to_string(config.hidden), "--checkpoint", config.checkpoint,
                       "--checkpoint-every", std::to_string(config.checkpoint_every)});
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (training.out().find("(checkpoint saved)") == std::string::npos) {
    ASSERT_FALSE(training.Poll(100ms)) << "the example ended:\n" << training.out();
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no checkpoint within 60 s";
  }
  // Mid-training, after a checkpoint: every service at once, then the training process.
  for (const ProcessInfo& service : first->info().processes) {
    ASSERT_THAT(first->Signal(service.name, SIGKILL), IsOk()) << service.name;
  }
  kill(training.pid(), SIGKILL);
  training.Wait(10s);
  (void)first->Stop();  // reaps what was killed
  first.reset();

  auto second = StartCluster();
  ASSERT_NE(second, nullptr);
  auto client = Client::Connect({.rm_endpoint = second->info().rm_endpoint,
                                 .name = "resume",
                                 .keys_dir = second->keys_dir()});
  ASSERT_THAT(client, IsOk());
  auto slice = (*client)->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());

  // The step the checkpoint holds: the run saved at least one before it was killed.
  examples::MlpConfig resume = config;
  resume.resume = true;
  resume.steps = 0;
  {
    auto saved = (*client)->Load(config.checkpoint, *slice, {.names = {"step"}});
    ASSERT_THAT(saved, IsOk());
    auto step = saved->run.Wait(0, 30s);
    ASSERT_THAT(step, IsOk());
    resume.steps = step->as<int32_t>()[0] + 5;
  }
  ASSERT_GE(resume.steps, config.checkpoint_every + 5);
  auto resumed = examples::TrainMlp(**client, *slice, resume);
  ASSERT_THAT(resumed, IsOk());
  ASSERT_EQ(resumed->first_step, resume.steps - 4);
  ASSERT_EQ(resumed->losses.size(), 5u);

  examples::MlpConfig uninterrupted = Config();
  uninterrupted.checkpoint = "";
  uninterrupted.steps = resume.steps;
  auto reference = examples::TrainMlp(**client, *slice, uninterrupted);
  ASSERT_THAT(reference, IsOk());
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(resumed->losses[i], reference->losses[resumed->first_step - 1 + i])
        << "step " << resumed->first_step + static_cast<int>(i);
  }
  // Not the losses of fresh weights: the resumed run started where the killed one was.
  auto fresh = examples::TrainMlp(**client, *slice, [&] {
    examples::MlpConfig c = uninterrupted;
    c.steps = 1;
    return c;
  }());
  ASSERT_THAT(fresh, IsOk());
  EXPECT_LT(resumed->losses[0], 0.9 * fresh->losses[0]);
  EXPECT_EQ(resumed->params.w1, reference->params.w1);
}

}  // namespace
}  // namespace atl::testing
