/* bench_stress.h: gice-bench stress, shared by its host side (bench_stress.c) and its kernels
 * and content streams (stress_kernels.c).
 *
 * A checked workload for reliability testing (lossy links, GICE_FAULTS). Phase 1: device A
 * (role 0) puts --iters messages of pseudo-random sizes into a ring at device B (role 1), each a
 * put_signal adding 1 to a counter of B, in windows of --window; B verifies every byte of each
 * window and returns a credit (an 8-byte put_signal to a counter of A) before A reuses the
 * window's ring slots. Phase 2: --bytes from A to B and from B to A at once, in --chunk pieces.
 * Contents depend only on (seed, put or direction, byte offset), so any lost, stale, duplicated
 * or corrupted byte is found. At the end every signal and completion counter must read exactly
 * what was sent. */

#ifndef GICE_BENCH_STRESS_H
#define GICE_BENCH_STRESS_H

#include <stddef.h>
#include <stdint.h>

#include "api/gice.h"

#define STRESS_MAX_PUT  65536u    /* largest phase-1 put; one ring slot */
#define STRESS_XCHG     (1ull << 62) /* content stream of phase 2, + sender's role */
#define STRESS_CORRUPT  1000      /* kstate.rc of a payload mismatch (not a gice status) */

/* Contents: byte j of content stream s is byte j % 8 (little-endian) of a hash of (--seed, s,
 * j / 8). stress_base(s) names the stream; stress_fill writes its first n bytes; stress_check
 * returns the first offset where p differs from it (with the expected and found bytes), -1 if
 * none. stress_size(i) is the size of put i of phase 1. */
uint64_t stress_base(uint64_t stream);
void stress_fill(uint8_t *p, size_t n, uint64_t base);
long stress_check(const uint8_t *p, size_t n, uint64_t base, uint8_t *expect, uint8_t *found);
uint32_t stress_size(long i);

/* One per kernel: written by the kernel, read by the host. */
struct kstate {
	_Atomic int finished;      /* the kernel has returned (release: rc, msg and t_end are set) */
	_Atomic uint64_t progress; /* bumped on every step, for the host's stall watchdog */
	int rc;                    /* GICE_OK, a gice status or STRESS_CORRUPT */
	uint64_t t_end;            /* now_ns() at the kernel's end */
	char msg[512];             /* what failed, with the values */
};

struct s1_args {
	struct kstate *ks;
	uint32_t me, peer;           /* global device ids, for messages */
	gice_conn_t c;
	uint8_t *ring;               /* A: sources, B: targets; 2 * window slots of STRESS_MAX_PUT */
	uint8_t *scratch;            /* B: source of the credit puts */
	uint64_t peer_ring_key;      /* A: B's ring */
	uint64_t peer_scratch_key;   /* B: A's scratch, target of the credits */
	gice_counter_t peer_sig;     /* A: B's signal counter; B: A's credit counter */
	gice_counter_t sig;          /* B: bumped by every put; A: credits from B */
	gice_counter_t done;         /* own completions */
	const uint32_t *sizes;
	long iters;
	uint32_t window;
	uint64_t tmo_us;
};

struct s2_args {
	struct kstate *ks;
	uint32_t me, peer;
	int role;
	gice_conn_t c;
	uint8_t *src, *dst;
	uint64_t peer_dst_key;
	gice_counter_t peer_sig, sig, done;
	size_t bytes, chunk;
	uint32_t window;
	uint64_t tmo_us;
};

/* The kernels: phase 1's sender (A) and verifier (B), phase 2's kernel (both). */
void s1_sender(gice_kctx_t *k, void *a_);
void s1_verifier(gice_kctx_t *k, void *a_);
void s2_kernel(gice_kctx_t *k, void *a_);

#endif
