// The elementwise-chain row of bench/kernels: 8 ops over `elements` floats,
//   y = (tanh(exp(-0.5 x^2) x + 1) x) - 0.25   (mul, mul, exp, mul, add, tanh, mul, sub)
// as a compiled function run by the interpreter (compute::RunFunction on the cpu backend,
// which fuses the chain), against one hand-fused loop (the same vector math, block by block)
// and against numpy's fastest equivalent (each ufunc in place into one preallocated buffer,
// timed by the venv's Python in the same run). elements/s; derived: atoll over each.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "compute/interpreter.h"
#include "kernels/vector_math.h"

namespace atl::bench {

namespace {

ir::FunctionDef Chain(int64_t elements) {
  const ir::TensorType t{DType::kF32, {elements}, {-1}};
  ir::FunctionDef fn{"chain", {t}, {}, {}, {}, {}};
  const ir::Operand x{ir::Operand::kInput, 0, 0.0};
  auto op = [&](int32_t i) { return ir::Operand{ir::Operand::kOp, i, 0.0}; };
  auto scalar = [](double v) { return ir::Operand{ir::Operand::kScalar, 0, v}; };
  using ir::OpCode;
  fn.ops = {{OpCode::kMul, {x, x}, 0, t},
            {OpCode::kMul, {op(0), scalar(-0.5)}, 0, t},
            {OpCode::kExp, {op(1)}, 0, t},
            {OpCode::kMul, {op(2), x}, 0, t},
            {OpCode::kAdd, {op(3), scalar(1)}, 0, t},
            {OpCode::kTanh, {op(4)}, 0, t},
            {OpCode::kMul, {op(5), x}, 0, t},
            {OpCode::kSub, {op(6), scalar(0.25)}, 0, t}};
  fn.outputs = {op(7)};
  return fn;
}

void HandFused(const float* x, float* y, int64_t n) {
  constexpr int64_t kBlock = 1024;
  float t[kBlock];
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t len = std::min(kBlock, n - base);
    const float* xb = x + base;
    for (int64_t j = 0; j < len; ++j) t[j] = xb[j] * xb[j] * -0.5f;
    kernels::ExpF32(t, t, len);
    for (int64_t j = 0; j < len; ++j) t[j] = t[j] * xb[j] + 1.0f;
    kernels::TanhF32(t, t, len);
    for (int64_t j = 0; j < len; ++j) y[base + j] = t[j] * xb[j] - 0.25f;
  }
}

// numpy's elements/s for the chain, timed by `python` (the median of `runs` samples), or a
// negative number when it cannot be run.
double NumpyRate(const std::string& python, int64_t elements, int runs) {
  const std::string script = fmt::format(
      "import numpy as np, timeit, statistics\n"
      "x = np.random.default_rng(0).uniform(-1, 1, {0}).astype(np.float32)\n"
      "t = np.empty_like(x)\n"
      "def chain():\n"
      "    np.multiply(x, x, out=t); np.multiply(t, -0.5, out=t); np.exp(t, out=t)\n"
      "    np.multiply(t, x, out=t); np.add(t, 1, out=t); np.tanh(t, out=t)\n"
      "    np.multiply(t, x, out=t); np.subtract(t, 0.25, out=t)\n"
      "n = max(1, int(0.05 / max(timeit.timeit(chain, number=1), 1e-9)))\n"
      "print(statistics.median({0} * n / timeit.timeit(chain, number=n) for _ in range({1})))\n",
      elements, runs);
  const std::string command = fmt::format("{} -c '{}' 2>/dev/null", python, script);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return -1;
  char line[128] = {};
  if (std::fgets(line, sizeof line, pipe.get()) == nullptr) return -1;
  return std::atof(line);
}

}  // namespace

Status BenchChain(int64_t elements, const std::string& python, const Sweep& sweep,
                  BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(elements));
  const Tensor x = Random(rng, {elements});
  const ir::FunctionDef fn = Chain(elements);
  auto owner = std::make_shared<Tensor>(x);
  const std::span<std::byte> bytes(reinterpret_cast<std::byte*>(owner->as<float>().data()),
                                   static_cast<size_t>(elements) * sizeof(float));
  std::vector<float> out(static_cast<size_t>(elements));
  std::vector<Series> series = {
      {"atoll_chain",
       [&]() -> Status {
         // The input as an executor hands it over: its bytes borrowed, not copied.
         std::vector<Tensor> in;
         ATOLL_ASSIGN_OR_RETURN(in.emplace_back(),
                                Tensor::Adopt(DType::kF32, {elements}, bytes, owner));
         ATOLL_ASSIGN_OR_RETURN(auto y, compute::RunFunction(fn, 0, 1, std::move(in)));
         Sink(y[0].as<float>()[elements - 1]);
         return Status::Ok();
       }},
      {"hand_fused_loop",
       [&]() -> Status {
         HandFused(x.as<float>().data(), out.data(), elements);
         Sink(out[elements - 1]);
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, static_cast<double>(elements), 1, sweep));
  for (Series& s : series) {
    fmt::print("chain of 8 elements={:>8} {:>15}: {:10.3e} elements/s (median of {})\n", elements,
               s.name, Median(s.samples), s.samples.size());
    result.Add(s.name, {{"elements", elements}}, "chain_elements_per_s", "elements/s", s.samples);
  }
  const double atoll = Median(series[0].samples);
  result.Derive(fmt::format("chain_over_hand_fused_elements_{}", elements),
                atoll / Median(series[1].samples));
  const double numpy = python.empty() ? -1 : NumpyRate(python, elements, sweep.runs);
  if (numpy > 0) {
    fmt::print("chain of 8 elements={:>8} {:>15}: {:10.3e} elements/s\n", elements, "numpy", numpy);
    result.Add("numpy_chain", {{"elements", elements}}, "chain_elements_per_s", "elements/s",
               {numpy});
    result.Derive(fmt::format("chain_over_numpy_elements_{}", elements), atoll / numpy);
  } else {
    fmt::print("chain of 8: numpy not measured (no Python with numpy at '{}')\n", python);
  }
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace atl::bench
