// The dtypes on a real cluster: an f64 and a bf16 function over a 4-device slice across two
// hosts, their inputs split by rows (through the object store and inline), a matmul on each
// shard and an all-reduce of the weight gradient across the hosts; and i64 sums past 2^53.
#include <cmath>
#include <random>

#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;

// y = x w (rows of x split over the slice) and g = all_reduce(x^T y) (each device's partial
// sum over its rows), all in `dtype`.
Result<Function> RegisterForwardAndGram(Client& client, const Slice& slice, DType dtype,
                                        int64_t rows, int64_t k, int64_t n) {
  FunctionBuilder b("forward_and_gram");
  Value x = b.Input(dtype, {rows, k}, Sharding::Split(0));
  Value w = b.Input(dtype, {k, n}, Sharding::Replicated());
  Value y = b.Matmul(x, w);
  b.Output(y);
  b.Output(b.AllReduceSum(b.Matmul(x, y, /*transpose_a=*/true, /*transpose_b=*/false)));
  return client.Register(b, slice);
}

Result<std::vector<Tensor>> RunForwardAndGram(Client& client, const Function& fn, DType dtype,
                                              const Tensor& x, const Tensor& w) {
  ProgramBuilder p;
  std::vector<Traced> out = p.Call(fn, {p.Arg(dtype, x.shape()), p.Arg(dtype, w.shape())});
  p.Return(out);
  ATOLL_ASSIGN_OR_RETURN(Program program, p.Build());
  ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, {x, w}));
  return run.Wait(60s);
}

// The references, in double: y = x w, g = x^T y, and g_abs = |x|^T |y|, the scale of g's
// rounding errors.
struct Reference {
  std::vector<double> y, g, g_abs;
};
Reference Compute(const std::vector<double>& x, const std::vector<double>& w, int64_t rows,
                  int64_t k, int64_t n) {
  Reference r{std::vector<double>(rows * n, 0.0), std::vector<double>(k * n, 0.0),
              std::vector<double>(k * n, 0.0)};
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) r.y[i * n + j] += x[i * k + p] * w[p * n + j];
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < rows; ++i) {
        r.g[p * n + j] += x[i * k + p] * r.y[i * n + j];
        r.g_abs[p * n + j] += std::abs(x[i * k + p] * r.y[i * n + j]);
      }
    }
  }
  return r;
}

std::vector<double> RandomValues(std::mt19937& rng, size_t count) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(count);
  for (double& e : v) e = dist(rng);
  return v;
}

class DTypesTest : public ClusterTest {};

// 1024 x 16 f64 is 128 KiB: each device's 32 KiB block of x is put in the object store.
TEST_F(DTypesTest, AnF64FunctionComputesInDoubleAcrossHosts) {
  auto client = Connect("f64");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");  // 2 hosts x 2 devices
  ASSERT_THAT(slice, IsOk());
  const int64_t rows = 1024, k = 16, n = 3;
  auto fn = RegisterForwardAndGram(*client, *slice, DType::kF64, rows, k, n);
  ASSERT_THAT(fn, IsOk());
  std::mt19937 rng(64);
  const std::vector<double> xv = RandomValues(rng, rows * k), wv = RandomValues(rng, k * n);
  auto out = RunForwardAndGram(*client, *fn, DType::kF64, Tensor::F64({rows, k}, xv),
                               Tensor::F64({k, n}, wv));
  ASSERT_THAT(out, IsOk());
  const Reference ref = Compute(xv, wv, rows, k, n);
  ASSERT_EQ(out->at(0).dtype(), DType::kF64);
  ASSERT_EQ(out->at(1).dtype(), DType::kF64);
  const std::vector<double> y = out->at(0).ToDoubles(), g = out->at(1).ToDoubles();
  // Double precision: far below what f32 (about 1e-7 relative) could reach.
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref.y[i], 1e-13) << "y " << i;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], ref.g[i], 1e-12 * (1 + std::abs(ref.g[i]))) << "g " << i;
  }
}

// bf16 in and out: each device's products and sums in f32, its results rounded once; the
// all-reduce sums the devices' bf16 partials in f32 and rounds once, and its replicas agree
// bit for bit (the client checks that replicated results do).
TEST_F(DTypesTest, ABF16FunctionComputesInF32AndRoundsOnceAcrossHosts) {
  auto client = Connect("bf16");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  const int64_t rows = 64, k = 8, n = 4;
  auto fn = RegisterForwardAndGram(*client, *slice, DType::kBF16, rows, k, n);
  ASSERT_THAT(fn, IsOk());
  std::mt19937 rng(16);
  auto x = Tensor::FromDoubles(DType::kBF16, {rows, k}, RandomValues(rng, rows * k));
  auto w = Tensor::FromDoubles(DType::kBF16, {k, n}, RandomValues(rng, k * n));
  ASSERT_TRUE(x.ok() && w.ok());
  auto out = RunForwardAndGram(*client, *fn, DType::kBF16, *x, *w);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->at(0).dtype(), DType::kBF16);
  ASSERT_EQ(out->at(1).dtype(), DType::kBF16);
  // y: the exact product of the bf16 inputs (f32 holds each of its 8 terms' products and,
  // at these magnitudes, their sum to 2^-20), rounded once: within half a bf16 ulp.
  const Reference ref = Compute(x->ToDoubles(), w->ToDoubles(), rows, k, n);
  const std::vector<double> y = out->at(0).ToDoubles();
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_LE(std::abs(y[i] - ref.y[i]), 0x1p-8 * std::abs(ref.y[i]) + 1e-5) << "y " << i;
  }
  // g sums 4 devices' rounded partials (x^T of their rows times their rounded y): three
  // roundings of half a bf16 ulp each, at most, on the scale of |x|^T |y|.
  const std::vector<double> g = out->at(1).ToDoubles();
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::abs(g[i] - ref.g[i]), 3 * 0x1p-9 * ref.g_abs[i] + 1e-5) << "g " << i;
  }
}

TEST_F(DTypesTest, I64SumsAcrossHostsStayExactPast2To53) {
  auto client = Connect("i64");
  ASSERT_NE(client, nullptr);
  auto slice = client->CreateSlice(4, "island0");
  ASSERT_THAT(slice, IsOk());
  FunctionBuilder b("sum");
  Value x = b.Input(DType::kI64, {2}, Sharding::Replicated());
  b.Output(b.AllReduceSum(b.Add(x, 1.0)));
  auto fn = client->Register(b, *slice);
  ASSERT_THAT(fn, IsOk());
  ProgramBuilder p;
  p.Return(p.Call(*fn, {p.Arg(DType::kI64, {2})}));
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  const int64_t big = (int64_t{1} << 60) + 3;
  auto run = client->Submit(*program, {Tensor::I64({2}, {big, -7})});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  // 4 (2^60 + 4) wraps nothing and is exact, which a double (53 bits) is not.
  EXPECT_EQ(out->at(0), Tensor::I64({2}, {4 * (big + 1), -24}));
}

}  // namespace
}  // namespace atl::testing
