#pragma once
// A progress bar on stderr for long runs: redrawn in place on a terminal, a line every 25%
// otherwise, and nothing at all for runs that finish within a second.

#include <chrono>
#include <cstdint>
#include <string>

namespace thdpack::cli {

class Progress {
 public:
  Progress(std::string label, int64_t total, bool enabled);
  ~Progress();
  void advance(int64_t by = 1);
  void finish();

 private:
  void draw();

  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  int last_quarter_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace thdpack::cli
