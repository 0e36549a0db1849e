// conv_general_dilated's fast path: oneDNN's convolution (Debian's libdnnl), for f32 with 1
// to 3 spatial dimensions, no lhs dilation, non-negative padding and no batch groups; the
// direct loop of lax_window.cc takes the rest. Any dimension numbers: the tensors are
// described to oneDNN by their strides, so no transpose is made here, and oneDNN reorders
// into the layouts its kernel wants. Primitives, reorders included, are cached per
// configuration, as a framework calling oneDNN would, and so are the reordered weights of
// tensors whose bytes never change (WeightCache). Each call runs with a scratchpad of its
// own: the devices of an executor run the same cached primitive at once, and with the
// library's scratchpad (global in Debian's build, which leaves concurrent execution off) two
// of them wrote over each other's padded input and crashed the executor.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <omp.h>
#include <dnnl.hpp>

#include "kernels/lax.h"
#include "kernels/matmul_threads.h"
#include "kernels/nd_index.h"

namespace atl::kernels {

namespace {

using dnnl::memory;

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A reorder from layout `from` to `to`; empty when they are the same.
std::optional<dnnl::reorder> ReorderOf(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), from, CpuEngine(), to));
}

// A convolution as oneDNN runs it: the primitive, the user-side layouts and the reorders
// between them (making a reorder primitive at every call cost as much as a small reorder).
struct Planned {
  dnnl::convolution_forward conv;
  memory::desc src, weights, dst;                 // the tensors as atoll lays them out
  memory::desc conv_src, conv_weights, conv_dst;  // as the primitive wants them
  std::optional<dnnl::reorder> to_conv_src, to_conv_weights, to_dst;
  // Buffers in the primitive's layouts, reused by one call at a time (a call that finds
  // them taken allocates its own): allocating and first touching megabytes per call cost
  // about a third of the time.
  std::mutex scratch_mu;
  std::optional<memory> scratch_src, scratch_weights, scratch_dst, scratch_pad;
  memory::desc scratchpad;  // the primitive's own working memory (user-managed)
};

using PlanKey = std::tuple<memory::dims, memory::dims, memory::dims, memory::dims, memory::dims,
                           memory::dims, memory::dims, memory::dims, memory::dims, memory::dims>;

std::shared_ptr<Planned> Plan(const PlanKey& key) {
  static std::mutex mu;
  static std::map<PlanKey, std::shared_ptr<Planned>> plans;
  std::lock_guard lock(mu);
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  const auto& [src_dims, src_strides, w_dims, w_strides, dst_dims, dst_strides, strides, dilates,
               low, high] = key;
  auto plan = std::make_shared<Planned>();
  plan->src = memory::desc(src_dims, memory::data_type::f32, src_strides);
  plan->weights = memory::desc(w_dims, memory::data_type::f32, w_strides);
  plan->dst = memory::desc(dst_dims, memory::data_type::f32, dst_strides);
  const memory::desc any_src(src_dims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc any_w(w_dims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc any_dst(dst_dims, memory::data_type::f32, memory::format_tag::any);
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, any_src, any_w,
                                             any_dst, strides, dilates, low, high);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, CpuEngine());
  plan->conv = dnnl::convolution_forward(pd);
  plan->conv_src = pd.src_desc();
  plan->conv_weights = pd.weights_desc();
  plan->conv_dst = pd.dst_desc();
  plan->scratchpad = pd.scratchpad_desc();
  plan->to_conv_src = ReorderOf(plan->src, plan->conv_src);
  plan->to_conv_weights = ReorderOf(plan->weights, plan->conv_weights);
  plan->to_dst = ReorderOf(plan->conv_dst, plan->dst);
  if (plans.size() > 256) plans.clear();  // a bound on what odd shapes can pin
  plans.emplace(key, plan);
  return plan;
}

// A buffer of layout `want`: the plan's `kept` one when this call holds the plan's scratch.
memory Buffer(std::optional<memory>& kept, const memory::desc& want, bool reuse) {
  if (!reuse) return memory(want, CpuEngine());
  if (!kept) kept.emplace(want, CpuEngine());
  return *kept;
}

// `user` in the primitive's layout `want` (`reorder`, when they differ, into a buffer).
memory InLayout(dnnl::stream& stream, const memory& user, const memory::desc& want,
                const std::optional<dnnl::reorder>& reorder, std::optional<memory>& kept,
                bool reuse) {
  if (!reorder) return user;
  memory converted = Buffer(kept, want, reuse);
  reorder->execute(stream, const_cast<memory&>(user), converted);
  return converted;
}

