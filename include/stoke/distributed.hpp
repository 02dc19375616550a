// Data-parallel training: the communicator seam (allreduce of the flat
// gradient block, broadcast, barrier) and the epoch sharding policy.
//
// Collectives run on the field's libraries, never on a protocol of stoke's
// own: Gloo (TCP) between CPU ranks. Ranks meet through a rendezvous store
// that Gloo provides: a directory every rank can reach (`file:DIR`, one
// machine or a shared file system) or a Redis server (`redis:HOST[:PORT]`).
//
// Rank and world size come from the variables the usual launchers set
// (torchrun's RANK / WORLD_SIZE / LOCAL_RANK, Open MPI's OMPI_COMM_WORLD_*),
// read once by DistributedOptions::from_environment() at the application's
// entry point; nothing below it reads the environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/export.hpp"
#include "stoke/shards.hpp"

namespace stoke {

// A collective failed: a peer rank exited or stopped answering within the
// timeout, or the rendezvous could not complete. The message names this
// rank, the operation, the cause and the peer at fault (when Gloo's error
// or the collective's pattern tells which) with the address, machine and
// process id it registered.
class STOKE_API CommunicationError : public Error {
 public:
  CommunicationError(const std::string& message, int rank)
      : Error(ErrorCode::kCommunication, message), rank_(rank) {}
  // The rank that reported the failure.
  int rank() const noexcept { return rank_; }

 private:
  int rank_;
};

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // index on this machine (picks the device of a list)
  // Where ranks meet: "file:DIR" or "redis:HOST[:PORT]". Required when
  // world_size > 1.
  std::string store;
  // Scopes the keys of one run in a shared store (two runs on one Redis).
  std::string run_id = "stoke";
  // Network address ranks listen on (this machine's address other machines
  // reach; 127.0.0.1 for ranks on one machine).
  std::string hostname = "127.0.0.1";
  // Bound on every collective and on the rendezvous: a peer that does not
  // answer within it (killed, hung, out of memory) fails the call on every
  // other rank with a CommunicationError instead of a hang.
  double timeout_seconds = 60.0;

  // RANK, WORLD_SIZE, LOCAL_RANK (torchrun) or OMPI_COMM_WORLD_RANK,
  // OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (mpirun);
  // STOKE_DIST_STORE, STOKE_DIST_RUN_ID, STOKE_DIST_HOST and
  // STOKE_DIST_TIMEOUT. Unset: a single rank. ConfigError naming the
  // variable for a malformed value or a rank outside the world.
  STOKE_API static DistributedOptions from_environment();
  // ConfigError naming the field for an impossible combination.
  STOKE_API void validate() const;
};

// Collectives over the ranks of one run. Every rank calls the same
// collectives in the same order with the same sizes. Calls block until the
// collective has completed on this rank.
class STOKE_API Communicator {
 public:
  virtual ~Communicator();
  virtual int rank() const noexcept = 0;
  virtual int world_size() const noexcept = 0;
  // "local" or "gloo/tcp".
  virtual std::string name() const = 0;

  // data = the element-wise sum over ranks (every rank gets the result).
  virtual void allreduce_sum(std::span<float> data) = 0;
  // data = root's data on every rank.
  virtual void broadcast(std::span<float> data, int root) = 0;
  virtual void broadcast_bytes(std::span<std::uint8_t> data, int root) = 0;
  virtual void barrier() = 0;
  // Leaves this rank's reason for failing where the other ranks look when
  // their next collective fails (the file store's directory), so that their
  // error names it. Never throws; a no-op where the store cannot hold it.
  virtual void report_failure(const std::string& cause) noexcept { (void)cause; }
  // The bound on every collective (DistributedOptions::timeout_seconds); a
  // device group made beside this communicator uses the same bound.
  virtual double timeout_seconds() const noexcept { return 60.0; }

  // The element-wise mean over ranks: allreduce_sum, then * 1/world_size.
  void allreduce_mean(std::span<float> data);

  // Seconds spent inside collectives since construction (the profiler's
  // communication stage).
  double seconds() const noexcept { return seconds_; }

 protected:
  double seconds_ = 0;
};

// world_size 1: a communicator whose collectives return at once. Otherwise
// Gloo over TCP after a rendezvous through options.store, where every rank
// registers its hostname (address), machine name and process id for the
// others' error messages; CommunicationError naming the ranks that did not
// arrive within the timeout, Unsupported when this build has no Gloo.
STOKE_API std::unique_ptr<Communicator> make_communicator(const DistributedOptions& options);
// True when this build can run collectives between processes.
STOKE_API bool distributed_available() noexcept;

}  // namespace stoke
