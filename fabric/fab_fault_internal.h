/* fab_fault_internal.h: state shared by the fault injector's files (not for other modules):
 * fab_fault.c (the endpoint: configuration, holds, ops), fab_fault_decide.c (what happens to a
 * packet: rules, keyed decisions) and fab_fault_pace.c (latency and rate: the token buckets). */
#ifndef GICE_FAB_FAULT_INTERNAL_H
#define GICE_FAB_FAULT_INTERNAL_H

#include <pthread.h>

#include "fabric/fab_fault.h"

#define FF_SLOTS_MAX 64
#define FF_SLOTS_MIN 8
#define FF_POOL_BYTES (8u << 20) /* fewer slots for large packets, down to FF_SLOTS_MIN */
#define FF_REORDER_NS 1000000ull /* a reordered packet waits at most this for the next one */
#define FF_NOT_FAST UINT64_MAX
#define FF_ONE (9007199254740992.0) /* 2^53: probabilities become 53-bit thresholds */
#define FF_ATT_RING 1024u           /* psns remembered per peer (their transmissions) */
#define FF_BUNDLE_MAX 1024u         /* packets of one fabric message a plan describes */

/* A rule in force: the spec's rule, its thresholds, and its window made absolute. */
typedef struct {
	gice_fault_rule_t r;
	uint64_t thr;     /* r.p * 2^53 */
	uint64_t origin;  /* its times count from here (CLOCK_MONOTONIC ns); 0: not started yet */
	uint64_t coll_origin; /* ... and its collectives (r.coll_at) from the owner's count then */
} ff_rule_t;

/* The configuration: written by fab_fault_set/add/start under set_lock, copied by the sender
 * (under set_lock too, only when gen changed: never per packet). */
typedef struct {
	ff_rule_t rule[GICE_FAULTS_MAX_RULES];
	uint32_t n_rules;
	uint64_t seed;
	uint64_t epoch; /* bumped by fab_fault_set (a replacement): rule state restarts */
} ff_cfg_t;

/* What a rule has seen, the sender's (restarted with the epoch). */
typedef struct {
	uint64_t ops;       /* operations in its scope sent (first transmissions) */
	uint64_t nth;       /* nth_put: puts, corrupt_msg: operations counted in its window */
	uint32_t victim_gid, victim_msg; /* nth_put: the put lost for good; victim_gid UINT32_MAX: none */
	uint8_t done;       /* corrupt_msg: corrupted its packet */
} ff_rstate_t;

/* psn transmissions seen, per peer: the attempt number keys the decision of a retransmission */
typedef struct {
	uint32_t psn, tries;
} ff_att_t;

/* Per destination device: counts (the sender writes, anyone reads), the token bucket, attempts. */
typedef struct {
	_Atomic uint64_t n[FF_NSTATS];
	double tokens;     /* rate: bytes that may go now */
	uint64_t t_fill;   /* rate: tokens counted up to here */
} ff_peer_t;

/* One packet of a planned message. */
typedef struct {
	uint32_t off, len, hdr_len; /* where it is in the message */
	uint32_t psn;
	uint8_t seq, drop, corrupt;
	uint64_t pick; /* corrupt: which bit */
} ff_pkt_t;

/* What happens to one fabric message (a bundle of packets or one opaque packet). */
typedef struct {
	uint32_t n_pkts, n_drop, n_corrupt;
	int opaque;              /* not classified: one packet, unknown destination */
	ff_pkt_t *pkt;           /* FF_BUNDLE_MAX (allocated with the wrapper) */
	uint8_t dup, reorder;
	uint64_t delay_ns;       /* random hold (delay_us) */
	uint64_t latency_ns;     /* fixed hold (latency) */
	uint64_t rate;           /* smallest rate cap that applies (bytes/s), 0: none */
	uint32_t dst;            /* destination device (UINT32_MAX: unknown) */
	uint64_t colls;          /* the owner's collective count when planned */
	/* rule state changes made when the message is accepted */
	uint64_t ops_add[GICE_FAULTS_MAX_RULES], nth_add[GICE_FAULTS_MAX_RULES];
	uint32_t victim_msg[GICE_FAULTS_MAX_RULES];
	uint8_t set_victim[GICE_FAULTS_MAX_RULES], set_done[GICE_FAULTS_MAX_RULES];
} ff_plan_t;

