/* Backend modules that the loader (src/backend/module.h) must refuse, for
 * backend_module_test. Only the part of BackendModule that the loader reads
 * first, in plain C:
 *   FAKE_abi    the entry point, of a newer module ABI
 *   FAKE_build  the entry point and this ABI, but another build's id
 *   FAKE_none   a shared object without the entry point */
#include <stdint.h>

struct FakeModuleHead {
  uint32_t abi;
  const char* build_id;
  const char* name;
};

#if defined(FAKE_abi)
static const struct FakeModuleHead kHead = {999u, "0.0.0-fakefakefake", "cuda"};
#elif defined(FAKE_build)
static const struct FakeModuleHead kHead = {1u, "0.0.0-otherbuild", "cuda"};
#endif

#if defined(FAKE_abi) || defined(FAKE_build)
__attribute__((visibility("default"))) const struct FakeModuleHead* datasynth_backend_module_v1(
    void) {
  return &kHead;
}
#else
__attribute__((visibility("default"))) int not_a_datasynth_module(void) { return 1; }
#endif
