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
#include <optional>
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
  const double timeout = timeout_text ? std::atof(timeout_text) : 60.0;
  int first_failure = 0, failed_rank = -1;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  std::size_t running = pids.size();
  while (running > 0) {
    if (g_signal) {  // forwarded once: each rank stops after its current step
      for (pid_t pid : pids) {
        if (pid) kill(pid, g_signal);
      }
      g_signal = 0;
    }
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != done) continue;
        pids[r] = 0;
        --running;
        const int code = status_code(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          failed_rank = static_cast<int>(r);
          std::fprintf(stderr, "stoke: rank %zu exited with status %d; waiting for the others\n", r,
                       code);
          kill_at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<long>((timeout + grace_seconds) * 1000));
        }
      }
      continue;
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (!pids[r]) continue;
        std::fprintf(stderr,
                     "stoke: killing rank %zu (pid %d): still running %.0f s after rank %d "
                     "failed (STOKE_DIST_TIMEOUT %.0f s + %.0f s)\n",
                     r, pids[r], timeout + grace_seconds, failed_rank, timeout, grace_seconds);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        pids[r] = 0;
        --running;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
  return first_failure;
}

}  // namespace stoke_cli
