// Every collective on a real cluster, against its definition: over a 1-D slice of the 4
// devices of island0's two hosts (every group spans both hosts) and over the same devices as
// a 2x2 mesh, along each axis (the slice's devices interleave the hosts, so one axis's groups
// span them and the other's do not). Each device's block is made on the device from a cut
// input, so that the blocks differ; the client assembles each result from its shards by its
// declared sharding, so a block in the wrong place shows. Sizes that do not divide over an
// axis are refused when the function is registered.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kWidth = 8;  // every device's block of x is a row of 8 small whole numbers

// x's values: small whole numbers, so that sums in any order are exact, and max and min differ
// from sums.
Tensor Numbers(Shape shape) {
  Tensor t(DType::kF32, shape);
  auto v = t.as<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + 3) % 11) - 5;
  return t;
}

Tensor Make(Shape shape, const std::function<float(int64_t)>& value) {
  Tensor t(DType::kF32, shape);
  auto v = t.as<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(static_cast<int64_t>(i));
  return t;
}

// The reductions a test checks, by name, over `values` (one per member, in member order).
const std::vector<std::pair<std::string, std::function<float(const std::vector<float>&)>>>&
Reductions() {
  static const std::vector<std::pair<std::string, std::function<float(const std::vector<float>&)>>>
      reductions = {
          {"sum",
           [](const std::vector<float>& v) {
             float s = 0;
             for (float x : v) s += x;
             return s;
           }},
          {"max",
           [](const std::vector<float>& v) { return *std::max_element(v.begin(), v.end()); }},
          {"min",
           [](const std::vector<float>& v) { return *std::min_element(v.begin(), v.end()); }},
          {"mean",
           [](const std::vector<float>& v) {
             float s = 0;
             for (float x : v) s += x;
             return s / static_cast<float>(v.size());
           }},
      };
  return reductions;
}

// Adds the four all-reduces of `partial` along `axis` to `b`'s outputs, in Reductions' order.
void OutputAllReduces(FunctionBuilder& b, Value partial, int axis) {
  b.Output(b.AllReduceSum(partial, axis));
  b.Output(b.AllReduceMax(partial, axis));
  b.Output(b.AllReduceMin(partial, axis));
  b.Output(b.AllReduceMean(partial, axis));
}

class CollectiveKindsTest : public ClusterTest {
 protected:
  // Registers `b` on `slice`, runs it on `x` and returns its outputs.
  std::vector<Tensor> RunOn(Client& client, const Slice& slice, const FunctionBuilder& b,
                            const Tensor& x) {
    auto fn = client.Register(b, slice);
    EXPECT_THAT(fn, IsOk());
    if (!fn.ok()) return {};
    ProgramBuilder p;
    p.Return(p.Call(*fn, {p.Arg(DType::kF32, x.shape())}));
    auto program = p.Build();
    EXPECT_THAT(program, IsOk());
    if (!program.ok()) return {};
    auto run = client.Submit(*program, {x});
    EXPECT_THAT(run, IsOk());
    if (!run.ok()) return {};
    auto out = run->Wait(60s);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? std::move(out).value() : std::vector<Tensor>{};
  }
};

TEST_F(CollectiveKindsTest, EveryCollectiveEqualsItsDefinitionOnAOneDimensionalSlice) {
  auto client = Connect("collectives-1d");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());

  // x [4, 8] one row per device; its rows summed over the cut dimension give each device its
  // own row as a partial [8].
  FunctionBuilder b("kinds_1d");
  const Value x = b.Input(DType::kF32, {4, kWidth}, Sharding::Split(0));
  const Value own_row = b.ReduceSum(x, 0);
  OutputAllReduces(b, own_row, 0);
  b.Output(b.AllReduceSum(own_row));  // over the whole slice: the same as along axis 0
  b.Output(b.ReduceScatter(own_row, 0, 0));
  b.Output(b.AllGather(x, 0));
  b.Output(b.AllToAll(x, 0, 1));
  b.Output(b.Broadcast(own_row, 0, 2));
  b.Output(b.CollectivePermute(x, 0, {{0, 1}, {1, 2}, {2, 3}}));
  const Tensor in = Numbers({4, kWidth});
  const std::vector<Tensor> out = RunOn(*client, *slice, b, in);
  ASSERT_EQ(out.size(), 10u);

  auto column = [&](int64_t c) {
    std::vector<float> v;
    for (int64_t r = 0; r < 4; ++r) v.push_back(in.as<float>()[r * kWidth + c]);
    return v;
  };
  for (size_t k = 0; k < Reductions().size(); ++k) {
    const auto& [name, reduce] = Reductions()[k];
    EXPECT_EQ(out[k], Make({kWidth}, [&](int64_t c) { return reduce(column(c)); })) << name;
  }
  const Tensor sums = Make({kWidth}, [&](int64_t c) { return Reductions()[0].second(column(c)); });
  EXPECT_EQ(out[4], sums) << "whole-slice sum";
  EXPECT_EQ(out[5], sums) << "reduce_scatter: each device its quarter of the sum";
  EXPECT_EQ(out[6], in) << "all_gather";
  EXPECT_EQ(out[7], in) << "all_to_all: the same value, cut on the other dimension";
  EXPECT_EQ(out[8], Make({kWidth}, [&](int64_t c) { return in.as<float>()[2 * kWidth + c]; }))
      << "broadcast from device 2";
  EXPECT_EQ(out[9], Make({4, kWidth},
                         [&](int64_t i) { return i < kWidth ? 0 : in.as<float>()[i - kWidth]; }))
      << "collective_permute: every row one device on, the first zeros";
}

