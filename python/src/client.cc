// The client: finding and connecting to a cluster, slices, registering traced functions,
// submitting programs with numpy arrays and futures, waiting for results. Every call that
// may block goes through the Session (session.h): GIL released, one thread at a time, Ctrl-C
// honoured.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>

#include "launcher/find_cluster.h"
#include "python/src/arrays.h"
#include "python/src/bindings.h"
#include "python/src/session.h"
#include "python/src/symbolic.h"

namespace py = pybind11;

namespace atl::python {

namespace {

// A submitted run, with what is known of it without asking the client.
struct RunObject {
  std::unique_ptr<RunHandle> handle;
  uint64_t id = 0;
  size_t num_results = 0;
};

// A future of result `index` of run `run_id`.
struct FutureObject {
  std::unique_ptr<FutureHandle> handle;
  uint64_t run_id = 0;
  size_t index = 0;
  DType dtype = DType::kF32;
  Shape shape;
};

std::optional<std::chrono::milliseconds> Timeout(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  if (!(*seconds >= 0) || !std::isfinite(*seconds)) {
    throw StatusError(InvalidArgument("a timeout is a number of seconds >= 0, or None"));
  }
  return std::chrono::milliseconds(std::llround(*seconds * 1000.0));
}

RunObject Submit(const std::shared_ptr<Session>& session, const Program& program,
                 const py::sequence& args, bool sequential) {
  // Arrays become tensors here, with the GIL held; futures are read under the session's lock.
  std::vector<Input> inputs;
  std::vector<std::pair<size_t, FutureHandle*>> futures;
  for (size_t i = 0; i < args.size(); ++i) {
    py::handle arg = args[i];
    if (py::isinstance<FutureObject>(arg)) {
      auto& future = arg.cast<FutureObject&>();
      if (future.handle->session() != session) {
        throw StatusError(
            InvalidArgument("argument " + std::to_string(i) + " is a future of another client"));
      }
      futures.emplace_back(i, future.handle.get());
      inputs.emplace_back(Tensor());
    } else {
      inputs.emplace_back(Unwrap(TensorFromArray(arg, i)));
    }
  }
  return Unwrap(session->Call([&](Client& client) -> Result<RunObject> {
    for (const auto& [i, handle] : futures) {
      const Future* future = handle->value_under_lock();
      if (future == nullptr) return FailedPrecondition("the client is closed");
      inputs[i] = Input(*future);
    }
    Result<Run> run = client.Submit(program, inputs, {.sequential = sequential});
    // The copies of the futures go while the client is sure to be there.
    for (const auto& [i, handle] : futures) inputs[i] = Input(Tensor());
    if (!run.ok()) return run.status();
    const uint64_t id = run->id();
    return RunObject{std::make_unique<RunHandle>(session, std::move(run).value()), id,
                     program.num_results()};
  }));
}

// `wait` on the run's Client, in slices that let Ctrl-C through (Session::Wait).
template <typename T, typename Wait>
Result<T> WaitOnRun(RunObject& run, std::optional<double> timeout_s, const std::string& what,
                    Wait wait) {
  return run.handle->session()->template Wait<T>(
      Timeout(timeout_s), what, [&](Client&, std::chrono::milliseconds slice) -> Result<T> {
        Run* r = run.handle->value_under_lock();
        if (r == nullptr) return FailedPrecondition("the client is closed");
        return wait(*r, slice);
      });
}

py::array WaitResult(RunObject& run, size_t index, std::optional<double> timeout_s) {
  const std::string what = "result " + std::to_string(index) + " of run " + std::to_string(run.id);
  return ArrayFromTensor(Unwrap(WaitOnRun<Tensor>(
      run, timeout_s, what, [&](Run& r, auto slice) { return r.Wait(index, slice); })));
}

// Every result at once: all their shards' reads go out together (Run::Wait), rather than
// one result's round trip after another's.
py::list WaitResults(RunObject& run, std::optional<double> timeout_s) {
  const std::string what = "the results of run " + std::to_string(run.id);
  py::list arrays;
  for (Tensor& t : Unwrap(WaitOnRun<std::vector<Tensor>>(
           run, timeout_s, what, [](Run&r, auto slice) { return r.Wait(slice); }))) {
    arrays.append(ArrayFromTensor(std::move(t)));
  }
  return arrays;
}

// Every result computed, none read back (Run::WaitDone).
void WaitDone(RunObject& run, std::optional<double> timeout_s) {
  const std::string what = "run " + std::to_string(run.id);
  Unwrap(WaitOnRun<bool>(run, timeout_s, what, [](Run& r, auto slice) -> Result<bool> {
    ATOLL_RETURN_IF_ERROR(r.WaitDone(slice));
    return true;
  }));
}

FutureObject Output(RunObject& run, size_t index) {
  if (index >= run.num_results) {
    throw StatusError(InvalidArgument("run " + std::to_string(run.id) + " has " +
                                      std::to_string(run.num_results) + " results, not a result " +
                                      std::to_string(index)));
  }
  return Unwrap(run.handle->Call([&](Client&, Run& r) -> Result<FutureObject> {
    Future future = r.Output(index);
    FutureObject out{nullptr, run.id, index, future.dtype(), future.shape()};
    out.handle = std::make_unique<FutureHandle>(run.handle->session(), std::move(future));
    return out;
  }));
}

// Saves `tensors`, (name, future or array) pairs, as checkpoint `path` (Client::Save).
void Save(const std::shared_ptr<Session>& session, const py::sequence& tensors,
          const std::string& path, double timeout_s) {
  std::vector<std::pair<std::string, Input>> inputs;
  std::vector<std::pair<size_t, FutureHandle*>> futures;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto pair = tensors[i].cast<py::tuple>();
    auto name = pair[0].cast<std::string>();
    py::handle value = pair[1];
    if (py::isinstance<FutureObject>(value)) {
      auto& future = value.cast<FutureObject&>();
      if (future.handle->session() != session) {
        throw StatusError(InvalidArgument("tensor '" + name + "' is a future of another client"));
      }
      futures.emplace_back(i, future.handle.get());
      inputs.emplace_back(std::move(name), Tensor());
    } else {
      inputs.emplace_back(std::move(name), Unwrap(TensorFromArray(value, i)));
    }
  }
  ThrowIfError(session->Call([&](Client& client) -> Status {
    for (const auto& [i, handle] : futures) {
      const Future* future = handle->value_under_lock();
      if (future == nullptr) return FailedPrecondition("the client is closed");
      inputs[i].second = Input(*future);
    }
    Status saved = client.Save(inputs, path, Timeout(timeout_s).value());
    // The copies of the futures go while the client is sure to be there.
    for (const auto& [i, handle] : futures) inputs[i].second = Input(Tensor());
    return saved;
  }));
}

// Loads checkpoint `path` onto `slice` (Client::Load): the names loaded and a run whose
// results they are.
std::pair<std::vector<std::string>, RunObject> Load(
    const std::shared_ptr<Session>& session, const std::string& path, const Slice& slice,
    const std::vector<std::string>& names, const std::map<std::string, std::vector<int>>& shardings,
    double timeout_s) {
  LoadOptions options{.names = names, .shardings = {}, .timeout = Timeout(timeout_s).value()};
  for (const auto& [name, axes] : shardings) options.shardings[name] = Sharding::Axes(axes);
  return Unwrap(
      session->Call([&](Client& client) -> Result<std::pair<std::vector<std::string>, RunObject>> {
        ATOLL_ASSIGN_OR_RETURN(Checkpoint loaded, client.Load(path, slice, options));
        const uint64_t id = loaded.run.id();
        const size_t count = loaded.names.size();
        return std::pair{
            std::move(loaded.names),
            RunObject{std::make_unique<RunHandle>(session, std::move(loaded.run)), id, count}};
      }));
}

}  // namespace