// Convolution weights in a primitive's layout, kept across calls for weights whose bytes
// never change (Tensor::content_id): reordering resnet18's 46 MB of weights into oneDNN's
// blocked layouts at every inference was a large part of a batch of one. An entry is keyed
// by the id and by both layouts (the same bytes may be seen with other dimensions); an id is
// never given to other bytes, so no entry is ever stale, only unused: beyond the budget the
// least recently used go. Entries are oneDNN memory handles, which a call still reading one
// keeps alive when it is dropped.
class WeightCache {
 public:
  std::optional<memory> Find(const ContentId& id, const memory::desc& user,
                             const memory::desc& want) {
    std::lock_guard lock(mu_);
    auto [begin, end] = entries_.equal_range(id);
    for (auto it = begin; it != end; ++it) {
      if (it->second.user == user && it->second.want == want) {
        it->second.last_use = ++uses_;
        ++stats_.hits;
        return it->second.reordered;
      }
    }
    ++stats_.misses;
    return std::nullopt;
  }
  // `reordered` must be complete (its reorder waited for): other threads read it at once.
  void Keep(const ContentId& id, const memory::desc& user, const memory::desc& want,
            memory reordered) {
    std::lock_guard lock(mu_);
    const uint64_t bytes = want.get_size();
    if (bytes > budget_) return;
    auto [begin, end] = entries_.equal_range(id);
    for (auto it = begin; it != end; ++it) {
      if (it->second.user == user && it->second.want == want) return;  // another call's
    }
    Shrink(budget_ - bytes);
    entries_.emplace(id, Entry{user, want, std::move(reordered), ++uses_, bytes});
    stats_.bytes += bytes;
  }
  void SetBudget(uint64_t bytes) {
    std::lock_guard lock(mu_);
    budget_ = bytes;
    Shrink(budget_);
  }
  ConvWeightCacheStats Stats() {
    std::lock_guard lock(mu_);
    ConvWeightCacheStats stats = stats_;
    stats.entries = entries_.size();
    return stats;
  }

 private:
  struct Entry {
    memory::desc user, want;
    memory reordered;
    uint64_t last_use = 0;
    uint64_t bytes = 0;
  };
  // Drops the least recently used until at most `bytes` are kept (a scan: the entries are
  // a model's weights, tens to hundreds).
  void Shrink(uint64_t bytes) {
    while (stats_.bytes > bytes && !entries_.empty()) {
      auto oldest = std::min_element(entries_.begin(), entries_.end(), [](auto& a, auto& b) {
        return a.second.last_use < b.second.last_use;
      });
      stats_.bytes -= oldest->second.bytes;
      entries_.erase(oldest);
    }
  }

  std::mutex mu_;
  std::multimap<ContentId, Entry> entries_;
  uint64_t budget_ = uint64_t{256} << 20;
  uint64_t uses_ = 0;
  ConvWeightCacheStats stats_;
};

WeightCache& Weights() {
  static WeightCache* cache = new WeightCache();  // never destroyed: used to the last call
  return *cache;
}

// The weights in the primitive's layout: kept ones, or reordered now (and kept when their
// bytes never change).
memory WeightsInLayout(dnnl::stream& stream, const Tensor& rhs, const memory& user, Planned& plan,
                       bool reuse) {
  const ContentId& id = rhs.content_id();
  if (!plan.to_conv_weights || !id.known()) {
    return InLayout(stream, user, plan.conv_weights, plan.to_conv_weights, plan.scratch_weights,
                    reuse);
  }
  if (auto kept = Weights().Find(id, plan.weights, plan.conv_weights)) return *kept;
  memory reordered(plan.conv_weights, CpuEngine());
  plan.to_conv_weights->execute(stream, const_cast<memory&>(user), reordered);
  stream.wait();
  Weights().Keep(id, plan.weights, plan.conv_weights, reordered);
  return reordered;
}

}  // namespace

