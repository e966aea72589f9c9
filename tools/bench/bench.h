/* bench.h: what the benchmarks of gice-bench share — the parsed options, the clock, the
 * percentiles, the error exit and the output rows. bench_main.c parses the command line and
 * calls one bench_<name>() per sub-command; each returns the process's exit status (0, 1). */
#ifndef GICE_BENCH_H
#define GICE_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "api/gice.h"

struct bench_opt {
	int csv, check, stages;
	const char *provider;
	long iters;
	int iters_set;       /* --iters given (stress: 0 skips the puts) */
	size_t sizes[32];
	int nsizes;
	size_t bytes, chunk; /* stress: exchange size and its pieces (0: one put) */
	uint32_t window;     /* stress: puts (and chunks) in flight */
	uint64_t seed;       /* stress: sizes and contents */
	uint64_t timeout_ms; /* stress: every wait */
	uint32_t blocks[32]; /* launch: grid sizes */
	int nblocks;
};
extern struct bench_opt opt;

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The p-quantile (0..1) of n samples in ns, in us; sorts v. */
double pct(uint64_t *v, long n, double p);

/* Print "gice-bench: what: STATUS (text)" on stderr and exit 1. */
void die(const char *what, int rc) __attribute__((noreturn));
#define CHECK(call)                           \
	do {                                  \
		int rc_ = (call);             \
		if (rc_)                      \
			die(#call, rc_);      \
	} while (0)

/* The column names, then one row per result, aligned or CSV (--csv). */
void header(void);
void row(const char *bench, const char *transport, int ranks, size_t bytes, long iters, double p50, double p99,
	 double mbps, double busbw);

/* The sub-commands. */
int bench_trigger(void);
int bench_put(void);
int bench_idle(void);
int bench_memcpy(void);
int bench_launch(void);
int bench_stress(void);

#endif
