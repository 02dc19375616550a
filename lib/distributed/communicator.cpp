#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string>

#include "distributed/gloo_communicator.hpp"
#include "stoke/distributed.hpp"

namespace stoke {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

int parse_int(const char* name, const char* text) {
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end) {
    throw ConfigError(std::string(name) + "=" + text + ": not an integer");
  }
  return value;
}

// The first of `names` that is set, parsed as an int; `fallback` when none is.
int first_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* value = env(name)) return parse_int(name, value);
  }
  return fallback;
}

// A rank's collectives in a world of one: nothing to exchange.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const noexcept override { return 0; }
  int world_size() const noexcept override { return 1; }
  std::string name() const override { return "local"; }
  void allreduce_sum(std::span<float>) override {}
  void broadcast(std::span<float>, int root) override { check_root(root); }
  void broadcast_bytes(std::span<std::uint8_t>, int root) override { check_root(root); }
  void barrier() override {}

 private:
  static void check_root(int root) {
    if (root != 0)
      throw InvalidArgument("broadcast: root " + std::to_string(root) +
                            " is not a rank of a world of 1");
  }
};

}  // namespace

// Launchers and the application's entry point: the one place that reads the
// distributed variables (see the header).
DistributedOptions DistributedOptions::from_environment() {
  DistributedOptions o;
  o.world_size = first_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}, 1);
  o.rank = first_int({"RANK", "OMPI_COMM_WORLD_RANK"}, 0);
  o.local_rank = first_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}, o.rank);
  if (const char* store = env("STOKE_DIST_STORE")) o.store = store;
  if (const char* run = env("STOKE_DIST_RUN_ID")) o.run_id = run;
  if (const char* host = env("STOKE_DIST_HOST")) o.hostname = host;
  if (const char* timeout = env("STOKE_DIST_TIMEOUT")) {
    o.timeout_seconds = parse_int("STOKE_DIST_TIMEOUT", timeout);
  }
  o.validate();
  return o;
}

void DistributedOptions::validate() const {
  const auto fail = [](const std::string& what) {
    throw ConfigError("distributed options: " + what);
  };
  if (world_size < 1)
    fail("world size " + std::to_string(world_size) + " (WORLD_SIZE) must be at least 1");
  if (rank < 0 || rank >= world_size) {
    fail("rank " + std::to_string(rank) + " (RANK) is outside the world of " +
         std::to_string(world_size) + " ranks (0.." + std::to_string(world_size - 1) + ")");
  }
  if (local_rank < 0)
    fail("local rank " + std::to_string(local_rank) + " (LOCAL_RANK) is negative");
  if (!(timeout_seconds > 0))
    fail("timeout " + std::to_string(timeout_seconds) + " s (STOKE_DIST_TIMEOUT) must be > 0");
  if (world_size > 1 && store.empty()) {
    fail("a world of " + std::to_string(world_size) +
         " ranks needs a rendezvous store: set STOKE_DIST_STORE=file:DIR (a directory every rank "
         "reaches) "
         "or redis:HOST[:PORT]");
  }
  if (!store.empty() && store.rfind("file:", 0) != 0 && store.rfind("redis:", 0) != 0) {
    fail("store '" + store +
         "' (STOKE_DIST_STORE): accepted forms are file:DIR and redis:HOST[:PORT]");
  }
}

Communicator::~Communicator() = default;

void Communicator::allreduce_mean(std::span<float> data) {
  allreduce_sum(data);
  if (world_size() == 1) return;
  const float inverse = 1.0f / static_cast<float>(world_size());
  for (float& x : data) x *= inverse;
}

std::unique_ptr<Communicator> make_communicator(const DistributedOptions& options) {
  options.validate();
  if (options.world_size == 1) return std::make_unique<LocalCommunicator>();
  return detail::make_gloo_communicator(options);
}

bool distributed_available() noexcept {
  return detail::gloo_available();
}

}  // namespace stoke
