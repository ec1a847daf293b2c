#include "backend/memory_estimate.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "backend/device_allocator.h"

namespace ds {

namespace {

// Bytes from a "Key:   123 kB" line of a /proc file; 0 when absent.
uint64_t ProcKb(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() &&
        line[key.size()] == ':') {
      std::istringstream ss(line.substr(key.size() + 1));
      uint64_t kb = 0;
      ss >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

// A number from a one-line file; nullopt-like false for "max" or errors.
bool ReadNumber(const std::string& path, uint64_t* out) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return false;
  try {
    size_t pos = 0;
    *out = std::stoull(s, &pos);
    return pos == s.size();
  } catch (...) {
    return false;
  }
}

// This process's cgroup v2 directory ("0::/path" in /proc/self/cgroup).
std::string CgroupDir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return "/sys/fs/cgroup";
}

void Lower(uint64_t* value, std::string* why, uint64_t bytes, const char* reason) {
  if (bytes < *value) {
    *value = bytes;
    *why = reason;
  }
}

uint64_t Saturate(double bytes) {
  if (!(bytes < 1.8e19)) return UINT64_MAX;
  return uint64_t(bytes);
}

}  // namespace

double CpuBufferBytes(double bytes) {
  constexpr double kHuge = double(2 << 20);
  if (bytes < kHuge) return bytes;
  return std::ceil(bytes / kHuge) * kHuge + kHuge;
}

HostMemory AvailableHostMemory() {
  HostMemory m;
  if (uint64_t avail = ProcKb("/proc/meminfo", "MemAvailable"); avail > 0)
    Lower(&m.available, &m.limited_by, avail, "MemAvailable");
  const std::string cg = CgroupDir();
  uint64_t max = 0, cur = 0;
  if (ReadNumber(cg + "/memory.max", &max) && ReadNumber(cg + "/memory.current", &cur))
    Lower(&m.available, &m.limited_by, max > cur ? max - cur : 0, "the cgroup's memory.max");
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t used = ProcKb("/proc/self/status", "VmSize");
    Lower(&m.per_process, &m.process_limited_by, rl.rlim_cur > used ? rl.rlim_cur - used : 0,
          "ulimit -v (RLIMIT_AS)");
  }
  if (::getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t used = ProcKb("/proc/self/status", "VmData");
    Lower(&m.per_process, &m.process_limited_by, rl.rlim_cur > used ? rl.rlim_cur - used : 0,
          "ulimit -d (RLIMIT_DATA)");
  }
  return m;
}

uint64_t EstimateCpuTrainBytes(const NetworkSpec& spec, int64_t max_batch, int64_t max_steps,
                               int threads) {
  const double V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units, L = spec.num_layers,
               B = double(max_batch), T = double(max_steps);
  const double R = B * T;
  const bool dropout = spec.dropout_rate > 0;
  // Parameters: the tensors of the layout (without its padding).
  double P = 0;
  for (const ParamTensor& t : ParamLayout::For(spec).tensors) P += double(t.size());
  // Per layer: permuted and transposed Wx, Wh (G H columns) and the permuted bias.
  const double GH = GateCount(spec.architecture) * H;
  const bool gru = spec.architecture == Architecture::kGru;
  double rnn_copies = 0;
  for (int l = 0; l < spec.num_layers; ++l) {
    const double in = l == 0 ? E : H;
    rnn_copies += 2 * (in + H) * GH + (gru ? 2 : 1) * GH;
  }
  double floats = 4 * P + 5 * P + rnn_copies + V * H;
  // Activations per row and layer, 11 H for both cells: lstm gates 4H, c, tanh c,
  // h, dz 4H; gru gates 3H, u_n, h, dz 3H, dzh 3H.
  floats += 2 * B * H + (gru ? B * GH : 0);
  const double chunk = std::clamp(std::floor(double(1 << 20) / std::max(V, 1.0)), 64.0, 2048.0);
  floats += std::max(threads, 1) * (chunk * V + H * V + V + 4 * T * T + GH);
  double bytes = 4 * floats + (dropout ? R * (E + L * H) : 0);
  // Activations, buffer by buffer (R rows each), as cpu/buffer.h allocates them.
  bytes += CpuBufferBytes(4 * R * E) + 2 * CpuBufferBytes(4 * R * std::max(E, H));
  for (int l = 0; l < spec.num_layers; ++l) {
    for (double w : {GH, H, H, GH, gru ? GH : H}) bytes += CpuBufferBytes(4 * R * w);
    if (dropout) bytes += CpuBufferBytes(4 * R * H);
  }
  return Saturate(bytes);
}

uint64_t EstimateCpuInferBytes(const NetworkSpec& spec, int64_t slots) {
  const double V = spec.vocab_size, E = spec.embedding_dim, H = spec.rnn_units;
  const double GH = GateCount(spec.architecture) * H;
  const bool gru = spec.architecture == Architecture::kGru;
  // z (G H; the gru's second G H for h Wh), tanh c / u_n, the top output, logits.
  double per_slot = (gru ? 2 : 1) * GH + 2 * H + 2 * V;
  // Per layer: state h (and the lstm's c), the gathered [x, h] row.
  for (int l = 0; l < spec.num_layers; ++l) per_slot += (gru ? 1 : 2) * H + (l == 0 ? E : H) + H;
  // The ranged dense's grouping of rows: an index and two row pointers a slot.
  per_slot += double(sizeof(int) + 2 * sizeof(void*)) / 4;
  // The fast path's tables (cpu_backend.h InferOptions), each only up to 64 MiB:
  // layer 0's [V, G H] projection and Wd in panels of 16 ids ([ceil(V / 16)
  // 16, H]). (Precision bf16 adds bf16 copies of the weights, half the
  // weights' size, not counted here.)
  const double cap = double(64 << 20), table = 4 * V * GH, wp = 4 * 16 * std::ceil(V / 16) * H;
  const double fixed = (table <= cap ? table : 0) + (4 * V * H <= cap ? wp : 0);
  return Saturate(4 * per_slot * double(slots) + fixed);
}

Status CheckMemory(uint64_t need, uint64_t per_process, const HostMemory& memory,
                   const std::string& what, const std::string& hint) {
  auto show = [](uint64_t b) {
    return b >= (uint64_t(1) << 60) ? std::string("more than an EiB") : FormatBytes(size_t(b));
  };
  if (need > memory.available)
    return DS_ERR(kResourceExhausted,
                  "{} needs about {} of memory, more than the {} available ({}); {}", what,
                  show(need), show(memory.available), memory.limited_by, hint);
  if (per_process > memory.per_process)
    return DS_ERR(kResourceExhausted,
                  "{} needs about {} of memory{}, more than the {} a process may still use "
                  "({}); {}",
                  what, show(per_process), per_process < need ? " per process" : "",
                  show(memory.per_process), memory.process_limited_by, hint);
  return Status::Ok();
}

}  // namespace ds
