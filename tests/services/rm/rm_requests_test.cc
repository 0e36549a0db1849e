// The RM's request table (RmService::MakeRequestTable): who may send what is checked before
// the controller decides, without a socket: services' requests only from members, a
// client's requests only for itself, a service's heartbeat only from a member, and a kind
// the RM does not serve refused by name.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zmq.hpp>

#include "common/proto/codec.h"
#include "services/rm/rm_service.h"
#include "tests/status_matchers.h"

namespace atl::rm {
namespace {

class RmRequestsTest : public ::testing::Test {
 protected:
  // `body` as the RM's socket would hand it over, from a peer whose ZAP user id is `user_id`
  // ("client:alice", "member").
  template <typename T>
  static proto::Incoming From(const std::string& user_id, const T& body) {
    const zmq::message_t frame = proto::EncodeHeader(7, body);
    auto header = proto::DecodeHeader(frame.data(), frame.size());
    EXPECT_THAT(header, IsOk());
    proto::Incoming in;
    in.routing_id = zmq::message_t(std::string("peer"));
    in.header = *header;
    in.sender = {user_id};
    return in;
  }

  zmq::context_t context_;
  RmService rm_{context_, ClusterConfig{}};
};

TEST_F(RmRequestsTest, ServicesRequestsComeOnlyFromMembers) {
  proto::Incoming reg = From("client:alice", proto::RegisterExecutor{});
  EXPECT_THAT(rm_.Dispatch(reg), StatusIs(Code::kPermissionDenied,
                                          "only the cluster's services may register an "
                                          "executor; the sender is client key alice"));
  proto::Incoming drain = From("client:alice", proto::DrainHost{"a0"});
  EXPECT_THAT(rm_.Dispatch(drain), StatusIs(Code::kPermissionDenied, "drain a host"));
  proto::Incoming compiled = From("client:alice", proto::Ok{});
  EXPECT_THAT(rm_.Dispatch(compiled), StatusIs(Code::kPermissionDenied, "answer a compile"));
  proto::Incoming lookup = From("client:alice", proto::LookupOwners{});
  EXPECT_THAT(rm_.Dispatch(lookup), StatusIs(Code::kPermissionDenied, "look up owners"));
}

TEST_F(RmRequestsTest, AServiceHeartbeatComesOnlyFromAMember) {
  proto::Incoming beat = From("client:alice", proto::Heartbeat{proto::Heartbeat::kExecutor, "a0"});
  EXPECT_THAT(rm_.Dispatch(beat), StatusIs(Code::kPermissionDenied, "heartbeat as a service"));
  // From a member it reaches the controller, which knows no host a0.
  proto::Incoming member_beat = From("member", proto::Heartbeat{proto::Heartbeat::kExecutor, "a0"});
  EXPECT_THAT(rm_.Dispatch(member_beat), StatusIs(Code::kNotFound, "host 'a0' is unknown"));
}

TEST_F(RmRequestsTest, AClientsRequestNamesItsClient) {
  proto::Incoming beat = From("client:alice", proto::Heartbeat{proto::Heartbeat::kClient, "x1"});
  EXPECT_THAT(rm_.Dispatch(beat), StatusIs(Code::kInvalidArgument, "not a decimal client id"));
  // A client not connected passes the check; the controller says it is unknown.
  proto::Incoming slice = From("client:alice", proto::CreateSlice{5, 1, "", ""});
  EXPECT_THAT(rm_.Dispatch(slice),
              StatusIs(Code::kNotFound, "create a slice: client 5 is unknown; say HelloClient"));
}

TEST_F(RmRequestsTest, AKindTheRmDoesNotServeIsRefusedByName) {
  proto::Incoming submit = From("member", proto::SubmitProgram{});
  EXPECT_THAT(rm_.Dispatch(submit),
              StatusIs(Code::kInvalidArgument, "the RM does not handle SubmitProgram messages"));
}

}  // namespace
}  // namespace atl::rm
