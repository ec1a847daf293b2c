// NCCL for src/dist/nccl.cc, inside the CUDA backend module (backend/module.h
// NcclOps): the CUDA runtime and NCCL calls, so that dscore links neither.
#pragma once

#include "backend/module.h"

namespace ds::cuda {

// The module's NCCL operations, or nullptr when it was built without NCCL
// (DATASYNTH_HAVE_NCCL).
const NcclOps* NcclOpsOrNull();

}  // namespace ds::cuda
