// One rank of the distributed tests (tests/unit/distributed_test.cpp starts
// several). Rank, world and store come from the launcher's environment, as in
// a real run. argv[1] picks the scenario; exit 0 means it saw what it should.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "stoke/distributed.hpp"

namespace {

int collectives(stoke::Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  std::vector<float> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(rank + 1) * static_cast<float>(i);
  comm.allreduce_sum(data);
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != ranks_sum * static_cast<float>(i)) {
      std::fprintf(stderr, "rank %d: allreduce[%zu] = %g, expected %g\n", rank, i, data[i], ranks_sum * i);
      return 1;
    }
  }
  std::vector<float> mean = {static_cast<float>(rank)};
  comm.allreduce_mean(mean);
  if (mean[0] != static_cast<float>(world - 1) / 2.0f) return 2;
  std::vector<float> root_data(7, static_cast<float>(rank == 1 ? 42 : -1));
  comm.broadcast(root_data, 1);
  for (float x : root_data) {
    if (x != 42.0f) return 3;
  }
  comm.barrier();
  std::printf("rank %d ok (%s)\n", rank, comm.name().c_str());
  return 0;
}

// Rank 1 fails (with a reason, or killed without one); the others must get
// a CommunicationError from their next collective, not hang.
int peer_fails(stoke::Communicator& comm, bool leave_reason) {
  std::vector<float> data(16, 1.0f);
  comm.allreduce_sum(data);  // everyone is connected
  if (comm.rank() == 1) {
    if (leave_reason) comm.report_failure("out of memory in step 3 (test)");
    _exit(9);  // no destructor, no goodbye: like a killed process
  }
  try {
    for (int i = 0; i < 1000; ++i) comm.allreduce_sum(data);
  } catch (const stoke::CommunicationError& e) {
    std::printf("rank %d caught: %s\n", comm.rank(), e.what());
    return 0;
  }
  std::fprintf(stderr, "rank %d: no error after the peer failed\n", comm.rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  try {
    const auto options = stoke::DistributedOptions::from_environment();
    auto comm = stoke::make_communicator(options);
    const std::string scenario = argv[1];
    if (scenario == "collectives") return collectives(*comm);
    if (scenario == "peer-fails") return peer_fails(*comm, true);
    if (scenario == "peer-killed") return peer_fails(*comm, false);
    return 64;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 70;
  }
}
