// A gtest fixture that starts one real local cluster (config/test.toml unless the suite
// names another: every port chosen freely, so test runs never collide) for a whole test
// suite, and stops it afterwards. Its clients connect with the cluster's CURVE keys (or in
// plain text, when the config says so), which the fixture also puts in $ATOLL_KEYS.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "atoll/client.h"
#include "launcher/local_cluster.h"
#include "tests/status_matchers.h"

namespace atl::testing {

class ClusterTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/config/test.toml"); }

  // For a suite that needs another topology: call it from its own SetUpTestSuite.
  static void StartCluster(const std::string& config_path) {
    char pattern[] = "/tmp/atoll-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    state_dir_ = new std::string(pattern);
    LocalClusterOptions options;
    options.config_path = config_path;
    options.state_dir = *state_dir_;
    options.bin_dir = ATOLL_BIN_DIR;
    cluster_ = new LocalCluster(options);
    Status started = cluster_->Start();
    ASSERT_THAT(started, IsOk());
    // Clients this test makes, and commands it runs, connect with the cluster's keys.
    setenv("ATOLL_KEYS", cluster_->keys_dir().c_str(), 1);
  }

  static void TearDownTestSuite() {
    if (cluster_ != nullptr) {
      Status stopped = cluster_->Stop();
      EXPECT_THAT(stopped, IsOk());
      delete cluster_;
      cluster_ = nullptr;
    }
    if (state_dir_ != nullptr) {
      // A failed suite's services' logs are what says why: they stay.
      if (::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
        std::cout << "the cluster's logs stay in " << *state_dir_ << "/logs\n";
      } else {
        std::filesystem::remove_all(*state_dir_);
      }
      delete state_dir_;
      state_dir_ = nullptr;
    }
  }

  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the cluster did not start"; }

  static std::string RmEndpoint() { return cluster_->info().rm_endpoint; }
  static std::string EventsEndpoint() { return cluster_->info().events_out; }
  // The cluster's CURVE keys directory, or "plain" (ClientOptions::keys_dir).
  static std::string KeysDir() { return cluster_->keys_dir(); }

  // The argv of an `atoll` command aimed at this cluster.
  static std::vector<std::string> AtollCommand(std::vector<std::string> args) {
    std::vector<std::string> argv = {ATOLL_BIN_DIR "/atoll", "--rm",   RmEndpoint(), "--events",
                                     EventsEndpoint(),       "--keys", KeysDir()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  static std::unique_ptr<Client> Connect(const std::string& name = "test") {
    auto client = Client::Connect(
        {.rm_endpoint = cluster_->info().rm_endpoint, .name = name, .keys_dir = KeysDir()});
    EXPECT_THAT(client, IsOk());
    return client.ok() ? std::move(client).value() : nullptr;
  }

  static inline LocalCluster* cluster_ = nullptr;
  static inline std::string* state_dir_ = nullptr;
};

// The same on a two-host island whose devices have 4 MiB each (tests/e2e/small_memory.toml).
class SmallMemoryClusterTest : public ClusterTest {
 public:
  static void SetUpTestSuite() { StartCluster(ATOLL_SOURCE_DIR "/tests/e2e/small_memory.toml"); }
};

}  // namespace atl::testing
