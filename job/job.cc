#include "job/job.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml.hpp>

#include "common/base/utf8.h"
#include "common/service/toml_int.h"

namespace atl {

namespace {

// The ranges of a job's counts: a slice of more devices than this is surely a typo, and a
// job of more steps would run for years.
constexpr int64_t kMaxSliceDevices = 1 << 16;
constexpr int64_t kMaxSteps = int64_t{1} << 32;

// toml11 reports problems by throwing; ParseJob turns them into InvalidArgument.
template <typename T>
T Required(const toml::value& table, const std::string& key) {
  return toml::find<T>(table, key);
}

template <typename T>
T Optional(const toml::value& table, const std::string& key, T fallback) {
  return table.contains(key) ? toml::find<T>(table, key) : fallback;
}

std::vector<toml::value> Array(const toml::value& table, const std::string& key) {
  return table.contains(key) ? toml::find<std::vector<toml::value>>(table, key)
                             : std::vector<toml::value>{};
}

// A TOML number, integer or float.
double Number(const toml::value& v) {
  if (v.is_integer()) return static_cast<double>(v.as_integer());
  if (v.is_floating()) return v.as_floating();
  throw std::runtime_error("an input value must be a number");
}

std::string Scalar(const toml::value& v) {
  if (v.is_string()) return v.as_string().str;
  if (v.is_integer()) return std::to_string(v.as_integer());
  if (v.is_floating()) return fmt::format("{}", v.as_floating());
  throw std::runtime_error("an op argument must be a string or a number");
}

// A dtype and shape at `table`: every dimension at least 1, and a tensor of them small
// enough that its size in bytes can be counted.
Result<std::pair<DType, Shape>> ParseType(const toml::value& table) {
  ATOLL_ASSIGN_OR_RETURN(DType dtype, ParseDType(Required<std::string>(table, "dtype")));
  Shape shape = Required<Shape>(table, "shape");
  for (int64_t d : shape) {
    if (d < 1) {
      return InvalidArgument(fmt::format("shape {} has dimension {}: every one must be at least 1",
                                         ShapeString(shape), d));
    }
  }
  ATOLL_RETURN_IF_ERROR(CheckedNumBytes(dtype, shape).status());
  return std::pair{dtype, std::move(shape)};
}

// A slice's `mesh`: its axes' extents, each at least 1, of at most kMaxSliceDevices devices.
Result<Shape> ParseMesh(const toml::value& slice, const std::string& name) {
  const Shape mesh = Required<Shape>(slice, "mesh");
  int64_t devices = 1;
  for (int64_t extent : mesh) {
    if (extent < 1 || extent > kMaxSliceDevices / devices) {
      return InvalidArgument(fmt::format(
          "slice '{}' mesh {}: every axis must be at least 1, and the devices at most {}", name,
          ShapeString(mesh), kMaxSliceDevices));
    }
    devices *= extent;
  }
  if (mesh.empty()) return InvalidArgument("slice '" + name + "' mesh has no axes");
  return mesh;
}

// "axes:A0,A1,...": per dimension of a tensor of rank `rank`, the mesh axis it is cut along
// or -1.
Result<Sharding> ParseAxes(const std::string& text, size_t rank) {
  std::vector<int> axes;
  for (size_t start = 5;;) {
    const size_t comma = text.find(',', start);
    const char* end = text.data() + (comma == std::string::npos ? text.size() : comma);
    int axis = 0;
    auto [ptr, ec] = std::from_chars(text.data() + start, end, axis);
    if (ec != std::errc() || ptr != end || axis < -1) {
      return InvalidArgument("sharding '" + text +
                             "' must list a mesh axis or -1 per dimension, separated by commas");
    }
    axes.push_back(axis);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (axes.size() > std::max<size_t>(rank, 1)) {
    return InvalidArgument(fmt::format("sharding '{}' names {} dimensions of a rank-{} tensor",
                                       text, axes.size(), rank));
  }
  return Sharding::Axes(std::move(axes));
}

// "replicated", "split:D" (D a dimension of a tensor of rank `rank`, 0 for a scalar, cut
// along mesh axis 0) or "axes:A0,A1,...".
Result<Sharding> ParseSharding(const std::string& text, size_t rank) {
  if (text == "replicated") return Sharding::Replicated();
  if (text.rfind("axes:", 0) == 0) return ParseAxes(text, rank);
  int dim = 0;
  if (text.rfind("split:", 0) == 0) {
    const char* begin = text.data() + 6;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, dim);
    if (ec == std::errc() && ptr == end) {
      if (dim >= 0 && static_cast<size_t>(dim) < std::max<size_t>(rank, 1)) {
        return Sharding::Split(dim);
      }
      return InvalidArgument(fmt::format("sharding '{}' must split a dimension in 0..{}", text,
                                         std::max<size_t>(rank, 1) - 1));
    }
  }
  return InvalidArgument("sharding '" + text +
                         "' is none of \"replicated\", \"split:D\" and \"axes:A0,A1,...\"");
}

// Value `index` of an input, as its dtype holds it: an integer dtype takes a whole number in
// its range, a float dtype a finite number that stays finite when rounded to it (a cast of
// anything else would be undefined or silently infinite). Values are read as doubles, so an
// integer beyond 2^53, which a double may not hold, is refused rather than rounded.
Result<double> InputValue(DType dtype, const toml::value& v, size_t index) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (v.is_integer() && (v.as_integer() > kExact || v.as_integer() < -kExact)) {
    return InvalidArgument(fmt::format(
        "value {} ({}) is beyond 2^53, where job inputs (read as doubles) stop being exact", index,
        v.as_integer()));
  }
  const double x = Number(v);
  const Result<Tensor> held = Tensor::FromDoubles(dtype, {}, {x});
  if (held.ok() && std::isfinite(held->ToDoubles()[0])) return x;
  return InvalidArgument(fmt::format(
      "value {} ({}) is not {}", index, x,
      IsFloating(dtype) ? fmt::format("a finite {}", DTypeName(dtype))
                        : fmt::format("a whole number in {}'s range", DTypeName(dtype))));
}

Result<JobSpec> FromToml(const toml::value& root) {
  JobSpec job;
  job.name = Optional<std::string>(root, "name", "job");
  ATOLL_RETURN_IF_ERROR(ReadInt(root, "steps", "steps", 1, kMaxSteps, job.steps));
  std::set<std::string> slice_names, function_names;
  for (const auto& s : Array(root, "slices")) {
    JobSpec::SliceSpec spec{Required<std::string>(s, "name"),
                            1,
                            Optional<std::string>(s, "island", ""),
                            {},
                            Optional<std::string>(s, "kind", "")};
    if (s.contains("mesh")) {
      ATOLL_ASSIGN_OR_RETURN(spec.mesh, ParseMesh(s, spec.name));
      spec.devices = static_cast<uint32_t>(NumElements(spec.mesh));
    } else {
      ATOLL_RETURN_IF_ERROR(ReadInt(s, "devices", "slice '" + spec.name + "' devices", 1,
                                    kMaxSliceDevices, spec.devices));
    }
    if (!slice_names.insert(spec.name).second) {
      return InvalidArgument("slice '" + spec.name + "' is defined twice");
    }
    job.slices.push_back(std::move(spec));
  }
  for (const auto& f : Array(root, "functions")) {
    JobSpec::FunctionSpec spec;
    spec.name = Required<std::string>(f, "name");
    spec.slice = Required<std::string>(f, "slice");
    if (!slice_names.count(spec.slice)) {
      return InvalidArgument("function '" + spec.name + "' uses unknown slice '" + spec.slice +
                             "'");
    }
    for (const auto& in : Array(f, "inputs")) {
      const std::string what = fmt::format("function '{}' input {}", spec.name, spec.inputs.size());
      auto type = ParseType(in);
      if (!type.ok()) return type.status().WithContext(what);
      auto& [dtype, shape] = *type;
      auto sharding = ParseSharding(Optional<std::string>(in, "sharding", "split:0"), shape.size());
      if (!sharding.ok()) return sharding.status().WithContext(what);
      spec.inputs.push_back({dtype, std::move(shape), std::move(sharding).value()});
    }
    for (const auto& op : Array(f, "ops")) {
      JobSpec::OpSpec o{Required<std::string>(op, "op"), {}};
      for (const auto& a : Array(op, "args")) o.args.push_back(Scalar(a));
      spec.ops.push_back(std::move(o));
    }
    spec.outputs = Optional<std::vector<std::string>>(f, "outputs", {});
    if (!function_names.insert(spec.name).second) {
      return InvalidArgument("function '" + spec.name + "' is defined twice");
    }
    job.functions.push_back(std::move(spec));
  }
  if (!root.contains("program")) return InvalidArgument("the job has no [program]");
  const auto& program = toml::find(root, "program");
  std::set<std::string> values;
  for (const auto& a : Array(program, "args")) {
    const auto name = Required<std::string>(a, "name");
    auto type = ParseType(a);
    if (!type.ok()) return type.status().WithContext("argument '" + name + "'");
    job.args.push_back({name, type->first, std::move(type->second)});
    if (!values.insert(job.args.back().name).second) {
      return InvalidArgument("value '" + job.args.back().name + "' is defined twice");
    }
  }
  for (const auto& c : Array(program, "calls")) {
    JobSpec::CallSpec call{Required<std::string>(c, "fn"),
                           Optional<std::vector<std::string>>(c, "args", {}),
                           Optional<std::vector<std::string>>(c, "out", {})};
    if (!function_names.count(call.fn)) {
      return InvalidArgument("a call names unknown function '" + call.fn + "'");
    }
    for (const auto& a : call.args) {
      if (!values.count(a)) {
        return InvalidArgument("call of '" + call.fn + "' uses '" + a + "' before it is defined");
      }
    }
    for (const auto& o : call.outs) {
      if (!values.insert(o).second) return InvalidArgument("value '" + o + "' is defined twice");
    }
    job.calls.push_back(std::move(call));
  }
  job.returns = Required<std::vector<std::string>>(program, "returns");
  for (const auto& r : job.returns) {
    if (!values.count(r)) return InvalidArgument("the program returns unknown value '" + r + "'");
  }
  const toml::value inputs = root.contains("inputs") ? toml::find(root, "inputs") : toml::value();
  for (const auto& a : job.args) {
    if (!inputs.is_table() || !inputs.contains(a.name)) {
      return InvalidArgument("[inputs] gives no value for argument '" + a.name + "'");
    }
    std::vector<double> numbers;
    for (const auto& v : toml::find<std::vector<toml::value>>(inputs, a.name)) {
      auto number = InputValue(a.dtype, v, numbers.size());
      if (!number.ok()) return number.status().WithContext("input '" + a.name + "'");
      numbers.push_back(*number);
    }
    auto tensor = Tensor::FromDoubles(a.dtype, a.shape, numbers);
    if (!tensor.ok()) return tensor.status().WithContext("input '" + a.name + "'");
    job.inputs.push_back(std::move(tensor).value());
  }
  return job;
}

}  // namespace

