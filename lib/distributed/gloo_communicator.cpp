// stoke::Communicator on Gloo's TCP transport: full-mesh rendezvous through
// Gloo's FileStore or RedisStore, ring allreduce, broadcast, barrier; every
// call bounded by the options' timeout. Gloo's exceptions (peer closed,
// timeout, enforce) become CommunicationError naming this rank, the
// operation and, where a failing rank left one, its own reason.
#include "distributed/gloo_communicator.hpp"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "distributed/failure_notes.hpp"

namespace stoke::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<gloo::rendezvous::Store> open_store(const DistributedOptions& o) {
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
    return std::make_unique<gloo::rendezvous::FileStore>(dir.string());
  }
  std::string host = o.store.substr(6);
  int port = 6379;
  if (const auto colon = host.rfind(':'); colon != std::string::npos) {
    port = std::stoi(host.substr(colon + 1));
    host.resize(colon);
  }
  return std::make_unique<gloo::rendezvous::RedisStore>(host, port);
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const DistributedOptions& o) : options_(o), notes_(o) {
    const auto timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_seconds * 1000));
    guard("rendezvous", [&] {
      gloo::transport::tcp::attr attr;
      attr.hostname = o.hostname;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      store_ = open_store(o);
      prefixed_ = std::make_unique<gloo::rendezvous::PrefixStore>(o.run_id, *store_);
      context_ = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
      context_->setTimeout(timeout);
      context_->connectFullMesh(*prefixed_, device);
    });
  }

  int rank() const noexcept override { return options_.rank; }
  int world_size() const noexcept override { return options_.world_size; }
  std::string name() const override { return "gloo/tcp"; }
  double timeout_seconds() const noexcept override { return options_.timeout_seconds; }

  void allreduce_sum(std::span<float> data) override {
    if (data.empty()) return;
    guard("allreduce of " + std::to_string(data.size()) + " floats", [&] {
      gloo::AllreduceOptions opts(context_);
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
        [&] {
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(data.data(), data.size());
          opts.setRoot(root);
          opts.setTag(next_tag());
          gloo::broadcast(opts);
        });
  }

  void barrier() override {
    guard("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      gloo::barrier(opts);
    });
  }

  void report_failure(const std::string& cause) noexcept override { notes_.write(cause); }

 private:
  std::uint32_t next_tag() noexcept { return tag_++; }

  // Runs one Gloo call, adds its time to seconds(), and turns whatever Gloo
  // throws into a CommunicationError.
  template <typename F>
  void guard(const std::string& what, F&& call) {
    const auto start = Clock::now();
    try {
      call();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
      throw CommunicationError(describe_failure(what, e.what()), options_.rank);
    }
    seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  }

  std::string describe_failure(const std::string& what, const std::string& cause) {
    std::ostringstream out;
    out << "rank " << options_.rank << " of " << options_.world_size << ": " << what << " failed ("
        << cause << "). ";
    const std::string peers = notes_.read_others();
    if (!peers.empty()) {
      out << "Reported by the failing rank: " << peers;
    } else {
      out << "A peer rank exited, was killed, or did not answer within " << options_.timeout_seconds
          << " s (STOKE_DIST_TIMEOUT); see the other ranks' output.";
    }
    return out.str();
  }

  DistributedOptions options_;
  FailureNotes notes_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
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
