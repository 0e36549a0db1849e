// The jax.lax primitives' rows of bench/kernels: dot_general batched over heads against
// OpenBLAS's sgemm called once per batch directly, and conv_general_dilated (NCHW, 3x3, SAME)
// against oneDNN's convolution called directly (primitive made once, as a framework would).
#include <cblas.h>

#include <dnnl.hpp>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "bench/kernels/rows.h"
#include "kernels/lax.h"

namespace atl::bench {

Status BenchDotGeneral(int64_t batch, int64_t m, int64_t k, int64_t n, const Sweep& sweep,
                       BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(batch * m + k * n));
  const Tensor a = Random(rng, {batch, m, k});
  const Tensor b = Random(rng, {batch, k, n});
  std::vector<float> c(static_cast<size_t>(batch * m * n));
  const kernels::DotDims dims{{2}, {1}, {0}, {0}};
  std::vector<Series> series = {
      {"atoll_dot_general",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor out, kernels::DotGeneral(a, b, dims, DType::kF32));
         Sink(out.as<float>()[0]);
         return Status::Ok();
       }},
      {"openblas_sgemm_per_batch",
       [&]() -> Status {
         for (int64_t p = 0; p < batch; ++p) {
           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
                       static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
                       a.as<float>().data() + p * m * k, static_cast<blasint>(k),
                       b.as<float>().data() + p * k * n, static_cast<blasint>(n), 0.0f,
                       c.data() + p * m * n, static_cast<blasint>(n));
         }
         Sink(c[0]);
         return Status::Ok();
       }},
  };
  ATOLL_RETURN_IF_ERROR(Measure(series, 2.0 * batch * m * k * n, 1e9, sweep));
  const std::string shape = fmt::format("{}x{}x{}x{}", batch, m, k, n);
  for (Series& s : series) {
    fmt::print("dot_general {} {:>24}: {:8.2f} GFLOP/s (median of {})\n", shape, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"batch", batch}, {"m", m}, {"k", k}, {"n", n}}, "dot_general_gflops",
               "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("dot_general_ratio_{}", shape),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

Status BenchConv2d(int64_t batch, int64_t channels, int64_t size, const Sweep& sweep,
                   BenchResult& result) {
  std::mt19937 rng(static_cast<unsigned>(batch * channels + size));
  const Tensor x = Random(rng, {batch, channels, size, size});
  const Tensor w = Random(rng, {channels, channels, 3, 3});
  kernels::ConvDims dims;
  dims.strides = {1, 1};
  dims.low = {1, 1};
  dims.high = {1, 1};
  dims.lhs_dilation = {1, 1};
  dims.rhs_dilation = {1, 1};
  dims.lhs_spec = dims.rhs_spec = dims.out_spec = {0, 1, 2, 3};

  // The baseline: oneDNN's own forward convolution, chosen layouts and reorders included.
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::dims src_dims = {batch, channels, size, size};
  const memory::dims w_dims = {channels, channels, 3, 3};
  const memory::desc any_src(src_dims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc any_w(w_dims, memory::data_type::f32, memory::format_tag::any);
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, any_src, any_w, any_src,
                                      {1, 1}, {0, 0}, {1, 1}, {1, 1}),
      engine);
  const dnnl::convolution_forward conv(pd);
  std::vector<float> out(static_cast<size_t>(batch * channels * size * size));
  const memory user_src({src_dims, memory::data_type::f32, memory::format_tag::nchw}, engine,
                        const_cast<std::byte*>(x.data()));
  const memory user_w({w_dims, memory::data_type::f32, memory::format_tag::oihw}, engine,
                      const_cast<std::byte*>(w.data()));
  const memory user_dst({src_dims, memory::data_type::f32, memory::format_tag::nchw}, engine,
                        out.data());
  memory src(pd.src_desc(), engine), weights(pd.weights_desc(), engine), dst(pd.dst_desc(), engine);
  std::vector<Series> series = {
      {"atoll_conv_general_dilated",
       [&]() -> Status {
         ATOLL_ASSIGN_OR_RETURN(Tensor y, kernels::ConvGeneralDilated(x, w, dims, DType::kF32));
         Sink(y.as<float>()[0]);
         return Status::Ok();
       }},
      {"onednn_convolution",
       [&]() -> Status {
         dnnl::reorder(user_src, src).execute(stream, const_cast<memory&>(user_src), src);
         dnnl::reorder(user_w, weights).execute(stream, const_cast<memory&>(user_w), weights);
         conv.execute(stream,
                      {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
         dnnl::reorder(dst, user_dst).execute(stream, dst, const_cast<memory&>(user_dst));
         stream.wait();
         Sink(out[0]);
         return Status::Ok();
       }},
  };
  const double flops = 2.0 * batch * channels * channels * 9 * size * size;
  ATOLL_RETURN_IF_ERROR(Measure(series, flops, 1e9, sweep));
  const std::string shape = fmt::format("{}x{}x{}x{}", batch, channels, size, size);
  for (Series& s : series) {
    fmt::print("conv2d {} 3x3 {:>28}: {:8.2f} GFLOP/s (median of {})\n", shape, s.name,
               Median(s.samples), s.samples.size());
    result.Add(s.name, {{"batch", batch}, {"channels", channels}, {"size", size}}, "conv2d_gflops",
               "GFLOP/s", s.samples);
  }
  result.Derive(fmt::format("conv2d_ratio_{}", shape),
                Median(series[0].samples) / Median(series[1].samples));
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace atl::bench
