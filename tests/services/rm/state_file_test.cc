// The RM's state file: what is written is read back whole; liveness and connections are
// not kept; a missing, unreadable, truncated, foreign or garbage file gives an error naming
// it, never a crash; a failed write leaves the previous file whole. Functions appended to
// its journal are read back after it, once; a record cut short ends the journal.
#include "services/rm/state_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "tests/status_matchers.h"

namespace atl::rm {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A state with something in every part: two islands with a scheduler each, three hosts,
// two clients, two slices (one spanning hosts), a function with an op, moved counters.
RmState SampleState() {
  RmState s;
  s.scheduler_by_island = {{"a", "tcp://10.0.0.1:5601"}, {"b", "tcp://10.0.0.2:5601"}};
  const std::vector<std::pair<std::string, std::string>> hosts = {
      {"h0", "a"}, {"h1", "a"}, {"h2", "b"}};
  for (const auto& [name, island] : hosts) {
    RmState::Host& h = s.hosts[name];
    h.name = name;
    h.island = island;
    h.control_endpoint = "tcp://" + name + ":1";
    h.data_endpoint = "tcp://" + name + ":2";
    h.store_endpoint = "tcp://" + name + ":3";
    h.store_instance = 0x5eed0000 + h.store_endpoint.size();
    for (uint32_t i = 0; i < 2; ++i) {
      const auto id = static_cast<uint32_t>(s.devices.size());
      s.devices.push_back({id, name, i, {island == "a" ? "cpu" : "gpu", (id + 1) << 20}, 0});
      h.device_ids.push_back(id);
    }
  }
  s.clients[3].name = "trainer";
  s.clients[3].routing_id = "client-0123456789abcdef";
  s.clients[5].name = "server";
  s.slices[2] = {2, 3, "a", {1, 2, 0}, 4};
  s.slices[4] = {4, 5, "b", {5}, 0};
  for (const auto& [id, slice] : s.slices) {
    for (uint32_t d : slice.device_ids) s.devices[d].slices++;
  }
  ir::FunctionDef def;
  def.name = "double";
  def.inputs = {ir::SplitType(DType::kF32, {6, 4}, 0)};
  def.ops = {{ir::OpCode::kMul,
              {{ir::Operand::kInput, 0}, {ir::Operand::kScalar, 0, 2.0}},
              0.0,
              def.inputs[0]}};
  def.outputs = {{ir::Operand::kOp, 0}};
  def.mesh = {3};
  s.functions[7] = {3, 2, def};
  s.next_slice_id = 5;
  s.next_client_id = 6;
  s.next_function_id = 8;
  return s;
}

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("atoll-state-file-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "rm.state").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteBytes(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string ReadBytes() {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Reading the file fails with `code`, naming the file.
  void ExpectRefused(Code code, const std::string& why) {
    auto read = ReadStateFile(path_);
    ASSERT_FALSE(read.ok()) << why;
    EXPECT_EQ(read.status().code(), code) << why << ": " << read.status().ToString();
    EXPECT_THAT(read.status().message(), HasSubstr(path_)) << why;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StateFileTest, WhatIsWrittenIsReadBack) {
  const RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->scheduler_by_island, state.scheduler_by_island);
  EXPECT_EQ(read->hosts, state.hosts);
  EXPECT_EQ(read->devices, state.devices);
  EXPECT_EQ(read->clients, state.clients);
  EXPECT_EQ(read->slices, state.slices);
  EXPECT_EQ(read->functions, state.functions);
  EXPECT_EQ(read->next_slice_id, 5u);
  EXPECT_EQ(read->next_client_id, 6u);
  EXPECT_EQ(read->next_function_id, 8u);
  EXPECT_TRUE(*read == state) << "a part of the state not compared above differs";
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

// Islands that joined at run time (a scheduler, or only an executor, registered for them)
// are known to a restarted RM from what the file keeps, after the configuration's own.
TEST_F(StateFileTest, IslandsThatJoinedAtRunTimeAreKnownAgainAfterARestart) {
  RmState state = SampleState();
  RmState::Host& joined = state.hosts["h9"];
  joined.name = "h9";
  joined.island = "c";  // no scheduler yet
  joined.device_ids = {static_cast<uint32_t>(state.devices.size())};
  state.devices.push_back({joined.device_ids[0], "h9", 0, {"cpu", 1 << 20}, 0});
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(IslandNames(*read, {"z", "b"}), (std::vector<std::string>{"z", "b", "a", "c"}));
  EXPECT_EQ(IslandNames(RmState{}, {"z"}), (std::vector<std::string>{"z"}));
}

// The state of the layout tests, and its file written field by field. `appended`: with the
// fields added at the end of records since version 1 (a host's store instance, a client's
// routing id, a host's drained mark), which a file without them reads as their defaults.
RmState LayoutState() {
  RmState state;
  state.scheduler_by_island["a"] = "tcp://s";
  RmState::Host& host = state.hosts["h0"];
  host.name = "h0";
  host.island = "a";
  host.control_endpoint = "tcp://h0:1";
  host.data_endpoint = "tcp://h0:2";
  host.store_endpoint = "tcp://h0:3";
  host.device_ids = {0};
  host.store_instance = 77;
  host.drained = true;
  state.devices.push_back({0, "h0", 0, {"cpu", 1024}, 1});
  state.clients[3].name = "trainer";
  state.clients[3].routing_id = "client-3";
  state.clients[3].user_id = "client:alice";
  state.slices[2] = {2, 3, "a", {0}, 2};
  state.next_slice_id = 3;
  state.next_client_id = 4;
  return state;
}

std::string LayoutBytes(bool appended) {
  msgpack::sbuffer want;
  msgpack::packer<msgpack::sbuffer> pack(want);
  pack.pack_array(10);
  pack.pack(1);      // the version
  pack.pack_map(1);  // hosts: name, island, control, data and store endpoints, devices
  pack.pack(std::string("h0"));
  pack.pack_array(appended ? 8 : 6);
  for (const char* field : {"h0", "a", "tcp://h0:1", "tcp://h0:2", "tcp://h0:3"}) {
    pack.pack(std::string(field));
  }
  pack.pack(std::vector<uint32_t>{0});
  if (appended) pack.pack(77);    // the store's instance
  if (appended) pack.pack(true);  // drained
  pack.pack_array(1);             // devices: id, host, local index, (kind, memory), slices
  pack.pack_array(5);
  pack.pack(0);
  pack.pack(std::string("h0"));
  pack.pack(0);
  pack.pack_array(2);
  pack.pack(std::string("cpu"));
  pack.pack(1024);
  pack.pack(1);
  pack.pack(std::map<std::string, std::string>{{"a", "tcp://s"}});  // schedulers
  pack.pack_map(1);  // clients: name, routing id, user id
  pack.pack(3);
  pack.pack_array(appended ? 3 : 1);
  pack.pack(std::string("trainer"));
  if (appended) pack.pack(std::string("client-3"));
  if (appended) pack.pack(std::string("client:alice"));
  pack.pack_map(1);  // slices: id, client, island, devices, mapping
  pack.pack(2);
  pack.pack_array(appended ? 5 : 4);
  pack.pack(2);
  pack.pack(3);
  pack.pack(std::string("a"));
  pack.pack(std::vector<uint32_t>{0});
  if (appended) pack.pack(2);  // remapped twice
  pack.pack_map(0);            // functions
  pack.pack(3);                // the next slice, client and function ids
  pack.pack(4);
  pack.pack(1);
  return std::string(want.data(), want.size());
}

// A restarted RM reads what an earlier one wrote, so a change of any record's fields or
// their order must come with a new version; fields may only be appended.
TEST_F(StateFileTest, TheLayoutIsVersionOne) {
  ASSERT_THAT(WriteStateFile(path_, LayoutState()), IsOk());
  EXPECT_EQ(ReadBytes(), LayoutBytes(/*appended=*/true));
}

TEST_F(StateFileTest, AVersionOneFileWithoutTheAppendedFieldsReadsThemAsDefaults) {
  {
    std::ofstream out(path_, std::ios::binary);
    out << LayoutBytes(/*appended=*/false);
  }
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  RmState want = LayoutState();
  want.hosts.at("h0").store_instance = 0;
  want.hosts.at("h0").drained = false;
  want.clients.at(3).routing_id.clear();
  want.clients.at(3).user_id.clear();
  want.slices.at(2).mapping = 0;
  EXPECT_TRUE(*read == want);
}

TEST_F(StateFileTest, AnEmptyStateIsReadBackEmpty) {
  ASSERT_THAT(WriteStateFile(path_, RmState{}), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(*read == RmState{});
}

TEST_F(StateFileTest, LivenessAndConnectionsAreNotKept) {
  RmState state = SampleState();
  RmState::Host& h0 = state.hosts.at("h0");
  h0.alive = false;
  h0.routing_id = "executor-h0";
  h0.last_heard = Clock::now();
  h0.held.push_back({9, proto::Compile{7, 3, state.functions.at(7).def, {}, 2}});
  h0.store_alive = false;
  h0.store_last_heard = Clock::now();
  state.schedulers["a"] = {Clock::now(), false};
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(*read == SampleState());
}

TEST_F(StateFileTest, ALaterWriteReplacesTheEarlierOne) {
  RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  state.slices.erase(4);
  state.devices[5].slices = 0;
  state.next_slice_id = 11;
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->slices.count(4), 0u);
  EXPECT_EQ(read->next_slice_id, 11u);
}

TEST_F(StateFileTest, AFailedWriteLeavesThePreviousFileWhole) {
  ASSERT_THAT(WriteStateFile(path_, SampleState()), IsOk());
  fs::create_directory(path_ + ".tmp");  // the temporary file cannot be opened
  Status failed = WriteStateFile(path_, RmState{});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), Code::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("cannot write the state file " + path_));
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(*read == SampleState());

