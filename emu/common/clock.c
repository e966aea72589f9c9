/* clock.c: gice's clocks. gice_clock_ns is CLOCK_MONOTONIC. Where the TSC is invariant (CPUID
 * 0x80000007 EDX bit 8: one constant rate on every CPU, in every C-state; Linux's constant_tsc and
 * nonstop_tsc), it is read as the TSC scaled from the thread's last CLOCK_MONOTONIC reading (its
 * anchor), taken again once that is a millisecond old: a reading costs ~12 ns where
 * clock_gettime costs ~27 on the KVM VMs this was measured on (test_clock prints both), and
 * every kernel request is stamped (api_push_req). The scale is measured over the process's first 20 ms
 * (both clocks read at the first call and at one 20 ms later); until then, without an
 * invariant TSC, and with GICE_CLOCK=os, every call reads CLOCK_MONOTONIC. Interpolating over at most 1 ms, a scale off
 * by its measuring error (~50 ns in 20 ms) is off by a few ns; a thread's readings never go back
 * (one that passed its next anchor keeps its value until the clock catches up). Other processes
 * read the same CLOCK_MONOTONIC, within those few ns (leases, heartbeats). rdtsc is not ordered
 * with the loads before it: a reading may be early by the length of the instruction window
 * (tens of ns), as a held clock (common.h) is early by a pass. So two threads' readings keep
 * their order only to within tens of ns: the readers compare with margins far above that, and
 * a stage record that pairs another thread's stamp with its own clamps it (api_ev_wait,
 * coll_ring.c's chunk_woke; seen in test_trace.sh: an arrival 7-70 ns after the wake-up). */
#include "emu/common/common.h"

#include <pthread.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "emu/common/config.h"

#define ANCHOR_NS 1000000ull /* a thread's anchor is taken again when this old */
#define SCALE_NS 20000000ull /* the scale is measured over this long */
#define ANCHOR_TICKS_MAX 20000u /* a reading of CLOCK_MONOTONIC takes ~60 ticks; 20000, ~10 us */

enum { SCALE_NONE, SCALE_MEASURING, SCALE_SET, SCALE_OFF };

static struct {
	pthread_mutex_t lock;
	_Atomic int state;
	uint64_t tsc0, ns0;     /* the first reading (written before state goes MEASURING) */
	_Atomic uint64_t mult;  /* ns per tick << 32 (0: not set) */
	_Atomic uint64_t span;  /* ticks in ANCHOR_NS (written before mult) */
} scale = {.lock = PTHREAD_MUTEX_INITIALIZER};

__thread uint64_t gice_clock_held __attribute__((tls_model("initial-exec")));
static __thread uint64_t a_tsc __attribute__((tls_model("initial-exec")));
static __thread uint64_t a_ns __attribute__((tls_model("initial-exec")));
static __thread uint64_t last __attribute__((tls_model("initial-exec")));

static uint64_t os_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* Whether to read the TSC: it is invariant, and GICE_CLOCK does not say os. */
static int tsc_usable(void)
{
	const char *v = gice_param_str(gice_param_find(gice_common_params, "GICE_CLOCK"));
	unsigned a, b, c, d;

	if (!strcmp(v, "os"))
		return 0;
	if (strcmp(v, "auto"))
		gice_warn("clock", "GICE_CLOCK=%s: expected auto or os; auto", v);
	return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
}

/* A reading of both clocks at (tsc, ns): the first starts the measuring, one SCALE_NS later
 * ends it. */
static void measure(uint64_t tsc, uint64_t ns)
{
	int st = atomic_load_explicit(&scale.state, memory_order_acquire);

	if (st == SCALE_SET || st == SCALE_OFF || (st == SCALE_MEASURING && ns - scale.ns0 < SCALE_NS))
		return;
	pthread_mutex_lock(&scale.lock);
	st = atomic_load_explicit(&scale.state, memory_order_relaxed);
	if (st == SCALE_NONE) {
		scale.tsc0 = tsc;
		scale.ns0 = ns;
		atomic_store_explicit(&scale.state, tsc_usable() ? SCALE_MEASURING : SCALE_OFF, memory_order_release);
	} else if (st == SCALE_MEASURING && ns - scale.ns0 >= SCALE_NS) {
		uint64_t ticks = tsc - scale.tsc0, m = 0;
		if (tsc > scale.tsc0)
			m = (uint64_t)(((unsigned __int128)(ns - scale.ns0) << 32) / ticks);
		/* a TSC between 100 MHz and 20 GHz, or none to trust */
		if (m > (10ull << 32) || m < (1ull << 32) / 20) {
			atomic_store_explicit(&scale.state, SCALE_OFF, memory_order_relaxed);
		} else {
			atomic_store_explicit(&scale.span, (uint64_t)(((unsigned __int128)ANCHOR_NS << 32) / m),
					      memory_order_relaxed);
			atomic_store_explicit(&scale.mult, m, memory_order_release);
			atomic_store_explicit(&scale.state, SCALE_SET, memory_order_relaxed);
		}
	}
	pthread_mutex_unlock(&scale.lock);
}

/* A new anchor: CLOCK_MONOTONIC, with the TSC at its middle; read again (a few times at most)
 * when the thread was preempted in between, which would leave the middle microseconds off. */
static uint64_t anchor(void)
{
	uint64_t t0, t1, ns;

	for (int tries = 0;; tries++) {
		t0 = __rdtsc();
		ns = os_ns(CLOCK_MONOTONIC);
		t1 = __rdtsc();
		if (t1 - t0 < ANCHOR_TICKS_MAX || tries == 3)
			break;
	}
	a_tsc = t0 + (t1 - t0) / 2;
	a_ns = ns;
	if (t1 - t0 < ANCHOR_TICKS_MAX) /* the scale takes only sharp readings */
		measure(a_tsc, ns);
	if (ns > last)
		last = ns;
	return last;
}

uint64_t gice_clock_ns(void)
{
	uint64_t m = atomic_load_explicit(&scale.mult, memory_order_acquire);

	if (gice_likely(m)) {
		uint64_t d = __rdtsc() - a_tsc;
		if (d < atomic_load_explicit(&scale.span, memory_order_relaxed)) {
			uint64_t v = a_ns + (uint64_t)(((unsigned __int128)d * m) >> 32);
			if (v > last)
				last = v;
			return last;
		}
	}
	return anchor();
}
#else
uint64_t gice_clock_ns(void) { return os_ns(CLOCK_MONOTONIC); }
#endif

const char *gice_clock_source(void)
{
#if defined(__x86_64__)
	if (atomic_load_explicit(&scale.mult, memory_order_acquire))
		return "tsc";
#endif
	return "CLOCK_MONOTONIC";
}

uint64_t gice_coarse_ns(void) { return os_ns(CLOCK_MONOTONIC_COARSE); }
