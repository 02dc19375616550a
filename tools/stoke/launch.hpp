// `stoke train --nproc N`: one process per rank on this machine, started and
// watched by the launcher (the torchrun role). Each rank is this program
// again with the same arguments and RANK, WORLD_SIZE, LOCAL_RANK and a fresh
// STOKE_DIST_STORE in its environment; with a device list (STOKE_GPU_DEVICE,
// from the environment or the config file), rank r gets the list's r-th device.
#pragma once

#include <string>
#include <vector>

namespace stoke_cli {

// True when this process is a rank a launcher started (RANK is set).
bool launched_as_rank();

// Starts `nproc` ranks running `args` (the subcommand's argv without
// --nproc), forwards SIGINT/SIGTERM to them, and waits. When one rank fails,
// the launcher says which and how; the others get `grace_seconds` to end on
// their own (a peer of a rank that exited fails at once and prints its own
// error) and are then killed, each named by its rank: a hung rank is stopped
// a few seconds after its peer timed out, not after another timeout. After an
// agreed stop (status 130, rank 0 writing the stop checkpoint) they get
// STOKE_DIST_TIMEOUT + `grace_seconds`. Returns 0 when every rank succeeded,
// else the first failing rank's status. With more than one entry in
// `devices`, rank r runs with STOKE_GPU_DEVICE=devices[r % size].
int launch_ranks(int nproc, const std::vector<std::string>& args, const std::vector<int>& devices,
                 double grace_seconds = 3);

}  // namespace stoke_cli
