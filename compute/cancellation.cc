#include "compute/cancellation.h"

namespace atl::compute {

namespace {

thread_local const std::atomic<bool>* current_flag = nullptr;

}  // namespace

const std::atomic<bool>* CurrentCancelFlag() { return current_flag; }

ScopedCancelFlag::ScopedCancelFlag(const std::atomic<bool>* flag) : previous_(current_flag) {
  current_flag = flag;
}

ScopedCancelFlag::~ScopedCancelFlag() { current_flag = previous_; }

}  // namespace atl::compute
