// Session: a connected client as the Python objects share it. The C++ Client is used by one
// thread at a time; Python threads may share one, so every use takes the session's lock,
// with the GIL released (every call that may block: connect, slices, registering,
// submitting, waiting, closing). Runs and futures must not outlive their client: each is
// kept in a Handle that the session can empty when it closes, and that drops its value under
// the lock.
//
// Waits are sliced: a wait polls at most kWaitSlice at a time and runs Python's signal
// handlers between slices, so Ctrl-C raises KeyboardInterrupt within a slice. Every blocking
// call runs them when it returns, so a signal that interrupted it (a ZeroMQ poll fails with
// EINTR) raises KeyboardInterrupt rather than the error it caused.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "atoll/client.h"
#include "python/src/errors.h"

namespace atl::python {

inline constexpr std::chrono::milliseconds kWaitSlice{50};

// Releases the GIL for its lifetime when this thread holds it (a destructor may run with or
// without it).
class GilReleased {
 public:
  GilReleased() {
    if (PyGILState_Check() != 0 && Py_IsInitialized() != 0) release_.emplace();
  }

 private:
  std::optional<pybind11::gil_scoped_release> release_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  static std::shared_ptr<Session> Connect(const ClientOptions& options);
  ~Session();  // closes

  // Runs `call(client)` under the lock with the GIL released, then Python's signal handlers.
  // `call` returns a Status or a Result; FailedPrecondition once the session is closed.
  template <typename F>
  auto Call(F&& call) -> decltype(call(std::declval<Client&>())) {
    using R = decltype(call(std::declval<Client&>()));
    std::optional<R> result;
    {
      GilReleased released;
      std::lock_guard lock(mu_);
      if (client_ == nullptr) {
        result.emplace(FailedPrecondition("the client is closed"));
      } else {
        result.emplace(call(*client_));
      }
    }
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    return std::move(*result);
  }

  // Calls `attempt(client, slice)` with slices of at most kWaitSlice of `timeout` (none: no
  // bound) while it fails with DeadlineExceeded; then DeadlineExceeded "<what> was not ready
  // within <timeout>" once the time is up.
  template <typename T>
  Result<T> Wait(std::optional<std::chrono::milliseconds> timeout, const std::string& what,
                 const std::function<Result<T>(Client&, std::chrono::milliseconds)>& attempt) {
    const auto start = std::chrono::steady_clock::now();
    for (bool first = true;; first = false) {
      std::chrono::milliseconds slice = kWaitSlice;
      if (timeout) {
        const auto left = *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start);
        // A timeout of 0 still looks once.
        if (left <= std::chrono::milliseconds(0) && !first) return NotReady(what, *timeout);
        slice = std::clamp(left, std::chrono::milliseconds(1), slice);
      }
      Result<T> result = Call([&](Client& client) { return attempt(client, slice); });
      if (result.ok() || result.status().code() != Code::kDeadlineExceeded) return result;
    }
  }

  // Says goodbye (the cluster frees what this client held) after emptying every handle.
  // Idempotent; later calls fail with FailedPrecondition.
  void Close();

  // A run or future of this session: emptied when the session closes, and its value dropped
  // under the session's lock.
  template <typename T>
  class Handle {
   public:
    Handle(std::shared_ptr<Session> session, T value)
        : session_(std::move(session)),
          value_(std::make_shared<std::optional<T>>(std::move(value))) {
      session_->Track(value_);
    }
    ~Handle() {
      GilReleased released;
      std::lock_guard lock(session_->mu_);
      value_->reset();
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    // session()->Call with the value: `call(client, value)`.
    template <typename F>
    auto Call(F&& call) -> decltype(call(std::declval<Client&>(), std::declval<T&>())) {
      return session_->Call([&](Client& client) { return call(client, **value_); });
    }
    // The value, for a call already under the session's lock (a Call of the same session);
    // null once the session closed.
    T* value_under_lock() { return value_->has_value() ? &**value_ : nullptr; }
    const std::shared_ptr<Session>& session() const { return session_; }

   private:
    std::shared_ptr<Session> session_;
    std::shared_ptr<std::optional<T>> value_;
  };

 private:
  explicit Session(std::unique_ptr<Client> client) : client_(std::move(client)) {}
  // Remembers a handle's value, to empty it on Close() unless it is gone by then.
  template <typename T>
  void Track(const std::shared_ptr<std::optional<T>>& value) {
    std::lock_guard lock(handles_mu_);
    // Forgets the handles gone since the list last doubled: amortised O(1) per handle.
    if (handles_.size() >= 64 && (handles_.size() & (handles_.size() - 1)) == 0) {
      std::erase_if(handles_, [](const Tracked& t) { return t.alive.expired(); });
    }
    handles_.push_back({value, [weak = std::weak_ptr<std::optional<T>>(value)] {
                          if (auto v = weak.lock()) v->reset();
                        }});
  }
  static Status NotReady(const std::string& what, std::chrono::milliseconds timeout);

  // Taken with the GIL released, never the other way round: whoever holds it never waits
  // for the GIL.
  std::mutex mu_;
  std::unique_ptr<Client> client_;  // null once closed; guarded by mu_
  // Held only to add or take the list, never across a call.
  std::mutex handles_mu_;
  struct Tracked {
    std::weak_ptr<void> alive;
    std::function<void()> empty;
  };
  std::vector<Tracked> handles_;  // guarded by handles_mu_
};

using RunHandle = Session::Handle<Run>;
using FutureHandle = Session::Handle<Future>;

}  // namespace atl::python