typedef struct {
	uint64_t not_before, deadline, after_k;
	fab_addr_t dest;
	size_t len;
	unsigned char *data;
} ff_slot_t;

typedef struct {
	fab_ep_t base; /* first: fab_ep_t * and ff_ep_t * convert */
	fab_ep_t *inner;
	uint64_t stream;
	fab_fault_attr_t attr;

	/* configuration: written under set_lock; gen bumped (release) after each change */
	pthread_mutex_t set_lock;
	_Atomic uint64_t gen;
	ff_cfg_t c_cfg;

	/* the sender's */
	uint64_t fast_gen; /* gen while nothing is on and nothing held, else FF_NOT_FAST */
	uint64_t seen_gen; /* generation of cfg */
	ff_cfg_t cfg;
	ff_rstate_t rs[GICE_FAULTS_MAX_RULES];
	int active;   /* cfg has a rule */
	uint64_t rng; /* splitmix64 state: unclassified packets and control packets */
	uint64_t k;   /* messages accepted by the slow path */
	ff_plan_t plan;
	unsigned char *pool; /* nslots slots + one scratch buffer, max_packet each */
	ff_slot_t *slots;
	uint32_t nslots, nheld, nfree;
	uint32_t *held; /* slot indices in the order they were held */
	uint32_t *free_slots;
	unsigned char *scratch; /* the message as it goes out (packets dropped or corrupted) */
	int pool_failed;
	uint64_t nerr; /* for rate-limited logging */

	_Atomic uint64_t colls; /* collective operations the owner started (fab_fault_coll) */

	ff_peer_t *peers; /* attr.max_gids of them */
	ff_peer_t unknown; /* opaque messages: their bucket (no counts: those go to n only) */
	ff_att_t *att;     /* attr.max_gids * FF_ATT_RING */
	/* counts of everything (also those of unknown destination) */
	_Atomic uint64_t n[FF_NSTATS];
} ff_ep_t;

/* single writer: no read-modify-write instruction needed */
static inline void ff_count(_Atomic uint64_t *c, uint64_t n)
{
	if (n)
		atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

static inline uint64_t ff_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Log the 1st, 2nd, 4th, 8th... occurrence. */
static inline int ff_ratelimit(uint64_t *n)
{
	uint64_t c = ++*n;
	return !(c & (c - 1));
}

/* fab_fault_hold.c */
/* The pool of held copies (GICE_OK, or GICE_ERR_NO_MEMORY logged once). */
int ff_pool_alloc(ff_ep_t *w);
/* Send the held copies that are ready, in order (on an ordered endpoint none before an earlier
 * one to its destination); stops at GICE_ERR_AGAIN. */
void ff_flush(ff_ep_t *w, uint64_t now);
/* Whether a copy to dest is held. */
int ff_held_to(const ff_ep_t *w, fab_addr_t dest);
/* Hold one copy of (hdr, payload) to dest. The caller checked that a slot is free. */
void ff_hold(ff_ep_t *w, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload, size_t plen,
	     uint64_t not_before, uint64_t after_k, uint64_t deadline);

/* fab_fault_decide.c */
/* Plan the message (hdr, hlen, payload, plen) to dest: which packets drop or corrupt, holds and
 * the rate that applies. Reads the sender's state, changes nothing (ff_commit does). */
void ff_plan(ff_ep_t *w, const void *hdr, size_t hlen, const void *payload, size_t plen, uint64_t now);
/* The planned message was accepted: count it, advance the rules' state and the attempts. */
void ff_commit(ff_ep_t *w, int dups, int held_reorder, int held_delay);
/* Whether rule r is in its window at now, the owner having started colls collectives. */
int ff_rule_on(const ff_rule_t *r, uint64_t now, uint64_t colls);

/* fab_fault_pace.c */
/* The peer state of device dst (the unknown one for UINT32_MAX or beyond max_gids). */
ff_peer_t *ff_peer(ff_ep_t *w, uint32_t dst);
/* Rate cap: 1 when a message to p may go at now under rate (bytes/s), 0 when it must wait.
 * A token bucket of 1 ms of the rate (at least two packets) that may go negative by one
 * message: the long-run rate is exact whatever the message sizes. */
int ff_pace_ready(ff_ep_t *w, ff_peer_t *p, uint64_t rate, uint64_t now);
/* len bytes went to p under its cap. */
void ff_pace_spend(ff_peer_t *p, size_t len);

#endif
