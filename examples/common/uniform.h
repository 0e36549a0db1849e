// Synthetic data for the examples: tensors of uniformly random values.
#pragma once

#include <random>

#include "atoll/tensor.h"

namespace atl::examples {

// An f32 tensor of `shape` with values drawn uniformly from [-bound, bound].
inline Tensor Uniform(std::mt19937& rng, Shape shape, float bound) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> dist(-bound, bound);
  for (float& v : t.as<float>()) v = dist(rng);
  return t;
}

}  // namespace atl::examples
