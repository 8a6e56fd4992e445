// The process-level parts of the public API: traces of runs, the devices and cores this process
// can use, and the log threshold.
#include <string>
#include <vector>

#include "core/cpu_set.h"
#include "core/logging.h"
#include "exec/trace.h"
#include "runtime/device.h"
#include "streamline/streamline.h"

namespace streamline {

Trace::Trace(size_t max_slices) : recorder_(std::make_unique<exec::TraceRecorder>(max_slices)) {}

Trace::~Trace() = default;

exec::ExecObserver* Trace::observer() {
  return recorder_.get();
}

size_t Trace::slices() const {
  return recorder_->slices();
}

std::string Trace::to_json() const {
  return recorder_->to_json();
}

Status Trace::write(const std::string& path) const {
  return recorder_->write(path);
}

std::vector<std::string> available_devices() {
  std::vector<std::string> devices{"cpu"};
  if (!runtime::cuda_built()) return devices;
  // Counting GPUs initialises the CUDA driver once; later calls are cheap.
  static const int gpus = runtime::cuda_device_count();
  for (int i = 0; i < gpus; ++i) devices.push_back("cuda:" + std::to_string(i));
  return devices;
}

int usable_cores() {
  return core::usable_cores();
}

void set_log_severity(LogSeverity severity) {
  set_log_level(static_cast<LogLevel>(static_cast<int>(severity)));
}

LogSeverity log_severity() {
  return static_cast<LogSeverity>(static_cast<int>(log_level()));
}

}  // namespace streamline
