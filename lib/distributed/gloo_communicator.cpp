// stoke::Communicator on Gloo's TCP transport: full-mesh rendezvous through
// Gloo's FileStore or RedisStore, ring allreduce, broadcast, barrier; every
// call bounded by the options' timeout. At the rendezvous each rank registers
// its address, host and process id, and waits for all the others (a rank
// that never arrives is named); once connected, each publishes its end of
// every connection. Gloo's exceptions (peer closed, timeout, enforce) become
// CommunicationError naming this rank, the operation, the peer at fault with
// what it registered (lib/distributed/peer_directory.hpp) and, where a
// failing rank left one, its own reason.
#include "distributed/gloo_communicator.hpp"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "distributed/failure_notes.hpp"
#include "distributed/peer_directory.hpp"

namespace stoke::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo writes to its sockets without MSG_NOSIGNAL: a write to a peer that has
// just failed and closed its end raises SIGPIPE, whose default action ends
// this process before it can name the peer. Where the process left SIGPIPE
// at its default, it is ignored (the write then fails with EPIPE, which Gloo
// reports); a handler or an ignore the host installed is kept.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

// Gloo's FileStore keeps its non-blocking check() protected; RedisStore's is public.
class CheckedFileStore final : public gloo::rendezvous::FileStore {
 public:
  using FileStore::check;
  using FileStore::FileStore;
};

// The store, and whether a key is in it yet (without waiting).
struct OpenStore {
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::function<bool(const std::string&)> has;
};

OpenStore open_store(const DistributedOptions& o) {
  if (o.store.rfind("file:", 0) == 0) {
    const std::filesystem::path dir = o.store.substr(5);
    // The store folder itself may be made here (every rank races to), but not
    // a chain of parents: a typo must not create folders anywhere.
    std::error_code ec;
    const std::filesystem::path parent = dir.parent_path().empty() ? "." : dir.parent_path();
    if (!std::filesystem::is_directory(parent, ec)) {
      throw IoError("rendezvous store " + o.store + ": the folder '" + parent.string() +
                    "' that would hold it does not exist (stoke creates only the store folder)");
    }
    std::filesystem::create_directory(dir, ec);
    if (!std::filesystem::is_directory(dir)) {
      throw IoError("rendezvous store " + o.store + ": '" + dir.string() +
                    "' is not a directory stoke can create");
    }
    auto store = std::make_unique<CheckedFileStore>(dir.string());
    CheckedFileStore* file = store.get();
    return {std::move(store), [file](const std::string& key) { return file->check({key}); }};
  }
  std::string host = o.store.substr(6);
  int port = 6379;
  if (const auto colon = host.rfind(':'); colon != std::string::npos) {
    port = std::stoi(host.substr(colon + 1));
    host.resize(colon);
  }
  auto store = std::make_unique<gloo::rendezvous::RedisStore>(host, port);
  gloo::rendezvous::RedisStore* redis = store.get();
  return {std::move(store), [redis](const std::string& key) { return redis->check({key}); }};
}

