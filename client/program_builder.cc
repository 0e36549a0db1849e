#include <algorithm>

#include <fmt/format.h>

#include "client/internal.h"

namespace atl {

size_t Program::num_nodes() const { return impl_ ? impl_->calls.size() : 0; }
size_t Program::num_args() const { return impl_ ? impl_->args.size() : 0; }
size_t Program::num_results() const { return impl_ ? impl_->results.size() : 0; }

uint64_t Function::id() const { return impl_->id; }
const std::string& Function::name() const { return impl_->def.name; }
uint64_t Function::slice_id() const { return impl_->slice.slice_id; }

ProgramBuilder::ProgramBuilder() : impl_(std::make_shared<Program::Impl>()) {}
ProgramBuilder::~ProgramBuilder() = default;

namespace {

// The global type of a traced value, or nullptr when it does not exist.
const ir::TensorType* TypeOf(const Program::Impl& p, const Traced& t) {
  if (t.kind == kTracedArg && t.index >= 0 && static_cast<size_t>(t.index) < p.args.size()) {
    return &p.args[t.index];
  }
  if (t.kind == kTracedCall && t.index >= 0 && static_cast<size_t>(t.index) < p.calls.size()) {
    const auto& outs = p.calls[t.index].fn->output_types;
    if (t.output >= 0 && static_cast<size_t>(t.output) < outs.size()) return &outs[t.output];
  }
  if (t.kind == kTracedRoute && t.index >= 0 && static_cast<size_t>(t.index) < p.routes.size()) {
    return &p.routes[t.index].type;
  }
  return nullptr;
}

}  // namespace

const Status& ProgramBuilder::status() const { return status_; }

Traced ProgramBuilder::Arg(DType dtype, Shape shape) {
  const int index = static_cast<int>(impl_->args.size());
  if (auto bytes = CheckedNumBytes(dtype, shape); !bytes.ok() && status_.ok()) {
    status_ = bytes.status().WithContext(fmt::format("argument {}", index));
  }
  impl_->args.push_back(ir::SplitType(dtype, std::move(shape), -1));
  return {kTracedArg, index, 0};
}

Traced ProgramBuilder::Route(Traced values, Traced destinations) {
  if (!status_.ok()) return {};
  const ir::TensorType* v = TypeOf(*impl_, values);
  const ir::TensorType* d = TypeOf(*impl_, destinations);
  if (values.kind != kTracedCall || destinations.kind != kTracedCall || !v || !d ||
      values.index != destinations.index) {
    status_ =
        InvalidArgument("Route takes two outputs of one call: the rows and their destinations");
    return {};
  }
  if (v->shape.empty() || d->dtype != DType::kI32 || d->shape.size() != 1 ||
      d->shape[0] != v->shape[0] || d->split.front() != v->split.front()) {
    status_ = InvalidArgument(
        fmt::format("Route: {}{} rows need i32[{}] destinations laid out like them, got {}{}",
                    DTypeName(v->dtype), ShapeString(v->shape), v->shape.empty() ? 0 : v->shape[0],
                    DTypeName(d->dtype), ShapeString(d->shape)));
    return {};
  }
  ir::TensorType routed = *v;
  routed.shape[0] = kDynamicDim;
  std::fill(routed.split.begin(), routed.split.end(), -1);
  routed.split[0] = 0;
  impl_->routes.push_back({values, destinations, std::move(routed)});
  return {kTracedRoute, static_cast<int>(impl_->routes.size()) - 1, 0};
}

std::vector<Traced> ProgramBuilder::Call(const Function& fn, const std::vector<Traced>& args) {
  if (!status_.ok()) return {};
  // The call is node `call` of the program: errors name it so, with the function's name.
  const size_t call = impl_->calls.size();
  if (!fn.impl_) {
    status_ = InvalidArgument(fmt::format("call {}: the function is not registered", call));
    return {};
  }
  const auto& inputs = fn.impl_->def.inputs;
  if (args.size() != inputs.size()) {
    status_ = InvalidArgument(fmt::format("call {} of '{}': expected {} argument{}, got {}", call,
                                          fn.name(), inputs.size(), inputs.size() == 1 ? "" : "s",
                                          args.size()));
    return {};
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::TensorType* t = TypeOf(*impl_, args[i]);
    if (t == nullptr) {
      status_ = InvalidArgument(fmt::format(
          "call {} of '{}': argument {} is not a value of this program", call, fn.name(), i));
      return {};
    }
    if (t->dtype != inputs[i].dtype || t->shape != inputs[i].shape) {
      status_ = InvalidArgument(fmt::format("call {} of '{}': argument {}: expected {}{}, got {}{}",
                                            call, fn.name(), i, DTypeName(inputs[i].dtype),
                                            ShapeString(inputs[i].shape), DTypeName(t->dtype),
                                            ShapeString(t->shape)));
      return {};
    }
  }
  impl_->calls.push_back({fn.impl_, args});
  std::vector<Traced> outs;
  for (size_t o = 0; o < fn.impl_->output_types.size(); ++o) {
    outs.push_back({kTracedCall, static_cast<int>(impl_->calls.size()) - 1, static_cast<int>(o)});
  }
  return outs;
}

void ProgramBuilder::Return(const std::vector<Traced>& results) {
  if (!status_.ok()) return;
  for (const auto& r : results) {
    if (TypeOf(*impl_, r) == nullptr) {
      status_ = InvalidArgument("Return of a value that is not part of this program");
      return;
    }
    if (r.kind == kTracedRoute) {
      status_ = InvalidArgument("a routed value can only feed a call, not be returned");
      return;
    }
  }
  impl_->results = results;
}

Result<Program> ProgramBuilder::Build() const {
  if (!status_.ok()) return status_;
  if (impl_->results.empty()) return InvalidArgument("the program returns nothing");
  Program p;
  p.impl_ = std::make_shared<const Program::Impl>(*impl_);
  return p;
}

}  // namespace atl
