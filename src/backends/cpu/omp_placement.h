// Keeps the calling thread's OpenMP workers off the CPU the calling thread is on.
//
// GOMP's workers sleep when idle for a while. The first parallel region of a run after a
// pause wakes them, and where the kernel sees no idle CPU to put a woken worker on, it puts
// it on the CPU of the thread that woke it. In a virtual machine an idle vCPU whose host
// thread is not running counts as preempted, not idle, so this is what happens on every
// wake-up. The caller then spins at the region's barrier on that one CPU, waiting for a
// worker that cannot run until the scheduler's next tick: 4-8 ms per region until a load
// balance moves one of them. Measured on a 2-vCPU VM: ShuffleNet at 2 threads with 50 ms
// between runs took a median 13.8 ms a run, against 2.6 ms at one thread; a bare
// `#pragma omp parallel` of 2 threads after a pause, 4-10 ms.
//
// place_openmp_workers(n), before a run of n > 1 threads, limits the workers of the
// calling thread's OpenMP pool to the CPUs the caller may use other than the one it is on
// now; a woken worker then lands on another CPU. The workers' thread ids are learnt once per
// calling thread and team size, in one parallel region (in which each worker restricts
// itself); after that the restriction is redone, one system call per worker, only when
// the caller is found on another CPU. The calling thread itself is never changed; its own
// OpenMP regions outside bulkhead use the same pool, so they see the restriction too.
//
// Nothing is done where there is no other CPU to use, where the user chose OpenMP's own
// binding (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY), or with
// BULKHEAD_CPU_PLACE_WORKERS=0.
//
// Thread-safety: any thread may call it; each calling thread has its own OpenMP pool and
// its own record of it (thread_local).
#pragma once

namespace bulkhead::cpu {

void place_openmp_workers(int threads);

// The CPU the calling thread's workers were last kept off (-1: none yet, or nothing was
// done). For tests and diagnostics.
int openmp_workers_kept_off();

}  // namespace bulkhead::cpu
