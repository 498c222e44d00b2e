#include "reports/progress.hpp"

#include <unistd.h>
#include <cstdio>

namespace thdpack::cli {
namespace {

constexpr double kQuietSeconds = 1.0;  // runs shorter than this print nothing
constexpr int kBarWidth = 30;

}  // namespace

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      enabled_(enabled),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  finish();
}

void Progress::advance(int64_t by) {
  done_ += by;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < kQuietSeconds) return;
  if (tty_) {
    if (std::chrono::duration<double>(now - last_draw_).count() >= 0.1 || done_ >= total_) {
      last_draw_ = now;
      draw();
    }
  } else {
    const int quarter = static_cast<int>(4 * done_ / total_);
    if (quarter > last_quarter_) {
      last_quarter_ = quarter;
      draw();
    }
  }
}

void Progress::finish() {
  if (enabled_ && drawn_ && tty_) std::fputc('\n', stderr);
  drawn_ = false;
  enabled_ = false;
}

void Progress::draw() {
  const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarWidth) bar += '>';
  bar.resize(kBarWidth, ' ');
  std::fprintf(stderr, "%s%s [%s] %lld/%lld  %.1fs elapsed, ~%.1fs left%s", tty_ ? "\r" : "",
               label_.c_str(), bar.c_str(), static_cast<long long>(done_),
               static_cast<long long>(total_), elapsed, eta, tty_ ? "" : "\n");
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace thdpack::cli
