#include "distributed/peer_directory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace stoke::detail {
namespace {

int wrap(int r, int world) {
  return ((r % world) + world) % world;
}

void add_unique(std::vector<int>& ranks, int r) {
  if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
}

// Every "[HOST]" or "[HOST]:PORT" in Gloo's text, as Gloo writes them
// (gloo::transport::tcp::Address::str()).
std::vector<std::string> addresses_in(const std::string& text) {
  std::vector<std::string> found;
  for (std::size_t open = text.find('['); open != std::string::npos;
       open = text.find('[', open + 1)) {
    const std::size_t close = text.find(']', open);
    if (close == std::string::npos) break;
    std::size_t end = close + 1;
    if (end < text.size() && text[end] == ':') {
      ++end;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    }
    found.push_back(text.substr(open, end - open));
  }
  return found;
}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

std::string PeerRecord::serialize() const {
  return address + " " + host + " " + std::to_string(pid);
}

PeerRecord PeerRecord::parse(const std::string& text) {
  PeerRecord r;
  std::istringstream in(text);
  if (!(in >> r.address >> r.host >> r.pid)) return {};
  return r;
}

PeerRecord PeerRecord::of_this_process(const std::string& address) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "?");
  return {address, host, static_cast<long>(getpid())};
}

Exchange ring_allreduce_exchange(int rank, int world) {
  return {{wrap(rank + 1, world)}, {wrap(rank - 1, world)}};
}

Exchange tree_broadcast_exchange(int rank, int world, int root) {
  Exchange e;
  const int vrank = wrap(rank - root, world);
  int highest = -1;  // the highest set bit of vrank: the round it receives in
  for (int bit = 0; (1 << bit) <= vrank; ++bit) {
    if (vrank & (1 << bit)) highest = bit;
  }
  if (vrank > 0) e.receives_from.push_back(wrap((vrank ^ (1 << highest)) + root, world));
  for (int bit = highest + 1; (vrank | (1 << bit)) < world; ++bit)
    e.sends_to.push_back(wrap((vrank | (1 << bit)) + root, world));
  return e;
}

Exchange dissemination_barrier_exchange(int rank, int world) {
  Exchange e;
  for (int d = 1; d < world; d <<= 1) {
    add_unique(e.receives_from, wrap(rank - d, world));
    add_unique(e.sends_to, wrap(rank + d, world));
  }
  return e;
}

Exchange full_mesh_exchange(int rank, int world) {
  Exchange e;
  for (int r = 0; r < world; ++r) {
    if (r == rank) continue;
    e.receives_from.push_back(r);
    e.sends_to.push_back(r);
  }
  return e;
}

PeerDirectory::PeerDirectory(int rank, int world)
    : rank_(rank),
      world_(world),
      records_(static_cast<std::size_t>(world)),
      sockets_(static_cast<std::size_t>(world)) {}

void PeerDirectory::set_record(int peer, PeerRecord record) {
  records_.at(static_cast<std::size_t>(peer)) = std::move(record);
}

void PeerDirectory::add_socket(int peer, std::string address) {
  sockets_.at(static_cast<std::size_t>(peer)).push_back(std::move(address));
}

std::string PeerDirectory::name(int peer) const {
  std::string text = "rank " + std::to_string(peer);
  if (peer < 0 || peer >= world_) return text;
  const PeerRecord& r = records_[static_cast<std::size_t>(peer)];
  if (r.address.empty()) return text;
  return text + " (" + r.address + " on " + r.host + ", pid " + std::to_string(r.pid) + ")";
}

std::string PeerDirectory::names(const std::vector<int>& peers) const {
  std::string text;
  for (int p : peers) text += (text.empty() ? "" : ", ") + name(p);
  return text;
}

std::vector<int> PeerDirectory::named_in(const std::string& message) const {
  std::vector<int> exact, by_host;
  for (const std::string& address : addresses_in(message)) {
    const std::string host = address.substr(1, address.find(']') - 1);
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      const auto i = static_cast<std::size_t>(p);
      if (std::find(sockets_[i].begin(), sockets_[i].end(), address) != sockets_[i].end())
        add_unique(exact, p);
      if (records_[i].address == host) add_unique(by_host, p);
    }
  }
  return exact.empty() ? by_host : exact;
}

std::string explain_gloo_failure(const PeerDirectory& peers, const std::string& gloo_message,
                                 const Exchange& exchange, double timeout_seconds) {
  const std::string bound = seconds_text(timeout_seconds) + " s (STOKE_DIST_TIMEOUT)";
  // Gloo's own timeout of a receive or a send (UnboundBuffer::waitRecv/waitSend).
  if (contains(gloo_message, "Timed out waiting")) {
    const bool sending = contains(gloo_message, "send operation");
    const std::vector<int>& waited = sending ? exchange.sends_to : exchange.receives_from;
    if (waited.size() == 1) {
      return "no answer from " + peers.name(waited[0]) + " within " + bound +
             ": that rank hangs or was stopped, or the network between the two is down";
    }
    if (!waited.empty()) {
      return "no answer within " + bound + " from one of the ranks this collective waits on, " +
             peers.names(waited) + ": one of them hangs or was stopped (or waits on a rank that " +
             "does), or the network is down";
    }
    return {};
  }
  const std::vector<int> named = peers.named_in(gloo_message);
  if (named.empty()) return {};
  const std::string who = peers.names(named);
  if (contains(gloo_message, "closed") || contains(gloo_message, "reset by peer") ||
      contains(gloo_message, "Broken pipe")) {
    return who + " closed its connection to this rank: it exited or was killed";
  }
  if (contains(gloo_message, "connect")) return "could not connect to " + who;
  if (contains(gloo_message, "timeout") || contains(gloo_message, "timed out")) {
    return "no answer from " + who + " within " + bound +
           ": that rank hangs or was stopped, or the network between the two is down";
  }
  return "the connection to " + who + " failed";
}

}  // namespace stoke::detail