std::string as_text(const std::vector<char>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds;
  return text.str();
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const DistributedOptions& o)
      : options_(o), notes_(o), peers_(o.rank, o.world_size) {
    ignore_default_sigpipe();
    guard("rendezvous", full_mesh_exchange(o.rank, o.world_size), [&] {
      gloo::transport::tcp::attr attr;
      attr.hostname = o.hostname;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      OpenStore opened = open_store(o);
      store_ = std::move(opened.store);
      has_key_ = std::move(opened.has);
      join();
      prefixed_ = std::make_unique<gloo::rendezvous::PrefixStore>(o.run_id, *store_);
      context_ = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
      context_->setTimeout(timeout());
      context_->connectFullMesh(*prefixed_, device);
      publish_connections();
    });
  }

  int rank() const noexcept override { return options_.rank; }
  int world_size() const noexcept override { return options_.world_size; }
  std::string name() const override { return "gloo/tcp"; }
  double timeout_seconds() const noexcept override { return options_.timeout_seconds; }

  void allreduce_sum(std::span<float> data) override {
    if (data.empty()) return;
    guard("allreduce of " + std::to_string(data.size()) + " floats",
          ring_allreduce_exchange(options_.rank, options_.world_size), [&] {
            gloo::AllreduceOptions opts(context_);
            // The ring, named: ring_allreduce_exchange() describes who waits on whom in it.
            opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
            opts.setOutput(data.data(), data.size());
            opts.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            opts.setTag(next_tag());
            gloo::allreduce(opts);
          });
  }

  void broadcast(std::span<float> data, int root) override {
    broadcast_bytes(
        std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(data.data()), data.size_bytes()),
        root);
  }

  void broadcast_bytes(std::span<std::uint8_t> data, int root) override {
    if (root < 0 || root >= options_.world_size) {
      throw InvalidArgument("broadcast: root " + std::to_string(root) +
                            " is not a rank of a world of " + std::to_string(options_.world_size));
    }
    if (data.empty()) return;
    guard(
        "broadcast of " + std::to_string(data.size()) + " bytes from rank " + std::to_string(root),
        tree_broadcast_exchange(options_.rank, options_.world_size, root), [&] {
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(data.data(), data.size());
          opts.setRoot(root);
          opts.setTag(next_tag());
          gloo::broadcast(opts);
        });
  }

  void barrier() override {
    guard("barrier", dissemination_barrier_exchange(options_.rank, options_.world_size), [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      gloo::barrier(opts);
    });
  }

  void report_failure(const std::string& cause) noexcept override { notes_.write(cause); }

 private:
  std::uint32_t next_tag() noexcept { return tag_++; }

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<std::int64_t>(options_.timeout_seconds * 1000));
  }

  std::string key(const char* kind, int rank) const {
    return options_.run_id + "/stoke." + kind + "." + std::to_string(rank);
  }

  std::string prefix() const {
    return "rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.world_size);
  }

  // Registers this rank and waits, up to the timeout, until every other rank
  // has: the ranks still missing then are named (never started, failed
  // before the rendezvous, or cannot reach the store).
  void join() {
    const std::string me = PeerRecord::of_this_process(options_.hostname).serialize();
    store_->set(key("rank", options_.rank), std::vector<char>(me.begin(), me.end()));
    std::vector<int> missing;
    for (int r = 0; r < options_.world_size; ++r)
      if (r != options_.rank) missing.push_back(r);
    const auto deadline = Clock::now() + std::chrono::duration<double>(options_.timeout_seconds);
    while (true) {
      std::erase_if(missing, [&](int r) { return has_key_(key("rank", r)); });
      if (missing.empty() || Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int r = 0; r < options_.world_size; ++r) {
      if (std::find(missing.begin(), missing.end(), r) == missing.end())
        peers_.set_record(r, PeerRecord::parse(as_text(store_->get(key("rank", r)))));
    }
    if (missing.empty()) return;
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::vector<int> joined;
    for (int r = 0; r < options_.world_size; ++r)
      if (std::find(missing.begin(), missing.end(), r) == missing.end()) joined.push_back(r);
    throw CommunicationError(
        prefix() + ": rank" + (missing.size() > 1 ? "s " : " ") + list + " did not join the " +
            "rendezvous at " + options_.store + " (run id " + options_.run_id + ") within " +
            seconds_text(options_.timeout_seconds) +
            " s (STOKE_DIST_TIMEOUT): not started, failed before it got there, or cannot reach "
            "the store. Joined: " +
            peers_.names(joined),
        options_.rank);
  }

  // Each rank's end of its connection to every other, so that an error
  // naming the remote end of a connection ("[127.0.0.1]:50321") names its
  // rank even when several ranks share an address.
  void publish_connections() {
    std::string mine;
    for (int r = 0; r < options_.world_size; ++r) {
      if (r == options_.rank) continue;
      mine += std::to_string(r) + " " + context_->getPair(r)->address().str() + "\n";
    }
    store_->set(key("sockets", options_.rank), std::vector<char>(mine.begin(), mine.end()));
    for (int r = 0; r < options_.world_size; ++r) {
      if (r == options_.rank) continue;
      store_->wait({key("sockets", r)}, timeout());
      std::istringstream theirs(as_text(store_->get(key("sockets", r))));
      int peer = -1;
      std::string address;
      while (theirs >> peer >> address) {
        if (peer == options_.rank) peers_.add_socket(r, address);
      }
      peers_.add_socket(r, advertised_address(r));
    }
  }

  // The listening address rank `r` advertised for its connection to this
  // rank (connectFullMesh's record under key "r": one address per other
  // rank, in rank order). Gloo prints that one, not the socket's end, for a
  // connection the peer made before this rank read the record.
  std::string advertised_address(int r) {
    const std::vector<char> all = prefixed_->get(std::to_string(r));
    const auto size = all.size() / static_cast<std::size_t>(options_.world_size - 1);
    const auto index =
        static_cast<std::size_t>(options_.rank > r ? options_.rank - 1 : options_.rank);
    const std::vector<char> bytes(all.begin() + static_cast<std::ptrdiff_t>(index * size),
                                  all.begin() + static_cast<std::ptrdiff_t>((index + 1) * size));
    const std::string text = gloo::transport::tcp::Address(bytes).str();
    return text.substr(0, text.find('$'));  // without Gloo's sequence number
  }

  // Runs one Gloo call, adds its time to seconds(), and turns whatever Gloo
  // throws into a CommunicationError. `exchange`: whom the call waits on.
  template <typename F>
  void guard(const std::string& what, const Exchange& exchange, F&& call) {
    const auto start = Clock::now();
    try {
      call();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
      throw CommunicationError(describe_failure(what, exchange, e.what()), options_.rank);
    }
    seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  }

  std::string describe_failure(const std::string& what, const Exchange& exchange,
                               const std::string& cause) {
    std::ostringstream out;
    out << prefix() << ": " << what << " failed (" << cause << "). ";
    const std::string peer =
        explain_gloo_failure(peers_, cause, exchange, options_.timeout_seconds);
    if (!peer.empty()) out << "Cause: " << peer << ". ";
    const std::string reasons = notes_.read_others();
    if (!reasons.empty()) {
      out << "Reported by the failing rank: " << reasons;
    } else if (peer.empty()) {
      out << "A peer rank exited, was killed, or did not answer within " << options_.timeout_seconds
          << " s (STOKE_DIST_TIMEOUT); see the other ranks' output.";
    } else {
      out << "See that rank's output.";
    }
    return out.str();
  }

  DistributedOptions options_;
  FailureNotes notes_;
  PeerDirectory peers_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::function<bool(const std::string&)> has_key_;
  std::unique_ptr<gloo::rendezvous::PrefixStore> prefixed_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::uint32_t tag_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const DistributedOptions& options) {
  return std::make_unique<GlooCommunicator>(options);
}

bool gloo_available() noexcept {
  return true;
}

}  // namespace stoke::detail
