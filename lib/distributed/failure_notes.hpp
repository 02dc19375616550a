// Why a rank failed, left for the others: one small file per failing rank in
// the file store's directory (<dir>/<run_id>.failed.<rank>). Ranks whose
// store is Redis leave none; their peers' errors then say a peer exited.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "stoke/distributed.hpp"

namespace stoke::detail {

class FailureNotes {
 public:
  explicit FailureNotes(const DistributedOptions& o) : rank_(o.rank), world_(o.world_size) {
    if (o.store.rfind("file:", 0) == 0) {
      dir_ = o.store.substr(5);
      prefix_ = o.run_id + ".failed.";
    }
  }

  void write(const std::string& cause) const noexcept {
    if (dir_.empty()) return;
    try {
      const auto path = dir_ / (prefix_ + std::to_string(rank_));
      std::ofstream(path.string() + ".tmp") << "rank " << rank_ << ": " << cause;
      std::filesystem::rename(path.string() + ".tmp", path);
    } catch (...) {  // best effort: the peers still fail, with a vaguer reason
    }
  }

  // The notes of the other ranks, joined; "" when none was left.
  std::string read_others() const {
    std::string all;
    if (dir_.empty()) return all;
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) continue;
      std::ifstream in(dir_ / (prefix_ + std::to_string(r)));
      if (!in) continue;
      std::ostringstream text;
      text << in.rdbuf();
      all += (all.empty() ? "" : "; ") + text.str();
    }
    return all;
  }

 private:
  int rank_, world_;
  std::filesystem::path dir_;
  std::string prefix_;
};

}  // namespace stoke::detail