  Status nowhere = WriteStateFile((dir_ / "no-such-dir" / "rm.state").string(), SampleState());
  EXPECT_EQ(nowhere.code(), Code::kUnavailable);
}

TEST_F(StateFileTest, AMissingFileIsNotFound) {
  auto read = ReadStateFile(path_);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kNotFound);
  EXPECT_EQ(read.status().message(), "the state file " + path_ + " does not exist");
}

// A state file given as a folder (a volume mounted where the file should be) is refused
// with an error, not an exception from inside the stream.
TEST_F(StateFileTest, AFolderIsRefused) {
  fs::create_directory(path_);
  ExpectRefused(Code::kInvalidArgument, "a folder");
}

TEST_F(StateFileTest, EveryTruncationIsRefused) {
  ASSERT_THAT(WriteStateFile(path_, SampleState()), IsOk());
  const std::string whole = ReadBytes();
  ASSERT_GT(whole.size(), 100u);
  for (size_t n = 0; n < whole.size(); ++n) {
    WriteBytes(whole.substr(0, n));
    ExpectRefused(Code::kInvalidArgument, "first " + std::to_string(n) + " bytes");
    if (HasFatalFailure()) return;
  }
}

TEST_F(StateFileTest, GarbageIsRefused) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<size_t> length(1, 64);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes(length(rng), '\0');
    for (char& c : bytes) c = static_cast<char>(byte(rng));
    WriteBytes(bytes);
    ExpectRefused(Code::kInvalidArgument, "garbage trial " + std::to_string(trial));
    if (HasFatalFailure()) return;
  }
}

