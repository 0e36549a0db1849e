// atoll_gc_client: a client process for the garbage-collection test. It connects to the RM
// given as its argument, runs a program on a slice spanning two hosts, so that it owns
// objects in both hosts' object stores (its argument shards and its result shards), prints
// "ready <client id>" and then waits to be killed. It exits by itself after 60 s, so that a
// test that dies first leaves nothing behind; exit 1 (with the error) if anything fails.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "atoll/client.h"

namespace {

atl::Status Run(const char* rm) {
  using namespace std::chrono_literals;
  ATOLL_ASSIGN_OR_RETURN(auto client,
                         atl::Client::Connect({.rm_endpoint = rm, .name = "gc-client"}));
  ATOLL_ASSIGN_OR_RETURN(atl::Slice slice, client->CreateSlice(2));
  atl::FunctionBuilder b("double");
  b.Output(b.Mul(b.Input(atl::DType::kF32, {4}), 2.0));
  ATOLL_ASSIGN_OR_RETURN(atl::Function f, client->Register(b, slice));
  atl::ProgramBuilder p;
  p.Return({p.Call(f, {p.Arg(atl::DType::kF32, {4})})[0]});
  ATOLL_ASSIGN_OR_RETURN(atl::Program program, p.Build());
  ATOLL_ASSIGN_OR_RETURN(atl::Run run,
                         client->Submit(program, {atl::Tensor::F32({4}, {1, 2, 3, 4})}));
  ATOLL_RETURN_IF_ERROR(run.Wait(30s).status());
  std::printf("ready %llu\n", static_cast<unsigned long long>(client->id()));
  std::fflush(stdout);
  std::this_thread::sleep_for(60s);  // holding `run`: its objects stay owned until then
  return atl::DeadlineExceeded("nobody killed this client within 60 s");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s RM_ENDPOINT\n", argv[0]);
    return 2;
  }
  const atl::Status status = Run(argv[1]);
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}
