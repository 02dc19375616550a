// Starts one process per rank of a distributed test, with the variables a
// launcher sets (RANK, WORLD_SIZE, LOCAL_RANK, STOKE_DIST_STORE), and waits
// for all of them under one deadline: a test that fails still ends, because
// every rank left running at the deadline is killed and reported.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace stoke::testing {

struct RankResult {
  int exit_code = -1;  // -1: killed at the deadline; 128 + n: died of signal n
  std::string output;  // stdout and stderr
  double seconds = 0;
};

class RankGroup {
 public:
  // dir: a fresh directory for the store and the ranks' output.
  RankGroup(std::filesystem::path dir, int world) : dir_(std::move(dir)), world_(world) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "store");
  }

  // Runs `program args...` on every rank; extra_env as "NAME=value".
  std::vector<RankResult> run(const std::string& program, const std::vector<std::string>& args,
                              std::chrono::seconds deadline,
                              const std::vector<std::string>& extra_env = {}) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> pids;
    for (int r = 0; r < world_; ++r) pids.push_back(spawn(program, args, r, extra_env));
    std::vector<RankResult> results(static_cast<std::size_t>(world_));
    std::size_t running = pids.size();
    while (running > 0) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] == 0) continue;
        int status = 0;
        if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        results[r].seconds = seconds_since(start);
        pids[r] = 0;
        --running;
      }
      if (running > 0 && std::chrono::steady_clock::now() - start > deadline) {
        for (pid_t& pid : pids) {
          if (pid == 0) continue;
          kill(pid, SIGKILL);
          waitpid(pid, nullptr, 0);
          pid = 0;
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, not faking work
    }
    for (int r = 0; r < world_; ++r) {
      std::ifstream in(log_path(r));
      std::ostringstream text;
      text << in.rdbuf();
      results[static_cast<std::size_t>(r)].output = text.str();
    }
    return results;
  }

  ~RankGroup() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::string store() const { return "file:" + (dir_ / "store").string(); }

 private:
  std::filesystem::path log_path(int rank) const {
    return dir_ / ("rank" + std::to_string(rank) + ".log");
  }

  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  pid_t spawn(const std::string& program, const std::vector<std::string>& args, int rank,
              const std::vector<std::string>& extra_env) {
    std::vector<std::string> env = {
        "RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world_),
        "LOCAL_RANK=" + std::to_string(rank), "STOKE_DIST_STORE=" + store()};
    for (char** e = environ; *e; ++e) {
      const std::string var = *e;
      if (var.rfind("RANK=", 0) == 0 || var.rfind("WORLD_SIZE=", 0) == 0 ||
          var.rfind("LOCAL_RANK=", 0) == 0 || var.rfind("STOKE_DIST_", 0) == 0) {
        continue;
      }
      env.push_back(var);
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<std::string> argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = log_path(rank).string();
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("posix_spawn " + program + " failed");
    return pid;
  }

  std::filesystem::path dir_;
  int world_;
};

}  // namespace stoke::testing
