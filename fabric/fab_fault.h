/* fab_fault.h: a fault-injecting decorator over any fabric endpoint. Faults act on send only, so
 * that every packet crosses exactly one injector (its sender's): per packet sent, it may be
 * dropped, duplicated, corrupted (one bit flipped), reordered (held until the next packet has
 * been sent, or held in turn; at most 1 ms) or delayed (held a uniform random [0, delay_us]). The faults come from a
 * gice_faults_t (GICE_FAULTS, emu/common/faults.h); its stall/hang/kill fields are the engine's
 * business and ignored here.
 *
 * Determinism: the k-th packet the wrapper accepts (send returned GICE_OK) gets the k-th decision
 * of a random sequence that depends only on the seed and the stream (and the probabilities), never
 * on timing. What the network then does with timing-held packets (reorder's 1 ms limit, delays)
 * of course depends on time.
 *
 * Cost: with no network fault set and nothing held, send and poll are one branch and the inner
 * call. Held packets live in a pool of copies allocated once (when faults are first turned on),
 * never per packet; when the pool is full a packet that should be held goes out at once.
 */
#ifndef GICE_FAB_FAULT_H
#define GICE_FAB_FAULT_H

#include <stdint.h>

#include "emu/common/faults.h"
#include "fabric/fabric.h"

/* Counts since the wrapper was opened (not reset by fab_fault_set). sent: packets accepted while
 * network faults were on (the base the others are counted against; packets sent through the
 * fault-free fast path are not counted); dropped: never sent; duplicated: sent twice;
 * reordered/delayed: held for reordering / for a non-zero delay (a packet both reordered and
 * delayed counts in both); corrupted: sent with one bit flipped. */
typedef struct {
	uint64_t sent, dropped, duplicated, reordered, delayed, corrupted;
} fab_fault_stats_t;

/* Wrap inner into a fault-injecting endpoint *out, which then owns inner (fab_close closes both;
 * on failure inner stays the caller's). stream is mixed into the seed so that each endpoint of a
 * job draws its own reproducible sequence: pass the device's global id. f may be NULL (no faults
 * until fab_fault_set). The wrapper copies provider, rma, reliable and max_packet from inner, and
 * ordered too unless f turns reorder or delay on (then ordered is 0).
 * GICE_OK; GICE_ERR_INVALID: inner or out NULL, inner reports no max_packet, a probability of f
 * outside [0, 1]; GICE_ERR_NO_MEMORY. */
int fab_fault_wrap(fab_ep_t *inner, const gice_faults_t *f, uint64_t stream, fab_ep_t **out);

/* Replace the network faults of a wrapped endpoint and restart its random sequence from f->seed
 * (NULL f: no faults). Safe while another thread sends and polls through ep: the sender takes
 * the new faults at its next send or poll. Packets already held still go out as planned.
 * Concurrent fab_fault_set calls are serialized.
 * GICE_OK; GICE_ERR_INVALID: ep is not a wrapper, or a probability outside [0, 1];
 * GICE_ERR_UNSUPPORTED: f turns reorder or delay on but ep reports ordered (it was wrapped
 * without them, and the engine counts on that order: wrap with them to allow them later). */
int fab_fault_set(fab_ep_t *ep, const gice_faults_t *f);

/* Current counts of a wrapped endpoint into *st; callable from any thread.
 * GICE_OK; GICE_ERR_INVALID: ep is not a wrapper or st is NULL. */
int fab_fault_stats(fab_ep_t *ep, fab_fault_stats_t *st);

#endif
