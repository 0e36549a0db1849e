// Checkpoints on a real cluster: futures of a 4-device slice over two hosts saved by the
// stores that hold them, read by numpy as README says, loaded back onto the same layout and
// onto others (a mesh, one device) as futures that feed runs, in every dtype; and the
// refusals a user meets (paths out of the root, missing and corrupt files, a file of another
// dtype than its index says, names, values alone, other clients' futures).
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/common/checkpoint/numpy_python.h"
#include "tests/e2e/cluster_fixture.h"
#include "tests/status_matchers.h"

namespace atl::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class CheckpointTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    client_ = Connect("checkpoints");
    ASSERT_NE(client_, nullptr);
    auto slice = client_->CreateSlice(4, "island0");
    ASSERT_THAT(slice, IsOk());
    slice_ = *slice;
    // make(x, b) = (2x cut by rows, b + 1 replicated).
    FunctionBuilder f("make");
    f.Output(f.Mul(f.Input(DType::kF32, {8, 6}, Sharding::Split(0)), 2.0));
    f.Output(f.Add(f.Input(DType::kF32, {3}, Sharding::Replicated()), 1.0));
    auto make = client_->Register(f, slice_);
    ASSERT_THAT(make, IsOk());
    ProgramBuilder p;
    p.Return(p.Call(*make, {p.Arg(DType::kF32, {8, 6}), p.Arg(DType::kF32, {3})}));
    auto program = p.Build();
    ASSERT_THAT(program, IsOk());
    std::vector<float> x(48);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 10;
    x_ = Tensor::F32({8, 6}, x);
    auto run = client_->Submit(*program, {x_, Tensor::F32({3}, {1, 2, 3})});
    ASSERT_THAT(run, IsOk());
    run_.emplace(std::move(*run));
  }

  // The tensors the tests save: y = 2x (split), r (replicated), step (a value).
  std::vector<std::pair<std::string, Input>> Tensors() const {
    return {{"y", run_->Output(0)}, {"r", run_->Output(1)}, {"step", Tensor::I32({}, {7})}};
  }
  Tensor Y() const {
    std::vector<float> y(48);
    for (size_t i = 0; i < y.size(); ++i) y[i] = 2 * x_.as<float>()[i];
    return Tensor::F32({8, 6}, y);
  }
  // Where this client's checkpoints are: the root, below its key's name.
  static std::string Dir(const std::string& path) {
    return cluster_->checkpoint_root() + "/default/" + path;
  }
  // The first block file of tensor `name` in checkpoint `path`.
  static std::string FirstFile(const std::string& path, const std::string& name) {
    json index = json::parse(std::ifstream(Dir(path) + "/index.json"));
    for (const auto& t : index["tensors"]) {
      if (t["name"] == name) return Dir(path) + "/" + t["blocks"][0]["file"].get<std::string>();
    }
    return "";
  }

  // A future of `x` (f32[8, 6] or any other dtype), cut by rows over the slice: a run of a
  // function that casts it to its own dtype.
  std::optional<atl::Run> RowsOf(const Tensor& x) {
    FunctionBuilder f(std::string("rows_") + std::string(DTypeName(x.dtype())));
    f.Output(f.Cast(f.Input(x.dtype(), x.shape(), Sharding::Split(0)), x.dtype()));
    auto fn = client_->Register(f, slice_);
    EXPECT_THAT(fn, IsOk());
    if (!fn.ok()) return std::nullopt;
    ProgramBuilder p;
    p.Return(p.Call(*fn, {p.Arg(x.dtype(), x.shape())}));
    auto program = p.Build();
    EXPECT_THAT(program, IsOk());
    if (!program.ok()) return std::nullopt;
    auto run = client_->Submit(*program, {x});
    EXPECT_THAT(run, IsOk());
    if (!run.ok()) return std::nullopt;
    return std::move(*run);
  }

  std::unique_ptr<Client> client_;
  Slice slice_;
  Tensor x_;
  std::optional<atl::Run> run_;
};