TEST_F(CollectiveKindsTest, EveryCollectiveEqualsItsDefinitionAlongEachAxisOfATwoByTwoMesh) {
  auto client = Connect("collectives-2d");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateMeshSlice({2, 2}, "island0");
  ASSERT_THAT(slice, IsOk());
  const Tensor in = Numbers({2, 2, kWidth});
  // x[i, j, c]: device (i, j) holds x[i, j, :].
  auto at = [&](int64_t i, int64_t j, int64_t c) {
    return in.as<float>()[(i * 2 + j) * kWidth + c];
  };
  for (int axis : {0, 1}) {
    SCOPED_TRACE(fmt::format("along axis {}", axis));
    FunctionBuilder b(fmt::format("kinds_axis{}", axis));
    const Value x = b.Input(DType::kF32, {2, 2, kWidth}, Sharding::Axes({0, 1}));
    // Summing over the dimension cut along `axis` leaves each device its own row as a partial
    // along `axis`, [2, 8] cut along the other axis.
    const Value own_row = b.ReduceSum(x, axis);
    OutputAllReduces(b, own_row, axis);
    b.Output(b.ReduceScatter(own_row, axis, 1));
    b.Output(b.AllGather(x, axis));
    b.Output(b.AllToAll(x, axis, 2));
    b.Output(b.Broadcast(own_row, axis, 1));
    b.Output(b.CollectivePermute(x, axis, {{0, 1}}));
    const std::vector<Tensor> out = RunOn(*client, *slice, b, in);
    ASSERT_EQ(out.size(), 9u);

    // Element (k, c) of a result over `axis`: k is the other axis' coordinate.
    auto members = [&](int64_t k, int64_t c) {
      return std::vector<float>{axis == 0 ? at(0, k, c) : at(k, 0, c),
                                axis == 0 ? at(1, k, c) : at(k, 1, c)};
    };
    for (size_t r = 0; r < Reductions().size(); ++r) {
      const auto& [name, reduce] = Reductions()[r];
      EXPECT_EQ(out[r], Make({2, kWidth},
                             [&](int64_t i) { return reduce(members(i / kWidth, i % kWidth)); }))
          << name;
    }
    EXPECT_EQ(out[4], out[0]) << "reduce_scatter: the sum, each device its half";
    EXPECT_EQ(out[5], in) << "all_gather";
    EXPECT_EQ(out[6], in) << "all_to_all";
    EXPECT_EQ(out[7],
              Make({2, kWidth}, [&](int64_t i) { return members(i / kWidth, i % kWidth)[1]; }))
        << "broadcast from coordinate 1";
    EXPECT_EQ(out[8],
              Make({2, 2, kWidth},
                   [&](int64_t i) {
                     const int64_t c = i % kWidth, j = (i / kWidth) % 2, k = i / (2 * kWidth);
                     const int64_t along = axis == 0 ? k : j;  // the coordinate along `axis`
                     if (along == 0) return 0.0f;              // no pair targets coordinate 0
                     return axis == 0 ? at(0, j, c) : at(k, 0, c);
                   }))
        << "collective_permute: coordinate 0's block to 1, zeros at 0";
  }
}

TEST_F(CollectiveKindsTest, SizesThatDoNotDivideOverTheAxisAreRefusedAtRegistration) {
  auto client = Connect("collectives-uneven");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  struct Case {
    std::string what;
    std::function<void(FunctionBuilder&)> build;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"reduce_scatter of 6 over 4 devices",
       [](FunctionBuilder& b) {
         b.Output(b.ReduceScatter(b.Input(DType::kF32, {6}, Sharding::Replicated()), 0, 0));
       },
       "reduce_scatter result [6]: dimension 0 (6) does not divide over mesh axis 0 (4 devices)"},
      {"all_to_all onto 6 columns over 4 devices",
       [](FunctionBuilder& b) {
         b.Output(b.AllToAll(b.Input(DType::kF32, {4, 6}, Sharding::Split(0)), 0, 1));
       },
       "dimension 1 (6) does not divide over mesh axis 0 (4 devices)"},
      {"a broadcast from device 4 of 4",
       [](FunctionBuilder& b) {
         b.Output(b.Broadcast(b.Input(DType::kF32, {4}, Sharding::Replicated()), 0, 4));
       },
       "root 4 is not a coordinate of mesh axis 0 (4 devices)"},
      {"a sum along axis 1 of a 1-D slice",
       [](FunctionBuilder& b) {
         b.Output(b.AllReduceSum(b.Input(DType::kF32, {4}, Sharding::Replicated()), 1));
       },
       "runs along mesh axis 1, but the mesh [4] has 1 axes"},
  };
  for (const Case& c : cases) {
    FunctionBuilder b("uneven");
    c.build(b);
    ASSERT_THAT(b.status(), IsOk()) << c.what << ": " << b.status().ToString();
    auto fn = client->Register(b, *slice);
    ASSERT_FALSE(fn.ok()) << c.what;
    EXPECT_EQ(fn.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(fn.status().message().find(c.mentions), std::string::npos)
        << c.what << ": " << fn.status().ToString();
  }
}

}  // namespace
}  // namespace atl::testing