void BindClient(py::module_& m) {
  m.def(
      "find_cluster",
      [](const std::string& state_dir, const std::string& endpoint, const std::string& keys) {
        ClusterLookup lookup;
        lookup.state_dir = state_dir;
        lookup.rm_endpoint = endpoint;
        lookup.keys_dir = keys;
        const ClusterInfo info = Unwrap(ResolveCluster(lookup));
        return std::make_tuple(info.rm_endpoint, KeysDir(lookup));
      },
      py::arg("state_dir"), py::arg("endpoint"), py::arg("keys"),
      "(RM endpoint, keys directory) of the cluster, found as the `atoll` CLI finds it; each "
      "argument empty for its default. Raises Unavailable when no cluster runs.");

  m.def(
      "connect",
      [](const std::string& endpoint, const std::string& keys, const std::string& key_name,
         const std::string& name, double request_timeout_s, double weight) {
        ClientOptions options;
        options.rm_endpoint = endpoint;
        options.name = name;
        options.request_timeout = Timeout(request_timeout_s).value();
        options.weight = weight;
        options.keys_dir = keys;
        options.key_name = key_name;
        return Session::Connect(options);
      },
      py::arg("endpoint"), py::arg("keys"), py::arg("key_name"), py::arg("name"),
      py::arg("request_timeout_s"), py::arg("weight"), "Connects to the RM at `endpoint`.");

  py::class_<Slice>(m, "Slice", "Devices the RM mapped for a client, all on one island.")
      .def_property_readonly("id", &Slice::id)
      .def_property_readonly("island", &Slice::island)
      .def_property_readonly("num_devices", &Slice::num_devices)
      .def_property_readonly("mesh", [](const Slice& s) { return py::tuple(py::cast(s.mesh())); });

  py::class_<Function>(m, "CompiledFunction", "A function compiled on a slice.")
      .def_property_readonly("id", &Function::id)
      .def_property_readonly("name", &Function::name)
      .def_property_readonly("slice_id", &Function::slice_id);

  py::class_<Session, std::shared_ptr<Session>>(m, "Client", "A connection to a cluster.")
      .def_property_readonly(
          "id",
          [](Session& s) {
            return Unwrap(s.Call([](Client& c) -> Result<uint64_t> { return c.id(); }));
          })
      .def(
          "create_slice",
          [](Session& s, const Shape& mesh, const std::string& island) {
            return Unwrap(s.Call([&](Client& c) { return c.CreateMeshSlice(mesh, island); }));
          },
          py::arg("mesh"), py::arg("island"))
      .def(
          "register",
          [](Session& s, const FunctionTrace& trace, const Slice& slice) {
            return Unwrap(s.Call([&](Client& c) { return c.Register(trace.builder, slice); }));
          },
          py::arg("builder"), py::arg("slice"))
      .def("submit", &Submit, py::arg("program"), py::arg("args"), py::arg("sequential"))
      .def("save", &Save, py::arg("tensors"), py::arg("path"), py::arg("timeout"))
      .def("load", &Load, py::arg("path"), py::arg("slice"), py::arg("names"), py::arg("shardings"),
           py::arg("timeout"))
      .def("close", &Session::Close);

  py::class_<RunObject>(m, "Run", "A submitted run.")
      .def_readonly("id", &RunObject::id)
      .def_readonly("num_results", &RunObject::num_results)
      .def("wait", &WaitResult, py::arg("index"), py::arg("timeout"))
      .def("wait_all", &WaitResults, py::arg("timeout"))
      .def("wait_done", &WaitDone, py::arg("timeout"))
      .def("output", &Output, py::arg("index"))
      .def("cancel", [](RunObject& run) {
        ThrowIfError(run.handle->Call([](Client&, Run& r) { return r.Cancel(); }));
      });

  py::class_<FutureObject>(m, "Future", "A future for one result of a run.")
      .def_readonly("run_id", &FutureObject::run_id)
      .def_readonly("index", &FutureObject::index)
      .def_property_readonly("dtype",
                             [](const FutureObject& f) { return std::string(DTypeName(f.dtype)); })
      .def_property_readonly("shape",
                             [](const FutureObject& f) { return py::tuple(py::cast(f.shape)); });
}

}  // namespace atl::python