TEST_F(CheckpointTest, SavedFuturesAreNumpyFilesAndLoadBackAsFuturesThatFeedRuns) {
  const Status saved = client_->Save(Tensors(), "ck/one");
  ASSERT_THAT(saved, IsOk());

  // One file per distinct block: y's four row blocks, one replica of r, the value.
  size_t npy = 0;
  for (const auto& e : std::filesystem::directory_iterator(Dir("ck/one"))) {
    npy += e.path().extension() == ".npy";
  }
  EXPECT_EQ(npy, 6u);
  if (HaveNumpy()) {
    const CommandResult read = RunCommand({kPython, kReadCheckpointScript, Dir("ck/one")});
    ASSERT_EQ(read.exit_code, 0) << read.Describe();
    const json got = json::parse(read.out);
    EXPECT_EQ(got["y"]["descr"], "<f4");
    EXPECT_EQ(got["y"]["shape"], json({8, 6}));
    const Tensor y = Y();
    EXPECT_EQ(got["y"]["values"].get<std::vector<float>>(),
              std::vector<float>(y.as<float>().begin(), y.as<float>().end()));
    EXPECT_EQ(got["r"]["values"], json({2, 3, 4}));
    EXPECT_EQ(got["step"]["descr"], "<i4");
    EXPECT_EQ(got["step"]["values"], json({7}));
  }

  // `atoll checkpoint ls` shows the same, from the files: by directory, or by the client's
  // path below the state dir's checkpoint root.
  for (const auto& argv :
       {std::vector<std::string>{ATOLL_BIN_DIR "/atoll", "checkpoint", "ls", Dir("ck/one")},
        std::vector<std::string>{ATOLL_BIN_DIR "/atoll", "--state-dir", *state_dir_, "checkpoint",
                                 "ls", "ck/one"}}) {
    const CommandResult ls = RunCommand(argv);
    ASSERT_EQ(ls.exit_code, 0) << ls.Describe();
    EXPECT_NE(ls.out.find("  y                f32[8,6]         mesh [4]      split [0,-1]     "
                          "4 blocks, 704 bytes, 4 here\n"),
              std::string::npos)
        << ls.out;
    EXPECT_NE(ls.out.find("  step             i32[]            mesh [1]      split []         "
                          "1 blocks"),
              std::string::npos)
        << ls.out;
  }

  auto loaded = client_->Load("ck/one", slice_);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->names, (std::vector<std::string>{"y", "r", "step"}));
  auto values = loaded->run.Wait(30s);
  ASSERT_THAT(values, IsOk());
  EXPECT_EQ((*values)[0], Y());
  EXPECT_EQ((*values)[1], Tensor::F32({3}, {2, 3, 4}));
  EXPECT_EQ((*values)[2], Tensor::I32({}, {7}));

  // A loaded future feeds a function laid out as it was saved.
  FunctionBuilder f("half");
  f.Output(f.Mul(f.Input(DType::kF32, {8, 6}, Sharding::Split(0)), 0.5));
  auto half = client_->Register(f, slice_);
  ASSERT_THAT(half, IsOk());
  ProgramBuilder p;
  p.Return({p.Call(*half, {p.Arg(DType::kF32, {8, 6})})[0]});
  auto program = p.Build();
  ASSERT_THAT(program, IsOk());
  auto run = client_->Submit(*program, {loaded->run.Output(0)});
  ASSERT_THAT(run, IsOk());
  auto out = run->Wait(30s);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ((*out)[0], x_);
}