TEST_F(StateFileTest, HeadersAnnouncingMoreThanTheFileHoldsAreRefused) {
  // An array, a map, a string and a bin of 2^32-1 entries or bytes, with none following.
  for (const std::string bytes :
       {"\xdd\xff\xff\xff\xff", "\xdf\xff\xff\xff\xff", "\xdb\xff\xff\xff\xff",
        "\xc6\xff\xff\xff\xff", "\x9a\xdd\xff\xff\xff\xff"}) {
    WriteBytes(bytes);
    ExpectRefused(Code::kInvalidArgument, "a header of " + std::to_string(bytes.size()) +
                                              " bytes announcing 2^32-1 entries");
  }
}

TEST_F(StateFileTest, OtherFormatsAndVersionsAreRefused) {
  WriteBytes("\xa5hello");  // msgpack, but a string
  ExpectRefused(Code::kInvalidArgument, "a string");
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pack(buffer);
  pack.pack_array(10);
  pack.pack(uint32_t{2});
  for (int i = 0; i < 9; ++i) pack.pack_nil();
  WriteBytes(std::string(buffer.data(), buffer.size()));
  ExpectRefused(Code::kInvalidArgument, "version 2");
  EXPECT_THAT(ReadStateFile(path_).status().message(),
              HasSubstr("is not an atoll RM state of version 1"));
  buffer.clear();
  pack.pack_array(10);
  pack.pack(uint32_t{1});
  for (int i = 0; i < 9; ++i) pack.pack(std::string("x"));  // fields of the wrong types
  WriteBytes(std::string(buffer.data(), buffer.size()));
  ExpectRefused(Code::kInvalidArgument, "fields of the wrong types");
}

