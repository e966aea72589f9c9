/* common.h: what every gice module may use: status codes, logging, atomics, time, futex.
 * Depends on nothing else in gice. */
#ifndef GICE_COMMON_H
#define GICE_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api/gice_status.h"

#define GICE_CACHELINE 64
#define GICE_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t)(a) - 1))
#define GICE_ALIGN_DOWN(x, a) ((x) & ~((uint64_t)(a) - 1))
#define GICE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GICE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define GICE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define gice_likely(x) __builtin_expect(!!(x), 1)
#define gice_unlikely(x) __builtin_expect(!!(x), 0)

/* ---- logging: GICE_LOG_LEVEL=off|error|warn|info|debug|trace, GICE_LOG_SUBSYS=tm,ct,... ---- */
enum { GICE_LOG_ERROR, GICE_LOG_WARN, GICE_LOG_INFO, GICE_LOG_DEBUG, GICE_LOG_TRACE };

int gice_log_enabled(int level, const char *subsys);
/* Name this process's rank in every line ("gice[rank R pid P]"); messages name devices by their
 * global id. -1 (the default) shows the pid only. */
void gice_log_set_rank(int rank);
void gice_log_write(int level, const char *subsys, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define gice_log(level, subsys, ...)                                                   \
	do {                                                                           \
		if (gice_log_enabled(level, subsys))                                   \
			gice_log_write(level, subsys, __FILE__, __LINE__, __VA_ARGS__); \
	} while (0)
#define gice_error(subsys, ...) gice_log(GICE_LOG_ERROR, subsys, __VA_ARGS__)
#define gice_warn(subsys, ...) gice_log(GICE_LOG_WARN, subsys, __VA_ARGS__)
#define gice_info(subsys, ...) gice_log(GICE_LOG_INFO, subsys, __VA_ARGS__)
#define gice_debug(subsys, ...) gice_log(GICE_LOG_DEBUG, subsys, __VA_ARGS__)
#define gice_trace(subsys, ...) gice_log(GICE_LOG_TRACE, subsys, __VA_ARGS__)

/* ---- time ---- */
uint64_t gice_clock_ns(void); /* CLOCK_MONOTONIC, read now (through the TSC where invariant: clock.c) */
/* What gice_clock_ns reads: "tsc" once its scale is measured (the process's first 20 ms), else
 * "CLOCK_MONOTONIC". */
const char *gice_clock_source(void);
/* A thread may hold its clock for a short burst of work that stamps much (a link pass taking in
 * what arrived: packets, counters, traces): gice_now_ns() then returns the held time, one clock
 * read for the burst instead of one per stamp (~20 ns each). Held only within such a burst,
 * never across a wait. */
extern __thread uint64_t gice_clock_held __attribute__((tls_model("initial-exec")));
static inline uint64_t gice_now_ns(void) /* CLOCK_MONOTONIC, or the held time */
{
	return gice_clock_held ? gice_clock_held : gice_clock_ns();
}
static inline void gice_clock_hold(void) { gice_clock_held = gice_clock_ns(); }
static inline void gice_clock_release(void) { gice_clock_held = 0; }
/* CLOCK_MONOTONIC_COARSE: a few ns instead of ~20, a few ms behind at worst: for heartbeats,
 * progress notes and timeouts, never for stage timestamps or round trips. */
uint64_t gice_coarse_ns(void);
/* The CPUs the calling thread may run on (its affinity mask; at least 1). */
uint32_t gice_cpus_usable(void);

static inline void gice_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- spinner budgets: at most max threads of a group spin at once ---- */
/* Take a place among *used: 1 if the caller may spin (gice_spin_put when it stops), 0 if it
 * should sleep at once. *used may pass max for a moment (a taker that gives its place back). */
static inline int gice_spin_get(_Atomic uint32_t *used, uint32_t max)
{
	if (atomic_fetch_add_explicit(used, 1, memory_order_relaxed) < max)
		return 1;
	atomic_fetch_sub_explicit(used, 1, memory_order_relaxed);
	return 0;
}
static inline void gice_spin_put(_Atomic uint32_t *used) { atomic_fetch_sub_explicit(used, 1, memory_order_relaxed); }

/* ---- futex on shared (not process-private) words: wakes cross processes ---- */
/* Sleep while *word == expected, at most timeout_ns (UINT64_MAX: forever). Returns 0 on wake or
 * value change, GICE_ERR_TIMED_OUT on timeout. Spurious wake-ups are possible. */
int gice_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns);
/* Wake up to n sleepers on word. */
void gice_futex_wake(_Atomic uint32_t *word, int n);

/* ---- threads ---- */
/* Join thread t if it ends by deadline_ns (gice_now_ns time), else detach it and leave it to
 * run on: 1 joined, 0 left. For a thread that may be stuck in a call that never returns. */
int gice_join_by(pthread_t t, uint64_t deadline_ns);

/* ---- random ---- */
uint64_t gice_random_u64(void); /* getrandom(2); used for memory keys and job secrets */

#endif
