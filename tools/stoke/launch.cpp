#include "launch.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

extern char** environ;

namespace stoke_cli {
namespace {

volatile sig_atomic_t g_signal = 0;
extern "C" void remember_signal(int sig) {
  g_signal = sig;
}

// The parent's environment with the rank's variables replacing any of the same name.
std::vector<std::string> rank_environment(int rank, int nproc, const std::string& store,
                                          const std::vector<int>& devices) {
  const bool device_list = devices.size() > 1;
  std::vector<std::string> env = {
      "RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(nproc),
      "LOCAL_RANK=" + std::to_string(rank), "STOKE_DIST_STORE=file:" + store};
  if (device_list)
    env.push_back("STOKE_GPU_DEVICE=" +
                  std::to_string(devices[static_cast<std::size_t>(rank) % devices.size()]));
  if (!std::getenv("STOKE_CPU_THREADS")) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    env.push_back("STOKE_CPU_THREADS=" + std::to_string(std::max(1L, cores / nproc)));
  }
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    const std::string name = var.substr(0, var.find('='));
    if (name == "RANK" || name == "WORLD_SIZE" || name == "LOCAL_RANK" ||
        name == "STOKE_DIST_STORE" || (name == "STOKE_GPU_DEVICE" && device_list)) {
      continue;
    }
    env.push_back(var);
  }
  return env;
}

pid_t spawn_rank(const std::vector<std::string>& args, std::vector<std::string> env) {
  std::vector<std::string> argv_text = {"/proc/self/exe"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0)
    throw std::runtime_error(std::string("starting a rank failed: ") + std::strerror(rc));
  return pid;
}

int status_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
         strsignal(WTERMSIG(status)) + ")";
}

// Status 130: the rank stopped on request, and so do the others at the same
// step; rank 0 may still be writing the stop checkpoint.
bool agreed_stop(int code) {
  return code == 130;
}

// The ranks of one launch: which still run, the first that ended badly, and
// how long the others may run on after it. A failed rank's peers end on their
// own at once when its connections close, and within STOKE_DIST_TIMEOUT when
// it hangs or the network is gone; a peer that is itself the hung one never
// does. So after a failure the others get a short grace and are then killed;
// after an agreed stop, the time rank 0 may need to write its checkpoint.
class LaunchedRanks {
 public:
  LaunchedRanks(std::vector<pid_t> pids, double timeout, double grace)
      : pids_(std::move(pids)), running_(pids_.size()), timeout_(timeout), grace_(grace) {}

  bool any_running() const { return running_ > 0; }
  int first_failure() const { return first_failure_; }

  void forward(int sig) const {
    for (pid_t pid : pids_) {
      if (pid) kill(pid, sig);
    }
  }

  // Reaps a rank that ended, if one did: true when one was reaped.
  bool reap() {
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done <= 0) return false;
    for (std::size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] != done) continue;
      pids_[r] = 0;
      --running_;
      if (status_code(status) != 0 && first_failure_ == 0) failed(r, status);
    }
    return true;
  }

  // Kills, naming each, the ranks still running past the allowance.
  void kill_overdue() {
    if (std::chrono::steady_clock::now() <= kill_at_) return;
    for (std::size_t r = 0; r < pids_.size(); ++r) {
      if (!pids_[r]) continue;
      std::fprintf(
          stderr, "stoke: killing rank %zu (pid %d): still running %.0f s after rank %d %s\n", r,
          pids_[r], allowed_, failed_rank_, agreed_stop(first_failure_) ? "stopped" : "failed");
      kill(pids_[r], SIGKILL);
      waitpid(pids_[r], nullptr, 0);
      pids_[r] = 0;
      --running_;
    }
  }

 private:
  void failed(std::size_t rank, int status) {
    first_failure_ = status_code(status);
    failed_rank_ = static_cast<int>(rank);
    const bool stop = agreed_stop(first_failure_);
    allowed_ = stop ? timeout_ + grace_ : grace_;
    kill_at_ = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<long>(allowed_ * 1000));
    if (running_ == 0) return;
    if (stop) {
      std::fprintf(stderr,
                   "stoke: rank %zu stopped (status 130); waiting up to %.0f s for the others\n",
                   rank, allowed_);
    } else {
      std::fprintf(stderr,
                   "stoke: rank %zu %s; stopping the others in %.0f s unless they end first\n",
                   rank, describe_status(status).c_str(), allowed_);
    }
  }

  std::vector<pid_t> pids_;  // 0: ended
  std::size_t running_;
  double timeout_, grace_;
  int first_failure_ = 0, failed_rank_ = -1;
  double allowed_ = 0;
  std::chrono::steady_clock::time_point kill_at_ = std::chrono::steady_clock::time_point::max();
};

}  // namespace

bool launched_as_rank() {
  return std::getenv("RANK") != nullptr;
}

int launch_ranks(int nproc, const std::vector<std::string>& args, const std::vector<int>& devices,
                 double grace_seconds) {
  const auto store = std::filesystem::temp_directory_path() /
                     ("stoke-launch-" + std::to_string(getpid()) + "-" +
                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(store);
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r)
    pids.push_back(spawn_rank(args, rank_environment(r, nproc, store.string(), devices)));
  std::fprintf(stderr, "stoke: started %d ranks (store %s)\n", nproc, store.c_str());

  const char* timeout_text = std::getenv("STOKE_DIST_TIMEOUT");
  LaunchedRanks ranks(std::move(pids), timeout_text ? std::atof(timeout_text) : 60.0,
                      grace_seconds);
  while (ranks.any_running()) {
    if (g_signal) {  // forwarded once: each rank stops after its current step
      ranks.forward(g_signal);
      g_signal = 0;
    }
    if (ranks.reap()) continue;
    ranks.kill_overdue();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
  return ranks.first_failure();
}

}  // namespace stoke_cli
