// The worker side of process isolation: `bulkhead worker --fd N` serves one supervisor
// over the socket N. It loads the model it is sent into an ordinary in-process Session
// (on any device the options name), then answers runs one at a time: inputs are views
// of the supervisor's sealed region, outputs are copied once into a region of its own.
// It exits when the supervisor closes the socket, and the kernel kills it when the
// supervisor's launcher thread goes (PR_SET_PDEATHSIG, which it sets first thing).
//
// Single-threaded loop (the Session uses its own intra-op threads).
#pragma once

namespace bulkhead::isolate {

// Serves until the peer closes `fd`; returns the process exit code (0 on a clean close).
// `parent` > 0: the supervisor's pid; the worker exits at once if it is already gone.
int worker_main(int fd, int parent);

}  // namespace bulkhead::isolate
