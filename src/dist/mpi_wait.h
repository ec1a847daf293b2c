// Waiting for a non-blocking MPI call without burning the core (src/dist
// only; docs/scale.md "Where a rank's time goes").
//
// Open MPI's blocking calls poll until the other ranks arrive. A rank that
// waits long (the other rank was descheduled on a shared machine, or is
// slower) then takes CPU from everything else. Wait() polls MPI_Test for the
// first 20 us (the usual wait between balanced ranks on idle cores: no added
// latency), then yields the core until 1 ms (on an idle core sched_yield
// returns at once: a poll per microsecond), then sleeps 50 us between polls.
#pragma once

#ifdef DATASYNTH_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#include <time.h>

#include "dist/profile.h"
#include "util/status.h"

namespace ds::dist {

// kInternal naming `call` unless rc is MPI_SUCCESS.
Status CheckMpi(int rc, const char* call);
// Completes `req`; kInternal naming `call` on failure.
Status Wait(MPI_Request* req, const char* call);

// Polls done() with the policy above until it returns true.
template <typename Done>
void WaitUntil(Done done) {
  const double t0 = WallNow();
  while (!done()) {
    const double waited = WallNow() - t0;
    if (waited < 2e-5) continue;  // balanced ranks on idle cores: no added latency
    if (waited < 1e-3) {
      ::sched_yield();
      continue;
    }
    timespec ts{0, 50000};
    ::nanosleep(&ts, nullptr);
  }
}

}  // namespace ds::dist
#endif