TEST_F(CheckpointTest, ATensorLoadsOntoAnotherLayout) {
  const Status saved = client_->Save(Tensors(), "ck/layouts");
  ASSERT_THAT(saved, IsOk());
  // y was 4 row blocks over 4 devices; here 2 x 2 blocks over a 2 x 2 mesh, and whole on
  // one device of the other island, with r.
  auto mesh = client_->CreateMeshSlice({2, 2}, "island0");
  auto one = client_->CreateSlice(1, "island1");
  ASSERT_TRUE(mesh.ok() && one.ok());
  LoadOptions blocks{.names = {"y"}, .shardings = {{"y", Sharding::Axes({0, 1})}}};
  auto on_mesh = client_->Load("ck/layouts", *mesh, blocks);
  ASSERT_THAT(on_mesh, IsOk());
  auto on_one = client_->Load("ck/layouts", *one, {.names = {"r", "y"}});
  ASSERT_THAT(on_one, IsOk());
  auto a = on_mesh->run.Wait(30s);
  auto b = on_one->run.Wait(30s);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  EXPECT_EQ((*a)[0], Y());
  EXPECT_EQ((*b)[0], Tensor::F32({3}, {2, 3, 4}));
  EXPECT_EQ((*b)[1], Y());

  // As saved (cut along mesh axis 0) it does not fit a mesh whose axis 0 does not divide it.
  auto three = client_->CreateSlice(3, "island1");
  ASSERT_THAT(three, IsOk());
  auto refused = client_->Load("ck/layouts", *three, {.names = {"y"}});
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("does not divide"), std::string::npos)
      << refused.status().ToString();
}

// A tensor of each dtype, [8, 6], with values its dtype holds exactly and i64's beyond
// what a double holds.
struct DTypeCase {
  DType dtype;
  const char* descr;  // of its .npy files
  Tensor x;
};
std::vector<DTypeCase> DTypeCases() {
  std::vector<double> d(48);
  std::vector<int32_t> i32(48);
  std::vector<int64_t> i64(48);
  for (size_t i = 0; i < d.size(); ++i) {
    const auto k = static_cast<int64_t>(i) - 20;
    d[i] = 0.375 * static_cast<double>(k) + 1e-3;
    i32[i] = static_cast<int32_t>(k * 104729);
    i64[i] = (int64_t{1} << 62) + 3 * k;
  }
  const auto floats = [&](DType dtype) { return Tensor::FromDoubles(dtype, {8, 6}, d).value(); };
  // Small whole numbers for the narrow integers, each value's parity for bool.
  const auto wholes = [&](DType dtype, int64_t offset, int64_t modulo) {
    std::vector<double> v(48);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<double>(static_cast<int64_t>(i) * 37 % modulo + offset);
    }
    return Tensor::FromDoubles(dtype, {8, 6}, v).value();
  };
  return {{DType::kF32, "<f4", floats(DType::kF32)},
          {DType::kI32, "<i4", Tensor::I32({8, 6}, i32)},
          {DType::kBF16, "bfloat16", floats(DType::kBF16)},
          {DType::kF16, "<f2", floats(DType::kF16)},
          {DType::kF64, "<f8", floats(DType::kF64)},
          {DType::kI64, "<i8", Tensor::I64({8, 6}, i64)},
          {DType::kBool, "|b1", wholes(DType::kBool, 0, 2)},
          {DType::kI8, "|i1", wholes(DType::kI8, -128, 256)},
          {DType::kU8, "|u1", wholes(DType::kU8, 0, 256)},
          {DType::kU32, "<u4", wholes(DType::kU32, 4000000000, 1000003)}};
}

