// The worker side of process isolation: `bulkhead worker --fd N` serves one supervisor
// over the socket N. It loads the model it is sent into an ordinary in-process Session
// (on any device the options name), then answers runs one at a time: inputs are views
// of the supervisor's input region (mapped read-only), outputs are copied once into an
// output region the supervisor offered, or a new one when none fits (output_regions.h).
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
