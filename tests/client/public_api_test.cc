// What a user of the installed client library sees: this file includes only the public
// headers (include/atoll/) and links only libatoll.so (plus ZeroMQ and threads); the build
// gives it no other include path, so an internal header leaking into the public API fails
// to compile here. It then runs the Pathways paper's Figure 2 program against a cluster
// started the way a user starts one, with `atoll up`.
#include <atoll/client.h>
#include <atoll/function.h>
#include <atoll/grad.h>
#include <atoll/program.h>
#include <atoll/status.h>
#include <atoll/tensor.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

class PublicApiTest : public ::testing::Test {
 protected:
  // One cluster for the suite, in a state dir of its own (ATOLL_HOME).
  static void SetUpTestSuite() {
    home_ = fs::temp_directory_path() / ("atoll-public-api-" + std::to_string(getpid()));
    fs::create_directories(home_);
    setenv("ATOLL_HOME", home_.c_str(), 1);
    const std::string up = std::string(ATOLL_BIN_DIR) + "/atoll up --config " +
                           ATOLL_SOURCE_DIR "/tests/ops/ops_cluster.toml --bin-dir " +
                           ATOLL_BIN_DIR + " > " + (home_ / "up.log").string() + " 2>&1";
    up_status_ = std::system(up.c_str());
  }
  static void TearDownTestSuite() {
    const std::string down = std::string(ATOLL_BIN_DIR) + "/atoll down > /dev/null 2>&1";
    [[maybe_unused]] int status = std::system(down.c_str());
    fs::remove_all(home_);
  }

  // The RM endpoint `atoll up` recorded in <ATOLL_HOME>/cluster.toml.
  static std::string RmEndpoint() {
    std::ifstream in(home_ / "cluster.toml");
    const std::string key = "rm_endpoint = \"";
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(key, 0) == 0) return line.substr(key.size(), line.size() - key.size() - 1);
    }
    return "";
  }

  static inline fs::path home_;
  static inline int up_status_ = -1;
};

TEST_F(PublicApiTest, TracesAndRunsFigure2) {
  ASSERT_EQ(up_status_, 0) << "atoll up failed; see " << (home_ / "up.log");
  auto client = atl::Client::Connect({.rm_endpoint = RmEndpoint(), .name = "public-api"});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto slice = (*client)->CreateSlice(2);
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();

  atl::FunctionBuilder a("a"), b("b"), c("c");
  a.Output(a.Mul(a.Input(atl::DType::kF32, {2}), 2.0));
  b.Output(b.Add(b.Input(atl::DType::kF32, {2}), 1.0));
  c.Output(c.Div(c.Input(atl::DType::kF32, {2}), 2.0));
  auto fa = (*client)->Register(a, *slice);
  auto fb = (*client)->Register(b, *slice);
  auto fc = (*client)->Register(c, *slice);
  ASSERT_TRUE(fa.ok() && fb.ok() && fc.ok());

  atl::ProgramBuilder p;
  atl::Traced v = p.Arg(atl::DType::kF32, {2});
  atl::Traced x = p.Call(*fa, {v})[0];
  atl::Traced y = p.Call(*fb, {v})[0];
  atl::Traced z = p.Call(*fa, {p.Call(*fc, {x})[0]})[0];
  p.Return({y, z});
  auto program = p.Build();
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_EQ(program->num_nodes(), 4u);

  auto run = (*client)->Submit(*program, {atl::Tensor::F32({2}, {1, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto out = run->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].ToString(), atl::Tensor::F32({2}, {2, 3}).ToString());
  EXPECT_EQ((*out)[1].ToString(), atl::Tensor::F32({2}, {2, 4}).ToString());
}

TEST_F(PublicApiTest, ReportsTracingErrors) {
  atl::FunctionBuilder f("bad");
  f.Output(f.Add(f.Input(atl::DType::kF32, {2}), f.Input(atl::DType::kF32, {3})));
  EXPECT_FALSE(f.status().ok());
  EXPECT_EQ(f.status().code(), atl::Code::kInvalidArgument);
}

// Grad is part of what libatoll.so exports.
TEST_F(PublicApiTest, DifferentiatesAFunction) {
  atl::FunctionBuilder f("square");
  const atl::Value x = f.Input(atl::DType::kF32, {3}, atl::Sharding::Replicated());
  f.Output(f.ReduceSum(f.Mul(x, x), 0));
  EXPECT_TRUE(atl::Grad(f).ok());
  EXPECT_EQ(atl::Grad(f, {1}).status().code(), atl::Code::kInvalidArgument);
}

}  // namespace
