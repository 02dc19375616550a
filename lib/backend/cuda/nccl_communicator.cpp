// Device collectives of the CUDA backend on NCCL: a group of ranks made from
// a ncclUniqueId (rank 0 makes it, the host communicator carries it to the
// others), allreduce on the backend's compute stream in stream order.
// libnccl is loaded on first use (dlopen), so the plugin still loads where
// CUDA is but NCCL is not. The communicator is non-blocking: init, each
// collective's enqueue, a synchronize while a collective is queued and the
// destruction are polled (ncclCommGetAsyncError, cudaStreamQuery) under the
// host communicator's timeout, and an error or the deadline aborts the group
// (ncclCommAbort) with a CommunicationError: a dead or absent peer cannot
// hang this rank (lib/distributed/deadline_wait.hpp). Without NCCL at build time (STOKE_HAVE_NCCL
// unset) or at run time the backend says why, and data-parallel training averages gradients through
// the host.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/device_runtime.hpp"
#include "distributed/deadline_wait.hpp"
#include "stoke/distributed.hpp"
#include "stoke/error.hpp"

#if STOKE_HAVE_NCCL
#include <nccl.h>

#include "stoke/log.hpp"
#endif

namespace stoke::cuda {

#if STOKE_HAVE_NCCL
namespace {

static_assert(sizeof(ncclUniqueId) == kDeviceGroupIdBytes, "ncclUniqueId is not 128 bytes");

// The NCCL functions stoke calls, from libnccl.so.2: the library found at
// build time (STOKE_NCCL_LIBRARY_PATH), else the loader's search.
struct NcclApi {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclCommFinalize) comm_finalize = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclGetLastError) last_error = nullptr;
  std::string error;  // why it is not usable ("" when it is)
};

template <typename Fn>
void resolve(void* library, const char* symbol, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!fn && error.empty())
    error = std::string("libnccl has no ") + symbol + " (NCCL older than 2.13?)";
}

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    void* library = dlopen(STOKE_NCCL_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char* why = dlerror();
      a.error = std::string("libnccl.so.2 could not be loaded: ") + (why ? why : "not found");
      return a;
    }
    resolve(library, "ncclGetVersion", a.get_version, a.error);
    resolve(library, "ncclGetUniqueId", a.get_unique_id, a.error);
    resolve(library, "ncclCommInitRankConfig", a.comm_init_rank_config, a.error);
    resolve(library, "ncclCommGetAsyncError", a.comm_get_async_error, a.error);
    resolve(library, "ncclCommFinalize", a.comm_finalize, a.error);
    resolve(library, "ncclCommAbort", a.comm_abort, a.error);
    resolve(library, "ncclCommDestroy", a.comm_destroy, a.error);
    resolve(library, "ncclAllReduce", a.all_reduce, a.error);
    resolve(library, "ncclGetErrorString", a.error_string, a.error);
    resolve(library, "ncclGetLastError", a.last_error, a.error);
    return a;  // the library stays loaded for the process
  }();
  return api;
}

// The API, or Unsupported saying why there is none.
const NcclApi& nccl_or_throw(const std::string& where) {
  const NcclApi& api = nccl();
  if (!api.error.empty()) throw Unsupported("NCCL group on " + where + ": " + api.error);
  return api;
}

const char* nccl_hint(ncclResult_t status) {
  switch (status) {
    case ncclRemoteError:
      return "another rank failed or left (its own error names the cause); every rank of the group "
             "must "
             "reach the same collectives";
    case ncclSystemError:
      return "a system call or the network failed: NCCL_DEBUG=WARN prints which; on several "
             "machines "
             "check NCCL_SOCKET_IFNAME and that the ranks reach each other";
    case ncclUnhandledCudaError:
      return "a CUDA call inside NCCL failed: check the driver and the device";
    case ncclInvalidUsage:
      return "every rank must call the same collectives with the same sizes";
    default:
      return nullptr;
  }
}

// "NCCL call ncclAllReduce(...) failed at file:line on device 0 (rank 1 of
// 2): remote process exited or there was a network error (status 6); hint".
[[noreturn]] void nccl_failure(ncclResult_t status, const char* call, const char* file, int line,
                               int rank, int world) {
  int device = -1;
  const bool have_device = cudaGetDevice(&device) == cudaSuccess;
  std::string message =
      std::string("NCCL call ") + call + " failed at " + file + ":" + std::to_string(line) +
      " on " + (have_device ? "device " + std::to_string(device) : "no current device") +
      " (rank " + std::to_string(rank) + " of " + std::to_string(world) +
      "): " + nccl().error_string(status) + " (status " + std::to_string(status) + ")";
  if (const char* last = nccl().last_error(nullptr); last && *last)
    message += ": " + std::string(last);
  if (const char* hint = nccl_hint(status)) message += "; " + std::string(hint);
  throw CommunicationError(message, rank);
}

}  // namespace

