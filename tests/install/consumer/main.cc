// A program outside the atoll tree: it includes the installed headers, links the installed
// libatoll.so, and calls into it without a cluster. Prints "consumer: ok" and exits 0 when
// every call answered as the API says.
#include <atoll/client.h>

#include <cstdio>

int main() {
  const atl::Tensor t = atl::Tensor::F32({2}, {1, 2});
  atl::FunctionBuilder bad("bad");
  bad.Output(bad.Add(bad.Input(atl::DType::kF32, {2}), bad.Input(atl::DType::kF32, {3})));
  auto client = atl::Client::Connect({});
  const bool ok = t.ToString() == "f32[2] {1, 2}" &&
                  bad.status().code() == atl::Code::kInvalidArgument &&
                  client.status().code() == atl::Code::kInvalidArgument;
  std::printf("consumer: %s (%s; %s; %s)\n", ok ? "ok" : "FAILED", t.ToString().c_str(),
              bad.status().ToString().c_str(), client.status().ToString().c_str());
  return ok ? 0 : 1;
}