Result<std::optional<Tensor>> ConvWithOneDnn(const Tensor& lhs, const Tensor& rhs,
                                             const ConvDims& c, const Shape& out_shape) {
  const size_t n = c.strides.size();
  if (lhs.dtype() != DType::kF32 || rhs.dtype() != DType::kF32 || n < 1 || n > 3 ||
      c.batch_groups != 1) {
    return std::optional<Tensor>();
  }
  for (size_t i = 0; i < n; ++i) {
    if (c.lhs_dilation[i] != 1 || c.low[i] < 0 || c.high[i] < 0) return std::optional<Tensor>();
  }
  for (int64_t d : out_shape) {
    if (d == 0) return std::optional<Tensor>();
  }
  auto pick = [](const std::vector<int64_t>& values, const std::vector<int64_t>& spec) {
    memory::dims out;
    for (int64_t d : spec) out.push_back(values[static_cast<size_t>(d)]);
    return out;
  };
  const std::vector<int64_t> ls = internal::RowMajorStrides(lhs.shape()),
                             rs = internal::RowMajorStrides(rhs.shape()),
                             os = internal::RowMajorStrides(out_shape);
  PlanKey key;
  auto& [src_dims, src_strides, w_dims, w_strides, dst_dims, dst_strides, strides, dilates, low,
         high] = key;
  src_dims = pick(lhs.shape(), c.lhs_spec);
  src_strides = pick(ls, c.lhs_spec);
  dst_dims = pick(out_shape, c.out_spec);
  dst_strides = pick(os, c.out_spec);
  w_dims = pick(rhs.shape(), c.rhs_spec);
  w_strides = pick(rs, c.rhs_spec);
  if (c.feature_groups > 1) {  // oneDNN's grouped weights: [G, O/G, I, spatial...]
    const int64_t per_group = w_dims[0] / c.feature_groups;
    w_dims.insert(w_dims.begin(), c.feature_groups);
    w_dims[1] = per_group;
    w_strides.insert(w_strides.begin(), per_group * w_strides[0]);
  }
  for (size_t i = 0; i < n; ++i) {
    strides.push_back(c.strides[i]);
    dilates.push_back(c.rhs_dilation[i] - 1);
    low.push_back(c.low[i]);
    high.push_back(c.high[i]);
  }
  Tensor out(DType::kF32, out_shape);
  // Debian's oneDNN runs on OpenMP, whose team is every core by default: each device of an
  // executor would then run its convolutions on all the host's cores, and on a loaded host
  // every parallel region waits at its barrier for threads the scheduler has not run (resnet18
  // at batch 1 spent three quarters of its time spinning in libgomp). The calling thread's
  // share of the cores, as its matmuls have (SetMatmulThreads), bounds its team; OpenMP keeps
  // that count per thread.
  if (const int share = MatmulThreads(); share > 0 && omp_get_max_threads() != share) {
    omp_set_num_threads(share);
  }
  try {
    const std::shared_ptr<Planned> plan = Plan(key);
    dnnl::stream stream(CpuEngine());
    const memory src(plan->src, CpuEngine(), const_cast<std::byte*>(lhs.data()));
    const memory weights(plan->weights, CpuEngine(), const_cast<std::byte*>(rhs.data()));
    const memory dst(plan->dst, CpuEngine(), out.data());
    std::unique_lock scratch(plan->scratch_mu, std::try_to_lock);
    const bool reuse = scratch.owns_lock();
    const memory conv_src =
        InLayout(stream, src, plan->conv_src, plan->to_conv_src, plan->scratch_src, reuse);
    const memory conv_weights = WeightsInLayout(stream, rhs, weights, *plan, reuse);
    const memory conv_dst = plan->to_dst ? Buffer(plan->scratch_dst, plan->conv_dst, reuse) : dst;
    const memory pad = Buffer(plan->scratch_pad, plan->scratchpad, reuse);
    plan->conv.execute(stream, {{DNNL_ARG_SRC, conv_src},
                                {DNNL_ARG_WEIGHTS, conv_weights},
                                {DNNL_ARG_DST, conv_dst},
                                {DNNL_ARG_SCRATCHPAD, pad}});
    if (plan->to_dst) {
      plan->to_dst->execute(stream, const_cast<memory&>(conv_dst), const_cast<memory&>(dst));
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    // A configuration oneDNN has no kernel for: the direct loop computes it.
    return std::optional<Tensor>();
  }
  return std::optional<Tensor>(std::move(out));
}

ConvWeightCacheStats ConvWeightCacheStatsNow() { return Weights().Stats(); }

void SetConvWeightCacheBudget(uint64_t bytes) { Weights().SetBudget(bytes); }

}  // namespace atl::kernels
