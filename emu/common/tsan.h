/* tsan.h: an order ThreadSanitizer cannot see, told to it. Threads of this process are often
 * ordered only through other processes: data a kernel stored into a same-host peer's memory
 * (NVLink plane) comes back from another host through a CT thread here; a buffer written
 * before gice_barrier is read by a CT thread serving a peer's get that the barrier released.
 * Every way information leaves this process (a packet sent, a store or counter add on the
 * plane, a bootstrap exchange) is a release, and every packet taken in an acquire, of one
 * token: what a thread did before anything left happens-before what a CT thread does with
 * whatever arrives after. Only an arrival after the departure is ordered, as causality allows.
 * No code in builds without ThreadSanitizer. */
#ifndef GICE_TSAN_H
#define GICE_TSAN_H

#ifdef __SANITIZE_THREAD__
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
extern char gice_tsan_job;
#define GICE_TSAN_OUT() __tsan_release(&gice_tsan_job)
#define GICE_TSAN_IN() __tsan_acquire(&gice_tsan_job)
/* Around a provider's progress, which may copy our memory for a peer's remote read (shm's
 * path when it cannot use CMA): libfabric is not instrumented, and that copy is ordered before
 * the reader's completion only by its own atomics; unseen, the next write of the memory after
 * the read completed would look like a race with it. Reads only: writes stay checked. */
#define GICE_TSAN_PROVIDER_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define GICE_TSAN_PROVIDER_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define GICE_TSAN_OUT() ((void)0)
#define GICE_TSAN_IN() ((void)0)
#define GICE_TSAN_PROVIDER_BEGIN() ((void)0)
#define GICE_TSAN_PROVIDER_END() ((void)0)
#endif

#endif
