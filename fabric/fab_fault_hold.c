/* fab_fault_hold.c: packets the fault injector holds back (latency, delay, reorder, and on an
 * ordered endpoint what waits behind them): the pool of copies, allocated once when network
 * faults are first on, and the flush that sends them when they are ready (see fab_fault.c). The
 * sender thread's only. */
#include "fabric/fab_fault_internal.h"

#include <stdlib.h>
#include <string.h>

/* The held-packet pool: allocated once, by the sender, when faults are first on. */
int ff_pool_alloc(ff_ep_t *w)
{
	size_t mp = w->base.max_packet;
	uint32_t n = (uint32_t)GICE_MAX(FF_SLOTS_MIN, GICE_MIN(FF_SLOTS_MAX, FF_POOL_BYTES / mp));

	if (w->pool || w->pool_failed)
		return w->pool ? GICE_OK : GICE_ERR_NO_MEMORY;
	w->pool = malloc((size_t)(n + 1) * mp);
	w->slots = calloc(n, sizeof(*w->slots));
	w->held = calloc(n, sizeof(*w->held));
	w->free_slots = calloc(n, sizeof(*w->free_slots));
	if (!w->pool || !w->slots || !w->held || !w->free_slots) {
		gice_error("fab", "no memory for %u held packets of %zu bytes: faults without holds or corruption",
			   n, mp);
		free(w->free_slots);
		free(w->held);
		free(w->slots);
		free(w->pool);
		w->pool = NULL;
		w->slots = NULL;
		w->held = w->free_slots = NULL;
		w->pool_failed = 1;
		return GICE_ERR_NO_MEMORY;
	}
	for (uint32_t i = 0; i < n; i++) {
		w->slots[i].data = w->pool + (size_t)i * mp;
		w->free_slots[i] = n - 1 - i;
	}
	w->scratch = w->pool + (size_t)n * mp;
	w->nslots = w->nfree = n;
	return GICE_OK;
}

static int ff_ready(const ff_slot_t *s, uint64_t now, uint64_t k)
{
	return now >= s->not_before && (k >= s->after_k || now >= s->deadline);
}

/* Send the held copies that are ready, in the order they were held (on an ordered endpoint, none
 * before an earlier one to its destination); stop at GICE_ERR_AGAIN. */
void ff_flush(ff_ep_t *w, uint64_t now)
{
	fab_addr_t waiting[FF_SLOTS_MAX];
	uint32_t j = 0, nwait = 0;
	int blocked = 0;

	for (uint32_t i = 0; i < w->nheld; i++) {
		uint32_t idx = w->held[i];
		ff_slot_t *s = &w->slots[idx];
		int behind = 0;

		for (uint32_t q = 0; w->base.ordered && q < nwait && !behind; q++)
			behind = waiting[q] == s->dest;
		if (!blocked && !behind && ff_ready(s, now, w->k)) {
			int rc = fab_send(w->inner, s->dest, s->data, s->len, NULL, 0);

			if (rc == GICE_ERR_AGAIN) {
				blocked = 1;
			} else {
				if (rc != GICE_OK && ff_ratelimit(&w->nerr))
					gice_error("fab", "send of a held %zu-byte packet to peer %llu failed: %s (lost)",
						   s->len, (unsigned long long)s->dest, gice_status_name(rc));
				w->free_slots[w->nfree++] = idx;
				continue;
			}
		}
		if (nwait < FF_SLOTS_MAX)
			waiting[nwait++] = s->dest;
		w->held[j++] = idx;
	}
	w->nheld = j;
	atomic_store_explicit(&w->base.held, j, memory_order_relaxed);
}

/* Whether a copy to dest is held. */
int ff_held_to(const ff_ep_t *w, fab_addr_t dest)
{
	for (uint32_t i = 0; i < w->nheld; i++)
		if (w->slots[w->held[i]].dest == dest)
			return 1;
	return 0;
}

/* Hold one copy. The caller checked that a slot is free. */
void ff_hold(ff_ep_t *w, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload, size_t plen,
	     uint64_t not_before, uint64_t after_k, uint64_t deadline)
{
	uint32_t idx = w->free_slots[--w->nfree];
	ff_slot_t *s = &w->slots[idx];

	memcpy(s->data, hdr, hlen);
	if (plen)
		memcpy(s->data + hlen, payload, plen);
	s->len = hlen + plen;
	s->dest = dest;
	s->not_before = not_before;
	s->after_k = after_k;
	s->deadline = deadline;
	w->held[w->nheld++] = idx;
	atomic_store_explicit(&w->base.held, w->nheld, memory_order_relaxed);
}

