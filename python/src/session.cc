#include "python/src/session.h"

#include <cstdio>

namespace atl::python {

std::shared_ptr<Session> Session::Connect(const ClientOptions& options) {
  Result<std::unique_ptr<Client>> client = InvalidArgument("not connected");
  {
    GilReleased released;
    client = Client::Connect(options);
  }
  if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  return std::shared_ptr<Session>(new Session(Unwrap(std::move(client))));
}

Session::~Session() { Close(); }

void Session::Close() {
  GilReleased released;
  std::lock_guard lock(mu_);
  if (client_ == nullptr) return;
  std::vector<Tracked> handles;
  {
    std::lock_guard taken(handles_mu_);
    handles.swap(handles_);
  }
  for (const Tracked& handle : handles) handle.empty();
  client_.reset();
}

Status Session::NotReady(const std::string& what, std::chrono::milliseconds timeout) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", static_cast<double>(timeout.count()) / 1000.0);
  return DeadlineExceeded(what + " was not ready within " + seconds + " s");
}

}  // namespace atl::python
