// The backend module loader (backend/module.h): a module of another build, of
// another ABI, or without the entry point is refused with an error naming the
// file and both builds; the search path and its environment override; the
// registry's error when the CUDA module cannot be loaded. The fake modules
// are built from tests/fake_backend_module.c (CMakeLists.txt).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "backend/device.h"
#include "backend/module.h"
#include "backend/registry.h"

namespace ds {
namespace {

std::string Fake(const std::string& kind) {
  return std::string(DS_FAKE_MODULE_DIR) + "/libfake_module_" + kind + ".so";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(BackendModuleTest, ModuleOfAnotherAbiIsRefused) {
  auto m = OpenBackendModule(Fake("abi"), DeviceKind::kCuda);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
  const std::string msg = m.status().message();
  EXPECT_TRUE(Contains(msg, "is from another build of datasynth")) << msg;
  EXPECT_TRUE(Contains(msg, Fake("abi"))) << msg;
  EXPECT_TRUE(Contains(msg, "module ABI 999")) << msg;
  EXPECT_TRUE(Contains(msg, "this datasynth: ABI " + std::to_string(kBackendModuleAbi))) << msg;
  EXPECT_TRUE(Contains(msg, BackendModuleBuildId())) << msg;
}

TEST(BackendModuleTest, ModuleOfAnotherBuildIsRefused) {
  auto m = OpenBackendModule(Fake("build"), DeviceKind::kCuda);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kCorrupt);
  EXPECT_TRUE(Contains(m.status().message(), "build 0.0.0-otherbuild")) << m.status().message();
}

TEST(BackendModuleTest, LibraryWithoutEntryPointIsRefused) {
  auto m = OpenBackendModule(Fake("none"), DeviceKind::kCuda);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(m.status().message(), "no datasynth_backend_module_v1 symbol"))
      << m.status().message();
  auto missing = OpenBackendModule("/nonexistent/libdatasynth_cuda.so", DeviceKind::kCuda);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "cannot load the cuda backend module"))
      << missing.status().message();
}

TEST(BackendModuleTest, SearchPathStartsNextToTheBinary) {
  unsetenv("DATASYNTH_CUDA_MODULE");
  auto path = ModuleSearchPath(DeviceKind::kCuda);
  ASSERT_FALSE(path.empty());
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  std::string dir(exe, size_t(n));
  dir = dir.substr(0, dir.rfind('/'));
  EXPECT_EQ(path[0], dir + "/libdatasynth_cuda.so");
  setenv("DATASYNTH_CUDA_MODULE", "/nonexistent/x.so", 1);
  EXPECT_EQ(ModuleSearchPath(DeviceKind::kCuda), std::vector<std::string>{"/nonexistent/x.so"});
  auto found = FindBackendModule(DeviceKind::kCuda);
  ASSERT_FALSE(found.ok());
  EXPECT_TRUE(
      Contains(found.status().message(), "DATASYNTH_CUDA_MODULE=/nonexistent/x.so: no such file"))
      << found.status().message();
  unsetenv("DATASYNTH_CUDA_MODULE");
}

// Through the process-wide load (once per process, hence in a child): the
// registry and the device probe both report the refused module.
TEST(BackendModuleTest, RegistryReportsARefusedModule) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("DATASYNTH_CUDA_MODULE", Fake("abi").c_str(), 1);
        Status st = BackendAvailable(Architecture::kLstm, DeviceKind::kCuda);
        std::fprintf(stderr, "[%s]\n", st.message().c_str());
        const bool refused = st.code() == Code::kUnavailable &&
                             Contains(st.message(), "no cuda backend: the cuda backend module") &&
                             Contains(st.message(), "is from another build") &&
                             LoadedBackendModule(DeviceKind::kCuda) == nullptr;
        std::fflush(stderr);
        _exit(refused ? 7 : 1);
      },
      ::testing::ExitedWithCode(7), "module ABI 999");
}

}  // namespace
}  // namespace ds