// Each dtype's shards are saved by the stores that hold them and load back bit for bit,
// onto the layout they were saved in and onto a 2 x 2 mesh; numpy reads each with README's
// lines (bf16 read as ml_dtypes.bfloat16).
TEST_F(CheckpointTest, EveryDtypeSavesAndLoadsBackBitForBit) {
  auto mesh = client_->CreateMeshSlice({2, 2}, "island0");
  ASSERT_THAT(mesh, IsOk());
  for (const DTypeCase& c : DTypeCases()) {
    SCOPED_TRACE(DTypeName(c.dtype));
    ASSERT_EQ(c.x.dtype(), c.dtype);
    std::optional<atl::Run> run = RowsOf(c.x);
    ASSERT_TRUE(run.has_value());
    const std::string path = "ck/dtype-" + std::string(DTypeName(c.dtype));
    const Status saved = client_->Save({{"x", run->Output(0)}, {"v", c.x}}, path);
    ASSERT_THAT(saved, IsOk());
    const json index = json::parse(std::ifstream(Dir(path) + "/index.json"));
    for (const auto& t : index["tensors"]) {
      EXPECT_EQ(t["dtype"], DTypeName(c.dtype));
      EXPECT_EQ(t["descr"], c.descr);
    }
    EXPECT_EQ(index["tensors"][0]["blocks"].size(), 4u);

    auto loaded = client_->Load(path, slice_);
    ASSERT_THAT(loaded, IsOk());
    auto values = loaded->run.Wait(30s);
    ASSERT_THAT(values, IsOk());
    EXPECT_EQ((*values)[0], c.x);
    EXPECT_EQ((*values)[1], c.x);
    auto on_mesh =
        client_->Load(path, *mesh, {.names = {"x"}, .shardings = {{"x", Sharding::Axes({0, 1})}}});
    ASSERT_THAT(on_mesh, IsOk());
    auto blocks = on_mesh->run.Wait(0, 30s);
    ASSERT_THAT(blocks, IsOk());
    EXPECT_EQ(*blocks, c.x);

    if (HaveNumpy()) {
      const CommandResult read = RunCommand({kPython, kReadCheckpointScript, Dir(path)});
      ASSERT_EQ(read.exit_code, 0) << read.Describe();
      const json got = json::parse(read.out);
      const json want =
          c.dtype == DType::kI64
              ? json(std::vector<int64_t>(c.x.as<int64_t>().begin(), c.x.as<int64_t>().end()))
              : json(c.x.ToDoubles());
      EXPECT_EQ(got["x"]["values"], want);
      EXPECT_EQ(got["v"]["values"], want);
      EXPECT_EQ(got["x"]["shape"], json({8, 6}));
    }
  }
}

// The dtype an index names must be its files': a bf16 tensor whose index says f16 (with
// f16's descr) is refused by the store that reads the file, and one whose descr is not its
// dtype's by the index's reader.
TEST_F(CheckpointTest, AFileOfAnotherDtypeThanItsIndexSaysIsRefused) {
  const DTypeCase bf16 = DTypeCases()[2];
  ASSERT_EQ(bf16.dtype, DType::kBF16);
  std::optional<atl::Run> run = RowsOf(bf16.x);
  ASSERT_TRUE(run.has_value());
  const Status saved = client_->Save({{"x", run->Output(0)}}, "ck/mismatch");
  ASSERT_THAT(saved, IsOk());
  const std::string index_path = Dir("ck/mismatch") + "/index.json";
  const json index = json::parse(std::ifstream(index_path));
  const auto load_with = [&](const char* dtype, const char* descr) {
    json spoilt = index;
    spoilt["tensors"][0]["dtype"] = dtype;
    spoilt["tensors"][0]["descr"] = descr;
    std::ofstream(index_path, std::ios::trunc) << spoilt.dump();
    return client_->Load("ck/mismatch", slice_).status();
  };
  const Status as_f16 = load_with("f16", "<f2");
  EXPECT_EQ(as_f16.code(), Code::kInvalidArgument) << as_f16.ToString();
  EXPECT_NE(as_f16.message().find("holds bf16[2,6], not the f16[2,6] the index says"),
            std::string::npos)
      << as_f16.ToString();
  const Status descr = load_with("bf16", "<f2");
  EXPECT_EQ(descr.code(), Code::kInvalidArgument) << descr.ToString();
  EXPECT_NE(descr.message().find("bf16 with descr '<f2', not 'bfloat16'"), std::string::npos)
      << descr.ToString();
  const Status whole = load_with("bf16", "<u2");
  EXPECT_THAT(whole, IsOk());
}