#define STOKE_NCCL_CHECK(expr, rank, world)                                                   \
  do {                                                                                        \
    const ncclResult_t stoke_nccl_status = (expr);                                            \
    if (stoke_nccl_status != ncclSuccess) {                                                   \
      ::stoke::cuda::nccl_failure(stoke_nccl_status, #expr, __FILE__, __LINE__, rank, world); \
    }                                                                                         \
  } while (0)

namespace {

std::string nccl_version() {
  int version = 0;
  if (nccl().get_version(&version) != ncclSuccess) return "nccl";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return "nccl " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100);
}

using distributed_detail::Progress;

// The message of an asynchronous NCCL status, with NCCL's last error.
std::string async_error_text(ncclResult_t status) {
  std::string why =
      std::string(nccl().error_string(status)) + " (status " + std::to_string(status) + ")";
  if (const char* last = nccl().last_error(nullptr); last && *last) why += ": " + std::string(last);
  if (const char* hint = nccl_hint(status)) why += "; " + std::string(hint);
  return why;
}

class NcclCommunicator final : public DeviceCommunicator, public CudaBackend::CollectiveWatch {
 public:
  NcclCommunicator(CudaBackend& backend, int rank, int world, const ncclUniqueId& id,
                   double timeout_seconds)
      : backend_(backend), rank_(rank), world_(world), timeout_(timeout_seconds) {
    const DeviceScope scope(backend_.device());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait below is ours to bound
    const ncclResult_t status = nccl().comm_init_rank_config(&comm_, world_, id, rank_, &config);
    if (status != ncclSuccess && status != ncclInProgress) {
      if (comm_) nccl().comm_abort(comm_);
      nccl_failure(status, "ncclCommInitRankConfig", __FILE__, __LINE__, rank_, world_);
    }
    wait_group("NCCL init (ncclCommInitRankConfig, " + std::to_string(world_) + " ranks)");
    backend_.set_collective_watch(this);
  }

  ~NcclCommunicator() override {
    backend_.set_collective_watch(nullptr);
    // Queued collectives finish before the communicator goes, within the
    // deadline; a failed or late group is aborted instead (never a hang,
    // never a throw).
    try {
      const DeviceScope scope(backend_.device());
      if (!aborted_) wait_stream();
      if (!aborted_) {
        const ncclResult_t status = nccl().comm_finalize(comm_);
        if (status != ncclSuccess && status != ncclInProgress) {
          log_warn("ncclCommFinalize on rank " + std::to_string(rank_) + ": " +
                   async_error_text(status));
          abort_group();
        } else {
          wait_group("ncclCommFinalize");
        }
      }
    } catch (const std::exception& e) {
      log_warn(std::string("NCCL group on ") + backend_.name() + ": " + e.what());
    } catch (...) {
      // The device is gone: nothing left to release (never throw here).
    }
    if (!aborted_) {
      if (const ncclResult_t status = nccl().comm_destroy(comm_); status != ncclSuccess) {
        log_warn("ncclCommDestroy on rank " + std::to_string(rank_) + ": " +
                 nccl().error_string(status));
      }
    }
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_; }
  std::string name() const override { return nccl_version(); }

  void allreduce_sum(Tensor& tensor) override { allreduce(tensor, ncclSum, "allreduce_sum"); }
  void allreduce_mean(Tensor& tensor) override { allreduce(tensor, ncclAvg, "allreduce_mean"); }

  // CudaBackend::CollectiveWatch
  bool collective_queued() const noexcept override { return queued_; }
  void wait_stream() override {
    if (aborted_) throw CommunicationError(aborted_message(), rank_);
    const cudaStream_t stream = backend_.stream();
    distributed_detail::wait_or_abort(
        [&](std::string& why) {
          const cudaError_t e = cudaStreamQuery(stream);
          if (e == cudaSuccess) return Progress::kDone;
          if (e != cudaErrorNotReady) {
            why = std::string("the stream failed: ") + cudaGetErrorString(e);
            return Progress::kFailed;
          }
          return poll_group(why);
        },
        [this] { abort_group(); }, timeout_,
        "waiting for the NCCL collectives queued on " + backend_.name(), rank_);
    queued_ = false;
  }

 private:
  void allreduce(Tensor& tensor, ncclRedOp_t op, const char* what) {
    if (!tensor.defined() || &tensor.backend() != &backend_ || tensor.dtype() != DType::kFloat32) {
      throw InvalidArgument(std::string("NCCL ") + what + " on " + backend_.name() +
                            ": the tensor must be float32 on this backend");
    }
    if (aborted_) throw CommunicationError(aborted_message(), rank_);
    float* data = tensor.data<float>();
    const auto count = static_cast<std::size_t>(tensor.numel());
    const DeviceScope scope(backend_.device());
    const ncclResult_t status =
        nccl().all_reduce(data, data, count, ncclFloat32, op, comm_, backend_.stream());
    if (status != ncclSuccess && status != ncclInProgress) {
      abort_group();
      nccl_failure(status, "ncclAllReduce", __FILE__, __LINE__, rank_, world_);
    }
    queued_ = true;
    if (status == ncclInProgress) wait_group(std::string("ncclAllReduce (") + what + ") enqueue");
  }

  // The group's asynchronous state: in progress, done, or an error.
  Progress poll_group(std::string& why) const {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t status = nccl().comm_get_async_error(comm_, &state);
    if (status != ncclSuccess) state = status;
    if (state == ncclSuccess) return Progress::kDone;
    if (state == ncclInProgress) return Progress::kPending;
    why = async_error_text(state);
    return Progress::kFailed;
  }

  // Waits until the group's last call completed (init, an enqueue, finalize).
  void wait_group(const std::string& what) {
    distributed_detail::wait_or_abort([this](std::string& why) { return poll_group(why); },
                                      [this] { abort_group(); }, timeout_, what, rank_);
  }

  void abort_group() noexcept {
    if (aborted_ || !comm_) return;
    aborted_ = true;
    queued_ = false;
    if (const ncclResult_t status = nccl().comm_abort(comm_); status != ncclSuccess) {
      log_warn("ncclCommAbort on rank " + std::to_string(rank_) + ": " +
               nccl().error_string(status));
    }
  }

  std::string aborted_message() const {
    return "the NCCL group on " + backend_.name() + " (rank " + std::to_string(rank_) + " of " +
           std::to_string(world_) + ") was aborted after an earlier failure";
  }

  CudaBackend& backend_;
  int rank_;
  int world_;
  double timeout_;
  ncclComm_t comm_ = nullptr;
  bool queued_ = false;   // a collective was enqueued since the stream was last idle
  bool aborted_ = false;  // ncclCommAbort ran: the group is gone
};

}  // namespace