TEST_F(StateFileTest, RecordsNamingWhatTheStateLacksAreRefused) {
  struct Case {
    std::string what;
    void (*corrupt)(RmState&);
    std::string error;
  };
  const std::vector<Case> cases = {
      {"a slice on a device that does not exist",
       [](RmState& s) { s.slices[2].device_ids[1] = 99; }, "slice 2 maps onto unknown device 99"},
      {"a slice on an island without a scheduler",
       [](RmState& s) { s.scheduler_by_island.erase("b"); },
       "slice 4 is on island 'b', which has no scheduler"},
      {"a device on an unknown host", [](RmState& s) { s.devices[4].host = "h9"; },
       "device 4 is on unknown host 'h9'"},
      {"a device out of place", [](RmState& s) { s.devices[3].id = 2; },
       "device 3 is stored as device 2"},
      {"a host listing another's device", [](RmState& s) { s.hosts["h0"].device_ids[1] = 2; },
       "host 'h0' lists device 2, not one of its own"},
  };
  for (const Case& c : cases) {
    RmState state = SampleState();
    c.corrupt(state);
    ASSERT_THAT(WriteStateFile(path_, state), IsOk());
    ExpectRefused(Code::kInvalidArgument, c.what);
    EXPECT_THAT(ReadStateFile(path_).status().message(), HasSubstr(c.error)) << c.what;
  }
}

// The function journal: registrations appended one by one, folded into the next whole write.

TEST_F(StateFileTest, FunctionsAppendedAreReadBackAfterTheWholeState) {
  RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  RmState::Function second = state.functions.at(7);
  second.def.name = "second";
  RmState::Function third = second;
  third.slice = 4;
  third.client = 5;
  ASSERT_THAT(AppendFunction(path_, 8, second), IsOk());
  ASSERT_THAT(AppendFunction(path_, 9, third), IsOk());
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  state.functions[8] = second;
  state.functions[9] = third;
  state.next_function_id = 10;
  EXPECT_EQ(read->functions, state.functions);
  EXPECT_EQ(read->next_function_id, 10u);
  EXPECT_TRUE(*read == state);

  // The next whole write holds them, and the journal is gone.
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  EXPECT_FALSE(fs::exists(path_ + ".functions"));
  auto again = ReadStateFile(path_);
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(*again == state);
}

TEST_F(StateFileTest, AJournalRecordOlderThanTheWholeStateIsNotReplayed) {
  RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  ASSERT_THAT(AppendFunction(path_, 8, state.functions.at(7)), IsOk());
  // Function 8 dropped (its client left) and the whole state written, but the journal's
  // removal failed: the record must not bring it back.
  state.next_function_id = 9;
  const std::string journal = path_ + ".functions";
  const std::string kept = journal + ".kept";
  fs::copy_file(journal, kept);
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  fs::rename(kept, journal);
  auto read = ReadStateFile(path_);
  ASSERT_THAT(read, IsOk());
  EXPECT_FALSE(read->functions.count(8));
  EXPECT_EQ(read->next_function_id, 9u);
}

TEST_F(StateFileTest, ARecordCutShortEndsTheJournal) {
  RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  ASSERT_THAT(AppendFunction(path_, 8, state.functions.at(7)), IsOk());
  const std::string journal = path_ + ".functions";
  const auto one = fs::file_size(journal);
  ASSERT_THAT(AppendFunction(path_, 9, state.functions.at(7)), IsOk());
  std::ifstream in(journal, std::ios::binary);
  const std::string whole{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (auto n = one; n < whole.size(); ++n) {
    std::ofstream(journal, std::ios::binary | std::ios::trunc) << whole.substr(0, n);
    auto read = ReadStateFile(path_);
    ASSERT_THAT(read, IsOk()) << n << " bytes: " << read.status().ToString();
    EXPECT_TRUE(read->functions.count(8)) << n << " bytes";
    EXPECT_FALSE(read->functions.count(9)) << n << " bytes";
    EXPECT_EQ(read->next_function_id, 9u) << n << " bytes";
  }
}

TEST_F(StateFileTest, AJournalOfGarbageOrOfFunctionsOnUnknownSlicesIsRefused) {
  RmState state = SampleState();
  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  RmState::Function stray = state.functions.at(7);
  stray.slice = 99;
  ASSERT_THAT(AppendFunction(path_, 8, stray), IsOk());
  ExpectRefused(Code::kInvalidArgument, "a function on a slice the state lacks");

  ASSERT_THAT(WriteStateFile(path_, state), IsOk());
  std::ofstream(path_ + ".functions", std::ios::binary) << std::string("\xc1\xc1\xc1", 3);
  ExpectRefused(Code::kInvalidArgument, "garbage");
}

}  // namespace
}  // namespace atl::rm
