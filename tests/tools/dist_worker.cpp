// One rank of the distributed tests (tests/unit/distributed_test.cpp starts
// several). Rank, world and store come from the launcher's environment, as in
// a real run. argv[1] picks the scenario; exit 0 means it saw what it should.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "distributed/group_id.hpp"
#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"
#include "stoke/distributed.hpp"
#include "stoke/runtime.hpp"
#include "stoke/train.hpp"
#include "unit/dp_training_setup.hpp"
#include "unit/fake_gpu_backend.hpp"

namespace {

int collectives(stoke::Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  std::vector<float> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(rank + 1) * static_cast<float>(i);
  comm.allreduce_sum(data);
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != ranks_sum * static_cast<float>(i)) {
      std::fprintf(stderr, "rank %d: allreduce[%zu] = %g, expected %g\n", rank, i, data[i],
                   ranks_sum * i);
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

// Rank 1 hangs after the first collective (alive, its connections open,
// never answering) for the timeout and 2 s more; the others must get a
// CommunicationError naming it within the timeout.
int peer_hangs(stoke::Communicator& comm) {
  std::vector<float> data(16, 1.0f);
  comm.allreduce_sum(data);
  if (comm.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>(comm.timeout_seconds() + 2));
    return 0;
  }
  try {
    comm.allreduce_sum(data);
  } catch (const stoke::CommunicationError& e) {
    std::printf("rank %d caught: %s\n", comm.rank(), e.what());
    return 0;
  }
  std::fprintf(stderr, "rank %d: no error while rank 1 hung\n", comm.rank());
  return 1;
}

// Rank 0 makes a device-group id (as NCCL's ncclGetUniqueId would: 128
// bytes, different per run); every rank prints the id it received.
int group_id(stoke::Communicator& comm) {
  const auto make = [] {
    std::vector<std::uint8_t> id(stoke::kDeviceGroupIdBytes);
    const auto seed = static_cast<unsigned>(getpid());
    for (std::size_t i = 0; i < id.size(); ++i)
      id[i] = static_cast<std::uint8_t>((seed >> (i % 24)) + 31 * i);
    return id;
  };
  const std::vector<std::uint8_t> id =
      stoke::detail::share_group_id(comm, make, stoke::kDeviceGroupIdBytes);
  std::string hex;
  for (std::uint8_t b : id) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  std::printf("rank %d id %s\n", comm.rank(), hex.c_str());
  return id.size() == stoke::kDeviceGroupIdBytes ? 0 : 1;
}

// Trains the setup of dp_training_setup.hpp on this rank's shard of
// argv[2..3] (IDX images, labels); writes the final parameters to argv[4].<rank>.
// With argv[5] = N, rank 1 asks to stop after its N-th step (argv[6] =
// "epoch-end": at the end of epoch N, after the ranks agreed to go on, as a
// signal landing between two agreements does; argv[6] = "die":
// it is killed there instead).
// "train-small-buckets" / "train-no-buckets": gradient buckets of 128 bytes
// (several per step, sent while backward runs) / one allreduce after backward.
// On a fake GPU (fake_gpu: FakeGpuBackend, which has no device collectives)
// the gradients go through the host, and the run logs so (STOKE_LOG_LEVEL=info).
// bucket_bytes: TrainerOptions::gradient_bucket_bytes (< 0 = the default).
int train(stoke::Communicator& comm, char** argv, int argc, bool fake_gpu = false,
          long bucket_bytes = -1) {
  stoke::nn::ModelSpec spec;
  stoke::LoaderOptions loader;
  stoke::TrainerOptions options;
  stoke::testing::dp_training_setup(spec, loader, options);
  options.communicator = &comm;
  if (bucket_bytes >= 0) options.gradient_bucket_bytes = static_cast<std::size_t>(bucket_bytes);
  const std::string out = argv[4];
  options.stop_checkpoint = out + ".stop.ckpt";
  auto data = stoke::Dataset::from_idx(argv[2], argv[3]);
  stoke::testing::FakeGpuBackend gpu;
  stoke::Backend& backend = fake_gpu ? static_cast<stoke::Backend&>(gpu) : stoke::cpu_backend();
  auto model = stoke::nn::build_model(backend, spec, 7 + static_cast<std::uint64_t>(comm.rank()));
  stoke::Callbacks callbacks;
  stoke::Trainer* trainer_ptr = nullptr;
  const int stop_at = argc > 5 ? std::atoi(argv[5]) : 0;
  const bool die = argc > 6 && std::strcmp(argv[6], "die") == 0;
  const bool at_epoch_end = argc > 6 && std::strcmp(argv[6], "epoch-end") == 0;
  callbacks.on_epoch = [&](const stoke::EpochRecord& record) {
    if (at_epoch_end && comm.rank() == 1 && record.epoch == stop_at) trainer_ptr->request_stop();
  };
  callbacks.on_step = [&](const stoke::StepInfo& info) {
    if (stop_at > 0 && !at_epoch_end && comm.rank() == 1 &&
        info.step == static_cast<std::uint64_t>(stop_at)) {
      if (die) _exit(9);  // killed mid-run: no destructor, no failure note
      trainer_ptr->request_stop();
    }
  };
  stoke::Trainer trainer(*model, options, callbacks);
  trainer_ptr = &trainer;
  const auto result = trainer.fit(data, &data, loader);
  const std::vector<float> params = model->parameters().to_vector();
  std::FILE* file = std::fopen((out + "." + std::to_string(comm.rank())).c_str(), "wb");
  if (!file || std::fwrite(params.data(), sizeof(float), params.size(), file) != params.size())
    return 5;
  std::fclose(file);
  const auto& last = result.log.epochs.back();
  std::printf(
      "rank %d: %s after %zu epochs, %llu images, val acc %.4f on %llu images, communicate %.1f "
      "%%\n",
      comm.rank(), stoke::to_string(result.reason), result.log.epochs.size(),
      static_cast<unsigned long long>(last.images), last.val_accuracy,
      static_cast<unsigned long long>(last.val_images),
      100.0 * last.profile.share(stoke::Stage::kCommunicate));
  return 0;
}

// Gloo's writes to a closed peer raise SIGPIPE: the communicator ignores it
// where the process left it at its default, and keeps a handler the host set.
extern "C" void host_sigpipe_handler(int) {}

bool sigpipe_is(void (*expected)(int)) {
  struct sigaction current {};
  return sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == expected;
}

int sigpipe_disposition(stoke::Communicator& comm, bool host_handler) {
  comm.barrier();
  if (!sigpipe_is(host_handler ? host_sigpipe_handler : SIG_IGN)) {
    std::fprintf(stderr, "rank %d: SIGPIPE is not %s\n", comm.rank(),
                 host_handler ? "the host's handler" : "ignored");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  try {
    stoke::init();  // the application's entry point: STOKE_* (log level, threads) from the
                    // launcher's environment
    const std::string scenario = argv[1];
    if (scenario == "sigpipe-handler") std::signal(SIGPIPE, host_sigpipe_handler);
    const auto options = stoke::DistributedOptions::from_environment();
    auto comm = stoke::make_communicator(options);
    if (scenario == "sigpipe-default") return sigpipe_disposition(*comm, false);
    if (scenario == "sigpipe-handler") return sigpipe_disposition(*comm, true);
    if (scenario == "collectives") return collectives(*comm);
    if (scenario == "group-id") return group_id(*comm);
    if (scenario == "peer-fails") return peer_fails(*comm, true);
    if (scenario == "peer-killed") return peer_fails(*comm, false);
    if (scenario == "peer-hangs") return peer_hangs(*comm);
    if (scenario == "train" && argc >= 5) return train(*comm, argv, argc);
    if (scenario == "train-fake-gpu" && argc >= 5) return train(*comm, argv, argc, true);
    // Buckets of 32 floats: the tiny model's gradients in several pieces.
    if (scenario == "train-small-buckets" && argc >= 5) return train(*comm, argv, argc, false, 128);
    if (scenario == "train-no-buckets" && argc >= 5) return train(*comm, argv, argc, false, 0);
    return 64;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 70;
  }
}
