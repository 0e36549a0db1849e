// What the training examples print: a line per step and a summary, e.g.
//   step   3/30  loss 2.8356      4504 examples/s
//   done: loss 3.0033 -> 1.3727 in 30 steps, 3060 examples/s on average
#pragma once

#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

namespace atl::examples {

// Step `step` of `steps`: its loss (`loss_digits` decimals) and `examples` over `elapsed`.
inline void PrintStep(int step, int steps, double loss, double examples,
                      std::chrono::duration<double> elapsed, int loss_digits = 4) {
  fmt::print("step {:3}/{}  loss {:.{}f}  {:8.0f} examples/s\n", step, steps, loss, loss_digits,
             examples / elapsed.count());
  std::fflush(stdout);
}

// The first and last of `losses` (one per step) and `examples` in all over `elapsed`.
inline void PrintSummary(const std::vector<double>& losses, double examples,
                         std::chrono::duration<double> elapsed) {
  fmt::print("done: loss {:.4f} -> {:.4f} in {} steps, {:.0f} examples/s on average\n",
             losses.front(), losses.back(), losses.size(), examples / elapsed.count());
}

}  // namespace atl::examples