Result<JobSpec> ParseJob(const std::string& toml_text, const std::string& origin) {
  // TOML is UTF-8, and toml11 3.7 reads out of bounds on some invalid sequences: refused
  // before it sees them.
  if (auto bad = FirstInvalidUtf8(toml_text)) {
    return InvalidArgument(fmt::format("{}: not UTF-8 at byte {}", origin, *bad));
  }
  try {
    std::istringstream in(toml_text);
    auto job = FromToml(toml::parse(in, origin));
    if (!job.ok()) return job.status().WithContext(origin);
    return job;
  } catch (const std::exception& e) {
    return InvalidArgument(origin + ": " + e.what());
  }
}

Result<JobSpec> LoadJob(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read job file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseJob(text.str(), path);
}

namespace {

// Resolves "in<i>", "op<j>"; a number is a scalar (returned through `scalar`).
Result<Value> Operand(const std::vector<Value>& ins, const std::vector<Value>& ops,
                      const std::string& arg, std::optional<double>& scalar) {
  auto index = [&](size_t skip, size_t size) -> Result<size_t> {
    size_t i = 0;
    auto [ptr, ec] = std::from_chars(arg.data() + skip, arg.data() + arg.size(), i);
    if (ec != std::errc() || ptr != arg.data() + arg.size() || i >= size) {
      return InvalidArgument("'" + arg + "' names no earlier input or op");
    }
    return i;
  };
  if (arg.rfind("in", 0) == 0) {
    ATOLL_ASSIGN_OR_RETURN(size_t i, index(2, ins.size()));
    return ins[i];
  }
  if (arg.rfind("op", 0) == 0) {
    ATOLL_ASSIGN_OR_RETURN(size_t i, index(2, ops.size()));
    return ops[i];
  }
  try {
    size_t used = 0;
    scalar = std::stod(arg, &used);
    if (used == arg.size()) return Value{};
  } catch (const std::exception&) {
  }
  return InvalidArgument("op argument '" + arg + "' is not in<i>, op<j> or a number");
}

// A collective's whole-number args (after its value): within `range` of them.
struct CollectiveRow {
  std::pair<size_t, size_t> numbers;  // how many, at least and at most
  Value (*add)(FunctionBuilder& b, Value a, const std::vector<int64_t>& n);
};

template <Value (FunctionBuilder::*Reduce)(Value, int)>
Value AddAllReduce(FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
  return (b.*Reduce)(a, n.empty() ? kWholeSlice : static_cast<int>(n[0]));
}

// The collectives by name: an all-reduce takes a value and optionally its mesh axis (else
// the whole slice); the others a value, the axis and their own numbers.
const std::map<std::string, CollectiveRow, std::less<>>& CollectiveRows() {
  static const std::map<std::string, CollectiveRow, std::less<>> rows = {
      {"all_reduce_sum", {{0, 1}, &AddAllReduce<&FunctionBuilder::AllReduceSum>}},
      {"all_reduce_max", {{0, 1}, &AddAllReduce<&FunctionBuilder::AllReduceMax>}},
      {"all_reduce_min", {{0, 1}, &AddAllReduce<&FunctionBuilder::AllReduceMin>}},
      {"all_reduce_mean", {{0, 1}, &AddAllReduce<&FunctionBuilder::AllReduceMean>}},
      {"all_gather",
       {{1, 1},
        [](FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
          return b.AllGather(a, static_cast<int>(n[0]));
        }}},
      {"reduce_scatter",
       {{2, 2},
        [](FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
          return b.ReduceScatter(a, static_cast<int>(n[0]), static_cast<int>(n[1]));
        }}},
      {"all_to_all",
       {{2, 2},
        [](FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
          return b.AllToAll(a, static_cast<int>(n[0]), static_cast<int>(n[1]));
        }}},
      {"broadcast",
       {{2, 2},
        [](FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
          return b.Broadcast(a, static_cast<int>(n[0]), n[1]);
        }}},
      // The axis, then (source, target) pairs.
      {"collective_permute",
       {{3, std::numeric_limits<size_t>::max()},
        [](FunctionBuilder& b, Value a, const std::vector<int64_t>& n) {
          std::vector<std::pair<int64_t, int64_t>> pairs;
          for (size_t i = 1; i + 1 < n.size(); i += 2) pairs.emplace_back(n[i], n[i + 1]);
          return b.CollectivePermute(a, static_cast<int>(n[0]), pairs);
        }}},
  };
  return rows;
}

// Adds collective `op` (a row of CollectiveRows) to `b`.
Result<Value> AddJobCollective(FunctionBuilder& b, const std::vector<Value>& ins,
                               const std::vector<Value>& ops, const JobSpec::OpSpec& op,
                               const CollectiveRow& row) {
  const auto [least, most] = row.numbers;
  const size_t numbers = op.args.empty() ? 0 : op.args.size() - 1;
  const bool pairs_whole = op.op != "collective_permute" || numbers % 2 == 1;
  if (op.args.empty() || numbers < least || numbers > most || !pairs_whole) {
    return InvalidArgument(fmt::format("op '{}' takes a value and {}", op.op,
                                       op.op == "collective_permute"
                                           ? "a mesh axis, then (source, target) pairs"
                                       : least == most ? fmt::format("{} whole numbers", least)
                                                       : "an optional mesh axis"));
  }
  std::optional<double> scalar;
  ATOLL_ASSIGN_OR_RETURN(Value a, Operand(ins, ops, op.args[0], scalar));
  if (scalar) return InvalidArgument("op '" + op.op + "': the first argument must be a value");
  std::vector<int64_t> whole;
  for (size_t i = 1; i < op.args.size(); ++i) {
    std::optional<double> number;
    ATOLL_RETURN_IF_ERROR(Operand(ins, ops, op.args[i], number).status());
    if (!number || *number != std::trunc(*number) || std::abs(*number) > (1 << 30)) {
      return InvalidArgument(
          fmt::format("op '{}': argument {} ('{}') must be a whole number", op.op, i, op.args[i]));
    }
    whole.push_back(static_cast<int64_t>(*number));
  }
  return row.add(b, a, whole);
}

// A cast: a value and the name of a dtype.
Result<Value> AddCast(FunctionBuilder& b, const std::vector<Value>& ins,
                      const std::vector<Value>& ops, const JobSpec::OpSpec& op) {
  if (op.args.size() != 2) {
    return InvalidArgument(
        fmt::format("op 'cast' takes 2 args (a value and a dtype), got {}", op.args.size()));
  }
  std::optional<double> scalar;
  ATOLL_ASSIGN_OR_RETURN(Value x, Operand(ins, ops, op.args[0], scalar));
  if (scalar) return InvalidArgument("op 'cast': the first argument must be a value");
  ATOLL_ASSIGN_OR_RETURN(DType dtype, ParseDType(op.args[1]));
  return b.Cast(x, dtype);
}

// Adds `op` to `b`: a cast (above), a unary op (a row of atoll/unary_ops.def, by its name) takes
// one value; add, sub, mul and div two values or a value and a number; matmul two values; spin a
// value and microseconds; a collective what its row of CollectiveRows says.
Result<Value> AddJobOp(FunctionBuilder& b, const std::vector<Value>& ins,
                       const std::vector<Value>& ops, const JobSpec::OpSpec& op) {
  if (auto row = CollectiveRows().find(op.op); row != CollectiveRows().end()) {
    return AddJobCollective(b, ins, ops, op, row->second);
  }
  using Unary = Value (FunctionBuilder::*)(Value);
  static const std::map<std::string, Unary, std::less<>> kUnary = {
#define ATOLL_UNARY_OP(Name, name) {name, &FunctionBuilder::Name},
#include "atoll/unary_ops.def"
  };
  if (op.op == "cast") return AddCast(b, ins, ops, op);
  const auto unary = kUnary.find(op.op);
  const size_t arity = unary != kUnary.end() ? 1 : 2;
  if (op.args.size() != arity) {
    return InvalidArgument(fmt::format("op '{}' takes {} arg{}, got {}", op.op, arity,
                                       arity == 1 ? "" : "s", op.args.size()));
  }
  std::optional<double> sa, sb;
  ATOLL_ASSIGN_OR_RETURN(Value a, Operand(ins, ops, op.args[0], sa));
  Value bv;
  if (arity == 2) {
    ATOLL_ASSIGN_OR_RETURN(bv, Operand(ins, ops, op.args[1], sb));
  }
  if (sa) return InvalidArgument("op '" + op.op + "': the first argument must be a value");
  if (unary != kUnary.end()) return (b.*(unary->second))(a);
  using Binary = Value (FunctionBuilder::*)(Value, Value);
  using WithScalar = Value (FunctionBuilder::*)(Value, double);
  static const std::map<std::string, std::pair<Binary, WithScalar>, std::less<>> kElementwise = {
      {"add", {&FunctionBuilder::Add, &FunctionBuilder::Add}},
      {"sub", {&FunctionBuilder::Sub, &FunctionBuilder::Sub}},
      {"mul", {&FunctionBuilder::Mul, &FunctionBuilder::Mul}},
      {"div", {&FunctionBuilder::Div, &FunctionBuilder::Div}},
  };
  if (auto it = kElementwise.find(op.op); it != kElementwise.end()) {
    return sb ? (b.*(it->second.second))(a, *sb) : (b.*(it->second.first))(a, bv);
  }
  if (op.op == "matmul" && !sb) return b.Matmul(a, bv);
  if (op.op == "spin" && sb) return b.Spin(a, *sb);
  return InvalidArgument("unknown op '" + op.op + "' or wrong argument kinds");
}

}  // namespace

