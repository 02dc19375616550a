// Who the other ranks of a run are, so that a failed collective names the
// rank at fault instead of "a peer": what each rank registered at the
// rendezvous (the address it listens on, its machine's name, its process id)
// and the address of its end of the connection to this rank, written as Gloo
// writes addresses in its errors ("[10.0.0.2]:4242"). Gloo-free, so that the
// wording is tested without processes.
#pragma once

#include <string>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::detail {

// What a rank registers: its listening address, host name and process id.
struct STOKE_INTERNAL PeerRecord {
  std::string address;
  std::string host;
  long pid = 0;

  // "ADDRESS HOST PID", the form kept in the store; parse() reads it back
  // (an empty record for text in another form).
  std::string serialize() const;
  static PeerRecord parse(const std::string& text);
  // This process, listening on `address`.
  static PeerRecord of_this_process(const std::string& address);
};

// The ranks a collective receives from and sends to, as Gloo's algorithms
// run it (a timeout while receiving names the senders).
struct Exchange {
  std::vector<int> receives_from;
  std::vector<int> sends_to;
};

// Gloo's ring allreduce (gloo/allreduce.cc): rank r receives from r + 1 and
// sends to r - 1.
STOKE_INTERNAL Exchange ring_allreduce_exchange(int rank, int world);
// Gloo's broadcast, a binomial tree over ranks renumbered from the root:
// a rank receives from its parent and sends to its children.
STOKE_INTERNAL Exchange tree_broadcast_exchange(int rank, int world, int root);
// Gloo's dissemination barrier: receives from r - d, sends to r + d, d = 1, 2, 4 ...
STOKE_INTERNAL Exchange dissemination_barrier_exchange(int rank, int world);
// Every other rank both ways (the rendezvous).
STOKE_INTERNAL Exchange full_mesh_exchange(int rank, int world);

class STOKE_INTERNAL PeerDirectory {
 public:
  PeerDirectory(int rank, int world);

  int rank() const noexcept { return rank_; }
  int world() const noexcept { return world_; }
  void set_record(int peer, PeerRecord record);
  // `address`: an address Gloo may print for the peer's connection to this
  // rank, in Gloo's form: the peer's end of the socket, or the listening
  // address it advertised (Gloo keeps that one when the peer connected
  // before this rank read it). A peer may have several.
  void add_socket(int peer, std::string address);

  // "rank 1 (10.0.0.2 on node-b, pid 4242)"; "rank 1" when it registered nothing.
  std::string name(int peer) const;
  // "rank 1 (...)" or "rank 1 (...), rank 3 (...)".
  std::string names(const std::vector<int>& peers) const;
  // The peers an address in `message` belongs to: the one whose connection
  // has that address, else those that registered its host part; none when
  // the message holds no address of a peer.
  std::vector<int> named_in(const std::string& message) const;

 private:
  int rank_, world_;
  std::vector<PeerRecord> records_;
  std::vector<std::vector<std::string>> sockets_;
};

// Why a collective failed, in words that name the peer: `gloo_message` is
// Gloo's exception text, `exchange` the ranks the collective waits on.
// Empty when Gloo's text says nothing this can attribute to a peer.
STOKE_INTERNAL std::string explain_gloo_failure(const PeerDirectory& peers,
                                                const std::string& gloo_message,
                                                const Exchange& exchange, double timeout_seconds);

}  // namespace stoke::detail
