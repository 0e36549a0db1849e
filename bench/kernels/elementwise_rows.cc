// The elementwise rows of bench/kernels: a fused expression against one hand-written loop,
// and each op of exp, tanh and log (vectorized, kernels/vector_math.h) against the scalar
// libm loop it was.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "kernels/elementwise.h"
#include "kernels/nn.h"

namespace atl::bench {

namespace {

// relu(a * b + c) * 0.5, written out by hand.
void DirectLoop(const float* a, const float* b, const float* c, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i] * b[i] + c[i];
    // max(v * 0.5, 0) is relu(v) * 0.5 exactly; written this way GCC does not fold the
    // multiply into a branch, so the loop vectorizes.
    out[i] = std::max(v * 0.5f, 0.0f);
  }
}

// Softmax over rows of this many elements.
constexpr int64_t kSoftmaxWidth = 1024;

// The kernels as they were before kernels/vector_math.h: a new output tensor, then one
// scalar libm call per element. Softmax's rows are kSoftmaxWidth wide.
Tensor LibmLoop(std::string_view op, const Tensor& x) {
  Tensor out(DType::kF32, x.shape());
  const float* in = x.as<float>().data();
  float* y = out.as<float>().data();
  const int64_t n = x.num_elements();
  if (op == "exp") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::exp(in[i]);
  } else if (op == "tanh") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(in[i]);
  } else if (op == "log") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::log(in[i]);
  } else if (op == "gelu") {
    for (int64_t i = 0; i < n; ++i) {
      const float v = in[i];
      y[i] = 0.5f * v *
             (1.0f + std::tanh(kernels::kGeluC<float> * (v + kernels::kGeluA<float> * v * v * v)));
    }
  } else {  // softmax
    for (int64_t r = 0; r < n / kSoftmaxWidth; ++r) {
      const float* row = in + r * kSoftmaxWidth;
      float* yr = y + r * kSoftmaxWidth;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < kSoftmaxWidth; ++j) max = row[j] > max ? row[j] : max;
      double sum = 0;
      for (int64_t j = 0; j < kSoftmaxWidth; ++j) {
        yr[j] = std::exp(row[j] - max);
        sum += yr[j];
      }
      const auto inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < kSoftmaxWidth; ++j) yr[j] *= inv;
    }
  }
  return out;
}

// The kernel the runtime calls for `op`.
Result<Tensor> Kernel(std::string_view op, const Tensor& x) {
  if (op == "exp") return kernels::Unary(kernels::UnaryFn::kExp, x);
  if (op == "tanh") return kernels::Unary(kernels::UnaryFn::kTanh, x);
  if (op == "log") return kernels::Unary(kernels::UnaryFn::kLog, x);
  if (op == "gelu") return kernels::Unary(kernels::UnaryFn::kGelu, x);
  return kernels::Softmax(x);
}

}  // namespace

Status BenchFused(int64_t elements, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(elements));
  std::vector<Tensor> inputs = {Random(rng, {elements}), Random(rng, {elements}),
                                Random(rng, {elements})};
  kernels::FusedExpr expr;
  const kernels::FusedValue lin =
      expr.Apply(kernels::BinaryFn::kAdd,
                 expr.Apply(kernels::BinaryFn::kMul, expr.Input(0), expr.Input(1)), expr.Input(2));
  expr.Apply(kernels::BinaryFn::kMul, expr.Apply(kernels::UnaryFn::kRelu, lin),
             expr.Constant(0.5f));
  std::vector<float> out(static_cast<size_t>(elements));
  std::vector<Series> series = {
      {"atoll_fused",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor y, kernels::EvalFused(expr, inputs));
         Sink(y.as<float>()[elements - 1]);
         return Status::Ok();
       }},
      {"direct_loop",
       [&]() -> Status {
         DirectLoop(inputs[0].as<float>().data(), inputs[1].as<float>().data(),
                    inputs[2].as<float>().data(), out.data(), elements);
         Sink(out[elements - 1]);
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 4.0 * static_cast<double>(elements), 1e9, sweep));
  for (Series& s : series) {
    fmt::print("fused elements={:>8} {:>11}: {:8.2f} GFLOP/s (median of {})\n", elements, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"elements", elements}}, "fused_gflops", "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("fused_ratio_elements_{}", elements),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

Status BenchTranscendental(int64_t elements, const Sweep& sweep, BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(elements));
  // Where the ops are used: activations and logits around 0; log of positive values.
  const Tensor x = Random(rng, {elements / kSoftmaxWidth, kSoftmaxWidth}, -8.0f, 8.0f);
  const Tensor positive = Random(rng, {elements / kSoftmaxWidth, kSoftmaxWidth}, 1e-3f, 100.0f);
  for (const char* op : {"exp", "tanh", "log", "gelu", "softmax"}) {
    const Tensor& in = std::string_view(op) == "log" ? positive : x;
    std::vector<Series> series = {
        {"atoll",
         [&]() -> Status {
           ATOLL_ASSIGN_OR_RETURN(Tensor y, Kernel(op, in));
           Sink(y.as<float>()[elements - 1]);
           return Status::Ok();
         }},
        {"libm_loop",
         [&]() -> Status {
           Sink(LibmLoop(op, in).as<float>()[elements - 1]);
           return Status::Ok();
         }},
    };
    ATOLL_RETURN_IF_ERROR(Measure(series, static_cast<double>(elements), 1, sweep));
    for (Series& s : series) {
      fmt::print("{:>7} elements={:>8} {:>9}: {:8.3g} elements/s (median of {})\n", op, elements,
                 s.name, Median(s.samples), s.samples.size());
      result.Add(s.name, {{"op", op}, {"elements", elements}}, "op_elements_per_s", "1/s",
                 s.samples);
    }
    result.Derive(fmt::format("{}_ratio_elements_{}", op, elements),
                  Median(series[0].samples) / Median(series[1].samples));
    std::fflush(stdout);
  }
  return Status::Ok();
}

}  // namespace atl::bench