Result<FunctionBuilder> BuildJobFunction(const JobSpec::FunctionSpec& spec) {
  FunctionBuilder b(spec.name);
  std::vector<Value> ins, ops;
  for (const auto& in : spec.inputs) ins.push_back(b.Input(in.dtype, in.shape, in.sharding));
  for (size_t j = 0; j < spec.ops.size(); ++j) {
    auto v = AddJobOp(b, ins, ops, spec.ops[j]);
    if (!v.ok()) return v.status().WithContext(fmt::format("function '{}' op {}", spec.name, j));
    ops.push_back(*v);
  }
  if (spec.outputs.empty()) {
    if (ops.empty()) return InvalidArgument("function '" + spec.name + "' has no ops");
    b.Output(ops.back());
  }
  for (const auto& out : spec.outputs) {
    std::optional<double> scalar;
    ATOLL_ASSIGN_OR_RETURN(Value v, Operand(ins, ops, out, scalar));
    if (scalar) return InvalidArgument("function '" + spec.name + "': an output is a number");
    b.Output(v);
  }
  ATOLL_RETURN_IF_ERROR(b.status());
  return b;
}

namespace {

// The job's program over its registered `functions`. A call whose arguments do not fit its
// function ends the tracing there, with the builder's error: it names the call by its index
// (the call's place in [program] calls) and its function, the argument and both types.
Result<Program> TraceJob(const JobSpec& job, const std::map<std::string, Function>& functions) {
  ProgramBuilder p;
  std::map<std::string, Traced> values;
  for (const auto& a : job.args) values[a.name] = p.Arg(a.dtype, a.shape);
  for (size_t k = 0; k < job.calls.size(); ++k) {
    const JobSpec::CallSpec& c = job.calls[k];
    std::vector<Traced> args;
    for (const auto& a : c.args) args.push_back(values.at(a));  // ParseJob checked every name
    std::vector<Traced> outs = p.Call(functions.at(c.fn), args);
    ATOLL_RETURN_IF_ERROR(p.status());
    if (outs.size() != c.outs.size()) {
      return InvalidArgument(fmt::format("call {} of '{}' names {} outputs; the function has {}", k,
                                         c.fn, c.outs.size(), outs.size()));
    }
    for (size_t o = 0; o < outs.size(); ++o) values[c.outs[o]] = outs[o];
  }
  std::vector<Traced> returns;
  for (const auto& r : job.returns) returns.push_back(values.at(r));
  p.Return(returns);
  return p.Build();
}

}  // namespace

