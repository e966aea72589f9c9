/* fab_fault.h: a fault-injecting decorator over any fabric endpoint. Faults act on send only, so
 * that every packet crosses exactly one injector (its sender's): per packet sent, it may be
 * dropped, duplicated, corrupted (one bit flipped), reordered (held until the next packet has
 * been sent, or held in turn; at most 1 ms), delayed (held a uniform random [0, delay_us]),
 * held a fixed latency (order kept) or paced by a rate cap (a token bucket per peer: send
 * returns GICE_ERR_AGAIN until the bytes may go). The faults come from a gice_faults_t
 * (GICE_FAULTS, emu/common/faults.h); its stall/hang/kill fields are the engine's business and
 * ignored here.
 *
 * Aim: rules (emu/common/faults.h) are scoped by sender and receiver rank, windowed in time,
 * gated by operation counts; the owner's classifier (fab_fault_attr_t) tells the injector the
 * packets of a message (a bundle), their link and sequence number.
 *
 * Determinism: the decision for a sequenced packet is a hash of (seed, sender, receiver, psn,
 * how many times this psn was sent before, rule): the same seed decides the same whatever the
 * threads' timing. Control packets (under ctl=1) and opaque messages draw, in call order, from a
 * sequence seeded by the seed and the stream. What the network then does with timing-held
 * packets (reorder's 1 ms limit, delays) of course depends on time.
 *
 * Cost: with no network fault set and nothing held, send and poll are one branch and the inner
 * call. Held packets live in a pool of copies allocated once (when faults are first turned on),
 * never per packet; when the pool is full a packet that should be held for reorder or delay
 * goes out at once, and one for latency (or behind held ones on an ordered endpoint) is refused
 * for now (GICE_ERR_AGAIN). Per-peer state (counts, token buckets, the psns' attempts) is
 * allocated with the wrapper (fab_fault_attr_t.max_gids).
 */
#ifndef GICE_FAB_FAULT_H
#define GICE_FAB_FAULT_H

#include <stdint.h>

#include "emu/common/faults.h"
#include "fabric/fabric.h"

/* Counts since the wrapper was opened (not reset by fab_fault_set), in packets: the packets of
 * a bundle (one fabric message carrying several, as the classifier tells) count one by one; a
 * message the classifier cannot read counts as one packet. sent: packets accepted while network
 * faults were on (the base the others are counted against; packets sent through the fault-free
 * fast path are not counted); dropped: never sent; duplicated: sent twice; reordered/delayed:
 * held for reordering / for a non-zero delay or latency; corrupted: sent with one bit flipped;
 * paced: sends refused (GICE_ERR_AGAIN) by a rate cap. */
#define FF_STATS_LIST(X) X(sent) X(dropped) X(duplicated) X(reordered) X(delayed) X(corrupted) X(paced)
enum {
#define FF_STAT_ENUM_(n) FF_ST_##n,
	FF_STATS_LIST(FF_STAT_ENUM_)
#undef FF_STAT_ENUM_
	FF_NSTATS
};
typedef struct {
#define FF_STAT_FIELD_(n) uint64_t n;
	FF_STATS_LIST(FF_STAT_FIELD_)
#undef FF_STAT_FIELD_
} fab_fault_stats_t;

/* What the injector may know of a packet, from its owner (fabric/ keeps packets opaque). */
typedef struct {
	uint32_t src, dst; /* sending and receiving device ids */
	uint32_t psn;      /* sequenced packets: their sequence number on the (src, dst) link */
	uint32_t msg_id;   /* sequenced packets: their message */
	uint8_t seq;       /* 1: sequenced (retransmitted until acknowledged); 0: control */
	uint8_t op_start;  /* first packet of an operation the sender started (not a response) */
	uint8_t put;       /* ... and that operation is a put */
	size_t len;        /* bytes of this packet (a bundle holds several back to back) */
	size_t hdr_len;    /* its header: a corruption flips a bit after it when it has payload */
} fab_fault_pkt_t;

/* Read the first packet of the len bytes at buf into *out: 0, or -1 when they are not one. */
typedef int (*fab_fault_classify_fn)(const void *buf, size_t len, fab_fault_pkt_t *out);

typedef struct {
	uint32_t nranks;   /* ranks of the job: device id % nranks is its rank (0: 1) */
	uint32_t max_gids; /* device ids are below this: per-peer state and counts (0: none) */
	fab_fault_classify_fn classify; /* NULL: packets are opaque, only unscoped rules act, on
					 * whole messages, decided in call order */
	int start_later;   /* 1: faults wait for fab_fault_start (0: they count from the wrap) */
} fab_fault_attr_t;

/* Wrap inner into a fault-injecting endpoint *out, which then owns inner (fab_close closes both;
 * on failure inner stays the caller's). stream is mixed into the seed of opaque packets'
 * decisions: pass the device's global id. f may be NULL (no faults until fab_fault_set); attr
 * may be NULL (opaque packets, start now). The wrapper copies provider, rma, reliable and
 * max_packet from inner, and ordered too unless f has reorder or delay_us (then ordered is 0).
 * GICE_OK; GICE_ERR_INVALID: inner or out NULL, inner reports no max_packet, a bad rule in f;
 * GICE_ERR_NO_MEMORY. */
int fab_fault_wrap(fab_ep_t *inner, const gice_faults_t *f, uint64_t stream, const fab_fault_attr_t *attr,
		   fab_ep_t **out);

/* The windows of the faults given at the wrap (start_later) count from now. GICE_OK;
 * GICE_ERR_INVALID: ep is not a wrapper. */
int fab_fault_start(fab_ep_t *ep);

/* Replace the network faults of a wrapped endpoint (NULL f: none); their windows count from now
 * and their state (operation counts, nth_put, corrupt_msg) starts over. Safe while another
 * thread sends and polls through ep: the sender takes the new faults at its next send or poll.
 * Packets already held still go out as planned. Concurrent calls are serialized.
 * GICE_OK; GICE_ERR_INVALID: ep is not a wrapper, or a bad rule (a probability outside [0, 1]);
 * GICE_ERR_UNSUPPORTED: f has reorder or delay_us but ep reports ordered (it was wrapped
 * without them, and the engine counts on that order: wrap with them to allow them later). */
int fab_fault_set(fab_ep_t *ep, const gice_faults_t *f);
/* The same, adding f's rules to those in force (which keep their windows and state).
 * GICE_ERR_OVERFLOW when they would be more than GICE_FAULTS_MAX_RULES. */
int fab_fault_add(fab_ep_t *ep, const gice_faults_t *f);

/* The owner started its n-th collective operation (1, 2, ...): rules with a window in
 * collectives (@collN+K) count them from their start. Cheap (one relaxed store), callable from
 * any thread; the packets of a request queued after the call see it. GICE_OK; GICE_ERR_INVALID:
 * ep is not a wrapper. */
int fab_fault_coll(fab_ep_t *ep, uint64_t n);

/* Current counts of a wrapped endpoint into *st; callable from any thread.
 * GICE_OK; GICE_ERR_INVALID: ep is not a wrapper or st is NULL. */
int fab_fault_stats(fab_ep_t *ep, fab_fault_stats_t *st);
/* The counts of packets to device gid.
 * GICE_OK; GICE_ERR_INVALID: ep is not a wrapper or st NULL; GICE_ERR_OUT_OF_BOUNDS: gid is not
 * below attr.max_gids. */
int fab_fault_peer_stats(fab_ep_t *ep, uint32_t gid, fab_fault_stats_t *st);

#endif
