// What the training examples print: a line per step and a summary, e.g.
//   step   3/30  loss 2.8356      4504 examples/s
//   done: loss 3.0033 -> 1.3727 in 30 steps, 3060 examples/s on average
#pragma once

#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "atoll/status.h"

namespace atl::examples {

// Step `step` of `steps`: its loss (`loss_digits` decimals) and `examples` over `elapsed`,
// then `note` (e.g. "  (checkpoint saved)").
inline void PrintStep(int step, int steps, double loss, double examples,
                      std::chrono::duration<double> elapsed, int loss_digits = 4,
                      std::string_view note = {}) {
  fmt::print("step {:3}/{}  loss {:.{}f}  {:8.0f} examples/s{}\n", step, steps, loss, loss_digits,
             examples / elapsed.count(), note);
  std::fflush(stdout);
}

// The end of a training example: `trained`'s error on stderr (returns 1), or the first and
// last of its losses (one per step) and `examples_per_step` over its elapsed time (returns
// 0): the program's exit status.
template <typename Trained>
int Finish(const Result<Trained>& trained, double examples_per_step) {
  if (!trained.ok()) {
    fmt::print(stderr, "error: {}\n", trained.status().ToString());
    return 1;
  }
  const std::vector<double>& losses = trained->losses;
  fmt::print("done: loss {:.4f} -> {:.4f} in {} steps, {:.0f} examples/s on average\n",
             losses.front(), losses.back(), losses.size(),
             examples_per_step * static_cast<double>(losses.size()) / trained->elapsed.count());
  return 0;
}

}  // namespace atl::examples