std::string CudaBackend::device_collectives_unavailable() const {
  return nccl().error;
}

std::vector<std::uint8_t> CudaBackend::new_device_group_id() {
  const NcclApi& api = nccl_or_throw(name());
  ncclUniqueId id{};
  STOKE_NCCL_CHECK(api.get_unique_id(&id), 0, 1);
  std::vector<std::uint8_t> bytes(sizeof id);
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

std::unique_ptr<DeviceCommunicator> CudaBackend::join_device_group(int rank, int world_size,
                                                                   std::span<const std::uint8_t> id,
                                                                   double timeout_seconds) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw InvalidArgument("NCCL group on " + name() + ": rank " + std::to_string(rank) +
                          " outside a world of " + std::to_string(world_size));
  }
  if (id.size() != sizeof(ncclUniqueId)) {
    throw InvalidArgument("NCCL group on " + name() + ": the group id has " +
                          std::to_string(id.size()) + " bytes, not " +
                          std::to_string(sizeof(ncclUniqueId)));
  }
  nccl_or_throw(name());
  ncclUniqueId unique{};
  std::memcpy(&unique, id.data(), sizeof unique);
  return std::make_unique<NcclCommunicator>(*this, rank, world_size, unique, timeout_seconds);
}

#else  // no NCCL at build time

std::string CudaBackend::device_collectives_unavailable() const {
  return "this CUDA plugin was built without NCCL (nccl.h or libnccl not found at build time)";
}

std::vector<std::uint8_t> CudaBackend::new_device_group_id() {
  throw Unsupported("NCCL group on " + name() + ": " + device_collectives_unavailable());
}

std::unique_ptr<DeviceCommunicator> CudaBackend::join_device_group(int, int,
                                                                   std::span<const std::uint8_t>,
                                                                   double) {
  throw Unsupported("NCCL group on " + name() + ": " + device_collectives_unavailable());
}

#endif

}  // namespace stoke::cuda
