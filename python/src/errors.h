// atoll's errors as Python exceptions: one class per status code (atoll.InvalidArgument,
// atoll.NotFound, ...), all subclasses of atoll.Error, carrying the service's message.
#pragma once

#include <stdexcept>
#include <utility>

#include <pybind11/pybind11.h>

#include "atoll/status.h"

namespace atl::python {

// A non-OK Status on its way to Python: the translator BindErrors registers raises the class
// of its code with its message.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(Status status)
      : std::runtime_error(status.ToString()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws StatusError unless `status` is OK.
inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

// The value of `result`, or throws StatusError.
template <typename T>
T Unwrap(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

// Adds Error and a subclass per code to `m`, and the translator of StatusError.
void BindErrors(pybind11::module_& m);

}  // namespace atl::python