TEST_F(CheckpointTest, PathsOutOfTheRootAndBadNamesAreRefused) {
  for (const std::string path : {"/tmp/ck", "../ck", "a/../../ck", ""}) {
    const Status saved = client_->Save(Tensors(), path);
    EXPECT_TRUE(saved.code() == Code::kInvalidArgument || saved.code() == Code::kPermissionDenied)
        << "'" << path << "': " << saved.ToString();
    EXPECT_TRUE(client_->Load(path, slice_).status().code() == Code::kInvalidArgument ||
                client_->Load(path, slice_).status().code() == Code::kPermissionDenied)
        << path;
  }
  const std::string outside = cluster_->checkpoint_root() + "-outside";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directories(Dir(""));
  std::filesystem::create_directory_symlink(outside, Dir("link"));
  EXPECT_EQ(client_->Save(Tensors(), "link/ck").code(), Code::kPermissionDenied);
  EXPECT_TRUE(std::filesystem::is_empty(outside));
  std::filesystem::remove_all(outside);

  EXPECT_EQ(client_->Save({{"a/b", run_->Output(0)}}, "ck/names").code(), Code::kInvalidArgument);
  EXPECT_EQ(client_->Save({{"y", run_->Output(0)}, {"y", run_->Output(1)}}, "ck/names").code(),
            Code::kInvalidArgument);
  const Status values_only = client_->Save({{"step", Tensor::I32({}, {1})}}, "ck/names");
  EXPECT_EQ(values_only.code(), Code::kInvalidArgument) << values_only.ToString();
  EXPECT_NE(values_only.message().find("at least one future"), std::string::npos);

  auto other = Connect("checkpoints-other");
  ASSERT_NE(other, nullptr);
  const Status theirs = other->Save({{"y", run_->Output(0)}}, "ck/theirs");
  EXPECT_EQ(theirs.code(), Code::kInvalidArgument) << theirs.ToString();
}

TEST_F(CheckpointTest, MissingCorruptOrIncompleteCheckpointsAreRefused) {
  auto none = client_->Load("ck/never-saved", slice_);
  EXPECT_EQ(none.status().code(), Code::kNotFound) << none.status().ToString();

  const Status saved = client_->Save(Tensors(), "ck/bad");
  ASSERT_THAT(saved, IsOk());
  auto missing_name = client_->Load("ck/bad", slice_, {.names = {"nope"}});
  EXPECT_EQ(missing_name.status().code(), Code::kNotFound) << missing_name.status().ToString();

  const std::string file = FirstFile("ck/bad", "y");
  std::fstream(file, std::ios::in | std::ios::out | std::ios::binary)
      .seekp(-1, std::ios::end)
      .put('x');
  auto corrupt = client_->Load("ck/bad", slice_, {.names = {"y"}});
  EXPECT_EQ(corrupt.status().code(), Code::kInvalidArgument) << corrupt.status().ToString();
  EXPECT_NE(corrupt.status().message().find("corrupt"), std::string::npos);
  // The tensors whose files are whole still load.
  auto r = client_->Load("ck/bad", slice_, {.names = {"r"}});
  ASSERT_THAT(r, IsOk());

  std::filesystem::remove(file);
  auto gone = client_->Load("ck/bad", slice_, {.names = {"y"}});
  EXPECT_EQ(gone.status().code(), Code::kNotFound) << gone.status().ToString();

  // A save that never reached its index is no checkpoint.
  std::filesystem::remove(Dir("ck/bad/index.json"));
  auto incomplete = client_->Load("ck/bad", slice_);
  EXPECT_EQ(incomplete.status().code(), Code::kNotFound) << incomplete.status().ToString();
  EXPECT_NE(incomplete.status().message().find("no complete checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, SavingOverReplacesTheCheckpointAndItsFiles) {
  const Status saved = client_->Save(Tensors(), "ck/over");
  ASSERT_THAT(saved, IsOk());
  const std::string old_file = FirstFile("ck/over", "y");
  const Status again =
      client_->Save({{"y", run_->Output(0)}, {"step", Tensor::I32({}, {8})}}, "ck/over");
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(std::filesystem::exists(old_file));
  auto loaded = client_->Load("ck/over", slice_);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->names, (std::vector<std::string>{"y", "step"}));
  auto step = loaded->run.Wait(1, 30s);
  ASSERT_THAT(step, IsOk());
  EXPECT_EQ(*step, Tensor::I32({}, {8}));
}

}  // namespace
}  // namespace atl::testing
