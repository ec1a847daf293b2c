#include "backend/module.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#ifndef DS_BUILD_ID
#error "DS_BUILD_ID must be defined for backend/module.cc (CMakeLists.txt)"
#endif

namespace ds {
namespace {

namespace fs = std::filesystem;

std::string DirOf(const std::string& file) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::path(file), ec);
  if (ec) p = fs::path(file);
  return p.parent_path().string();
}

// The directory of the shared object that holds this code (the Python
// package's _core module), or "" inside the executable (ExeDir covers it:
// dladdr's name for the executable is argv[0], which may be relative to the
// working directory, a directory never searched).
std::string OwnDir() {
  Dl_info info{};
  struct link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&FindBackendModule), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || map->l_name == nullptr || map->l_name[0] != '/')
    return "";
  return DirOf(map->l_name);
}

std::string ExeDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

bool Built(DeviceKind device) {
#ifdef DS_CUDA_MODULE
  return device == DeviceKind::kCuda;
#else
  return false;
#endif
}

}  // namespace

const char* BackendModuleBuildId() { return DS_BUILD_ID; }

const char* ModuleFileName(DeviceKind device) {
  return device == DeviceKind::kCuda ? "libdatasynth_cuda.so" : "";
}
const char* ModuleEnvVar(DeviceKind device) {
  return device == DeviceKind::kCuda ? "DATASYNTH_CUDA_MODULE" : "";
}

std::vector<std::string> ModuleSearchPath(DeviceKind device) {
  if (const char* env = std::getenv(ModuleEnvVar(device)); env && *env) return {env};
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d) {
    if (d.empty()) return;
    for (const auto& x : dirs)
      if (x == d) return;
    dirs.push_back(d);
  };
  add(OwnDir());
  const std::string exe = ExeDir();
  add(exe);
  if (!exe.empty()) add((fs::path(exe).parent_path() / "lib" / "datasynth").string());
#ifdef DS_MODULE_INSTALL_DIR
  add(DS_MODULE_INSTALL_DIR);
#endif
  std::vector<std::string> files;
  for (const auto& d : dirs) files.push_back((fs::path(d) / ModuleFileName(device)).string());
  return files;
}

Result<std::string> FindBackendModule(DeviceKind device) {
  const char* env = std::getenv(ModuleEnvVar(device));
  const bool overridden = env && *env;
  if (!overridden && !Built(device))
    return DS_ERR(kUnavailable, "this datasynth was built without {}",
                  device == DeviceKind::kCuda ? "CUDA" : DeviceKindName(device));
  std::vector<std::string> path = ModuleSearchPath(device);
  std::string looked;
  for (const auto& f : path) {
    std::error_code ec;
    if (fs::is_regular_file(f, ec)) return f;
    looked += (looked.empty() ? "" : ", ") + f;
  }
  if (overridden) return DS_ERR(kUnavailable, "{}={}: no such file", ModuleEnvVar(device), env);
  return DS_ERR(kUnavailable,
                "the {} backend module {} is not installed (looked for {}; set {} to its path)",
                DeviceKindName(device), ModuleFileName(device), looked, ModuleEnvVar(device));
}

Result<const BackendModule*> OpenBackendModule(const std::string& path, DeviceKind device) {
  // Never closed: the registry's rows and the backends point into it.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return DS_ERR(kUnavailable, "cannot load the {} backend module: {}", DeviceKindName(device),
                  err ? err : path);
  }
  using Entry = const BackendModule* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, DS_BACKEND_MODULE_ENTRY_NAME));
  if (entry == nullptr)
    return DS_ERR(kUnavailable, "{} is not a datasynth backend module of ABI {} (no {} symbol)",
                  path, kBackendModuleAbi, DS_BACKEND_MODULE_ENTRY_NAME);
  const BackendModule* m = entry();
  if (m == nullptr)
    return DS_ERR(kUnavailable, "{}: {} returned no module", path, DS_BACKEND_MODULE_ENTRY_NAME);
  const char* id = m->build_id ? m->build_id : "?";
  if (m->abi != kBackendModuleAbi || std::strcmp(id, BackendModuleBuildId()) != 0)
    return DS_ERR(kCorrupt,
                  "the {} backend module {} is from another build of datasynth (module ABI {}, "
                  "build {}; this datasynth: ABI {}, build {}); install the module built with "
                  "this binary or set {}",
                  DeviceKindName(device), path, m->abi, id, kBackendModuleAbi,
                  BackendModuleBuildId(), ModuleEnvVar(device));
  if (m->device != device || m->add_backends == nullptr || m->probe == nullptr)
    return DS_ERR(kCorrupt, "{} is not a {} backend module", path, DeviceKindName(device));
  return m;
}

namespace {
struct Loaded {
  std::once_flag once;
  Result<const BackendModule*> module = DS_ERR(kInternal, "not loaded");
  std::atomic<const BackendModule*> ok{nullptr};
};
Loaded& Slot(DeviceKind device) {
  static Loaded cuda;  // the only module device so far
  (void)device;
  return cuda;
}
}  // namespace

Result<const BackendModule*> LoadBackendModule(DeviceKind device) {
  if (device == DeviceKind::kCpu)
    return DS_ERR(kInternal, "the CPU backend is built in, not a module");
  Loaded& slot = Slot(device);
  std::call_once(slot.once, [&] {
    slot.module = [&]() -> Result<const BackendModule*> {
      DS_ASSIGN_OR_RETURN(std::string path, FindBackendModule(device));
      DS_ASSIGN_OR_RETURN(const BackendModule* m, OpenBackendModule(path, device));
      std::vector<BackendEntry> rows;
      m->add_backends(&rows);
      AddBackends(std::move(rows));
      return m;
    }();
    if (slot.module.ok()) slot.ok = slot.module.value();
  });
  return slot.module;
}

const BackendModule* LoadedBackendModule(DeviceKind device) {
  return device == DeviceKind::kCpu ? nullptr : Slot(device).ok.load();
}

bool CudaDriverHasDevice(std::string* why) {
  // The driver API's own types: CUresult is an int enum; 0 is CUDA_SUCCESS.
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using ErrorString = int (*)(int, const char**);
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = ::dlerror();
    *why = fmt::format("no CUDA driver ({})", err ? err : "libcuda.so.1 not found");
    return false;
  }
  auto init = reinterpret_cast<Init>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(h, "cuDeviceGetCount"));
  auto error_string = reinterpret_cast<ErrorString>(::dlsym(h, "cuGetErrorString"));
  if (init == nullptr || count == nullptr) {
    *why = "the CUDA driver libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    return false;
  }
  auto text = [&](int rc) {
    const char* s = nullptr;
    if (error_string == nullptr || error_string(rc, &s) != 0 || s == nullptr) s = "unknown error";
    return fmt::format("{} (CUresult {})", s, rc);
  };
  int n = 0;
  if (int rc = init(0); rc != 0) {
    *why = fmt::format("the CUDA driver does not start: cuInit: {}", text(rc));
    return false;
  }
  if (int rc = count(&n); rc != 0 || n <= 0) {
    *why = rc != 0 ? fmt::format("cuDeviceGetCount: {}", text(rc)) : "the CUDA driver sees no GPU";
    return false;
  }
  return true;
}

}  // namespace ds
