#include "tests/e2e/tenant_load.h"

#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "atoll/client.h"

namespace atl::testing {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCalls = 3;
constexpr size_t kMaxErrors = 5;

struct Tally {
  std::mutex mu;
  TenantLoadResult result;
  void Fail(int runs, const Status& why) {
    std::lock_guard lock(mu);
    result.failed += runs;
    if (result.errors.size() < kMaxErrors) result.errors.push_back(why.ToString());
  }
};

float Expected(float x) {
  for (int i = 0; i < kCalls; ++i) x = x * 2 + 1;
  return x;
}

// One tenant, start to end; its outcomes go to `tally`.
void RunTenant(const TenantLoadOptions& options, int index, Tally& tally) {
  auto client = Client::Connect({.rm_endpoint = options.rm_endpoint,
                                 .name = fmt::format("tenant-{}", index),
                                 .request_timeout = options.timeout,
                                 .keys_dir = options.keys_dir});
  if (!client.ok()) return tally.Fail(options.runs, client.status().WithContext("connect"));
  auto slice = (*client)->CreateSlice(1);
  if (!slice.ok()) return tally.Fail(options.runs, slice.status().WithContext("slice"));
  FunctionBuilder b("step");
  b.Output(b.Add(b.Mul(b.Input(DType::kF32, {2}), 2.0), 1.0));
  auto step = (*client)->Register(b, *slice);
  if (!step.ok()) return tally.Fail(options.runs, step.status().WithContext("register"));
  ProgramBuilder p;
  Traced t = p.Arg(DType::kF32, {2});
  for (int i = 0; i < kCalls; ++i) t = p.Call(*step, {t})[0];
  p.Return({t});
  auto program = p.Build();
  if (!program.ok()) return tally.Fail(options.runs, program.status());
  {
    std::lock_guard lock(tally.mu);
    tally.result.connected++;
  }
  // Run r computes on {index, r}: a result crossed with another run's or tenant's is wrong.
  std::deque<std::pair<int, Run>> pending;
  auto finish_oldest = [&] {
    auto [r, run] = std::move(pending.front());
    pending.pop_front();
    auto out = run.Wait(options.timeout);
    if (!out.ok()) return tally.Fail(1, out.status().WithContext(fmt::format("run {}", r)));
    const Tensor want =
        Tensor::F32({2}, {Expected(static_cast<float>(index)), Expected(static_cast<float>(r))});
    std::lock_guard lock(tally.mu);
    (out->at(0) == want ? tally.result.ok : tally.result.wrong)++;
  };
  for (int r = 0; r < options.runs; ++r) {
    if (static_cast<int>(pending.size()) >= options.in_flight) finish_oldest();
    auto run = (*client)->Submit(*program, {Tensor::F32({2}, {float(index), float(r)})});
    if (!run.ok()) {
      tally.Fail(1, run.status().WithContext(fmt::format("submit {}", r)));
      continue;
    }
    pending.emplace_back(r, std::move(*run));
  }
  while (!pending.empty()) finish_oldest();
}

}  // namespace

TenantLoadResult RunTenants(const TenantLoadOptions& options) {
  Tally tally;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(options.clients);
  for (int i = 0; i < options.clients; ++i) {
    threads.emplace_back([&, i] { RunTenant(options, i, tally); });
  }
  for (auto& t : threads) t.join();
  tally.result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return tally.result;
}

std::string FormatTenantResult(const TenantLoadResult& r) {
  return fmt::format("connected {} ok {} failed {} wrong {} seconds {:.3f}", r.connected, r.ok,
                     r.failed, r.wrong, r.seconds);
}

bool ParseTenantResult(const std::string& line, TenantLoadResult* r) {
  return std::sscanf(line.c_str(), "connected %d ok %d failed %d wrong %d seconds %lf",
                     &r->connected, &r->ok, &r->failed, &r->wrong, &r->seconds) == 5;
}

}  // namespace atl::testing