Result<JobResult> RunJob(Client& client, const JobSpec& job, std::chrono::milliseconds timeout,
                         const StepCallback& on_step) {
  // Every function is built before the cluster is asked for anything, so that a mistake in
  // one costs no slice.
  std::vector<FunctionBuilder> builders;
  for (const auto& f : job.functions) {
    ATOLL_ASSIGN_OR_RETURN(FunctionBuilder builder, BuildJobFunction(f));
    builders.push_back(std::move(builder));
  }
  std::map<std::string, Slice> slices;
  for (const auto& s : job.slices) {
    const SliceOptions where{.island = s.island, .kind = s.kind};
    auto slice = s.mesh.empty() ? client.CreateSlice(s.devices, where)
                                : client.CreateMeshSlice(s.mesh, where);
    if (!slice.ok()) return slice.status().WithContext("slice '" + s.name + "'");
    slices.emplace(s.name, *slice);
  }
  std::map<std::string, Function> functions;
  for (size_t i = 0; i < job.functions.size(); ++i) {
    const auto& f = job.functions[i];
    auto fn = client.Register(builders[i], slices.at(f.slice));
    if (!fn.ok()) return fn.status().WithContext("function '" + f.name + "'");
    functions.emplace(f.name, *fn);
  }
  ATOLL_ASSIGN_OR_RETURN(Program program, TraceJob(job, functions));
  std::vector<Tensor> outputs;
  for (uint64_t step = 1; step <= job.steps; ++step) {
    auto ran = [&]() -> Status {
      ATOLL_ASSIGN_OR_RETURN(Run run, client.Submit(program, std::vector<Input>(job.inputs.begin(),
                                                                                job.inputs.end())));
      ATOLL_ASSIGN_OR_RETURN(outputs, run.Wait(timeout));
      return Status::Ok();
    }();
    if (!ran.ok() && job.steps > 1) {
      return ran.WithContext(fmt::format("step {} of {}", step, job.steps));
    }
    ATOLL_RETURN_IF_ERROR(ran);
    if (on_step) on_step(step, job.steps);
  }
  return JobResult{job.returns, std::move(outputs)};
}

}  // namespace atl
