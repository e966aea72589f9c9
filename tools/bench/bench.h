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
	uint32_t window;     /* stress, rate, get: operations (and chunks) in flight */
	int window_set;      /* --window given (get: 1 without it) */
	uint64_t seed;       /* stress: sizes and contents */
	uint64_t timeout_ms; /* stress: every wait */
	uint32_t blocks[32]; /* launch: grid sizes */
	int nblocks;
	const char *file;    /* file-read, file-write: --file */
	int nsizes_set;      /* --sizes given */
};
#define GICE_BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))
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

/* Payload contents: n bytes that depend on seed (xorshift), for checking what arrived. */
void bench_pattern(uint8_t *p, size_t n, uint64_t seed);
/* Timed iterations for a message size: --iters, else 20000 up to 64 B, 10000 up to 4 KiB,
 * 2000 up to 64 KiB, 200 above. */
long bench_default_iters(size_t bytes);

/* The column names, then one row per result, aligned or CSV (--csv). */
void header(void);
void row(const char *bench, const char *transport, int ranks, size_t bytes, long iters, double p50, double p99,
	 double mbps, double busbw);

/* ---------------------------------------------------------------- pairs of devices (bench_pair.c)
 * The two devices of put, stress and rate: both in this process when it runs alone (one rank),
 * else one per rank, ranks paired 0<->1, 2<->3, ... (an odd last rank sits out: active 0).
 * Side 0 is the first of the pair (the even rank), side 1 the second; role is this rank's. */
struct bench_side {
	int local;         /* this process has the device and runs its kernels */
	gice_device_t *d;  /* local sides only */
	gice_stream_t *s;
	uint32_t gid;      /* global device id (the partner's too, when active) */
	gice_conn_t c;     /* to the other side, after bench_pair_connect */
};

struct bench_pair {
	uint32_t world, rank, role, partner, pairs;
	int active;
	struct bench_side sd[2];
};

/* The largest of --sizes (at least 1): each side's buffers are that big; attr's HBM is raised
 * to hold two of them when the default would not. */
size_t bench_pair_sizes(gice_device_attr_t *attr);
/* Open the local side(s) with attr, a stream each (collective across ranks). */
void bench_pair_open(struct bench_pair *p, const gice_device_attr_t *attr);
/* Open each local side's connection to the other side. */
void bench_pair_connect(struct bench_pair *p);
/* pub holds two entries of len bytes, one per side, the local ones filled: fill the partner's
 * from its rank (an allgather: every rank calls it, active or not). */
void bench_pair_exchange(struct bench_pair *p, void *pub, size_t len);
void bench_pair_close(struct bench_pair *p);
/* Counter c of local side s must read exactly want with no failure recorded: 0, else a
 * "BENCH: device N: FAILED: WHAT (counter C) reads ..." line on stderr and 1. */
int bench_counter_exact(const char *bench, const struct bench_side *s, gice_counter_t c, uint64_t want,
			const char *what);

/* ---------------------------------------------------------------- the training-step loop (bench_step.c)
 * Side 0 of a pair: per iteration a kernel computes `chunks` pieces of a gradient of `bytes`
 * and, with comm, puts each piece to side 1 as soon as it is computed; the next iteration waits
 * (stream wait) for every piece's completion. */
struct bench_step {
	struct bench_pair p;
	size_t bytes;
	uint8_t *buf[2];         /* local sides: side 0's gradient, side 1's receive buffer */
	gice_counter_t sent[2];  /* side 0: pieces completed */
	uint64_t rkey;           /* side 1's buffer */
	gice_counter_t sig;      /* side 1: pieces arrived */
	uint64_t pieces;         /* pieces sent so far */
};
void bench_step_open(struct bench_step *st, size_t bytes);
/* Run iters iterations (work: compute elements per piece, 0 none); on side 0's rank fills
 * iter_ns[iters] with each iteration's duration on the device. 0, else 1 (a counter off). */
int bench_step_run(struct bench_step *st, uint32_t chunks, int comm, uint64_t work, long iters, uint64_t *iter_ns);
void bench_step_close(struct bench_step *st);
/* ns per compute element, measured on the calling thread. */
double bench_step_ns_per_work(void);
/* fn once per control mode: the mode GICE_MODE names, or under a launcher "device"; one process
 * without GICE_MODE: "device", then "host", each after re-initialising the library. ORs the
 * results. */
int bench_modes(int (*fn)(const char *mode));

/* The sub-commands. */
int bench_trigger(void);
int bench_put(void);
int bench_get(void);   /* bench_get.c */
int bench_idle(void);
int bench_memcpy(void);
int bench_launch(void);
int bench_stress(void);
int bench_rate(void);
int bench_file_read(void);  /* bench_file.c */
int bench_file_write(void);
int bench_soak(void);
int bench_barrier(void); /* bench_team.c */
int bench_allreduce(void); /* bench_coll.c */
int bench_allgather(void);
int bench_reduce_scatter(void);
int bench_broadcast(void);
int bench_alltoall(void);
int bench_overlap(void);     /* bench_overlap.c */
int bench_cpu_noise(void);   /* bench_noise.c */
int bench_first_kernel(void); /* bench_first.c */

#endif
