/* coll_small.c: the one-shot allreduce for small buffers (latency): every device puts its
 * buffer into slot `me` of every other device's scratch, then folds the n slots in rank order,
 * so every device computes the same bits (and the same as a host loop over the ranks). A peer on
 * this host's NVLink plane gets the bytes by a store into its heap and the arrival as a direct
 * add to its counter (no packet, as the team barrier); others by a put with a signal.
 *
 * Reuse without acknowledgements: call c writes bank c mod 2 of the peers and counts on the
 * counter of that parity. A device sends call c + 2 only after receiving every peer's call
 * c + 1, which each sent after finishing call c, so bank c mod 2 is free again; and no peer can
 * be two calls ahead, so a parity's counter only ever counts one call at a time. */
#include "api/coll.h"

#include <string.h>

int coll_allreduce_oneshot(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
			   uint32_t me)
{
	gice_team_t *t = c->team;
	uint32_t n = t->n, p = (uint32_t)(l->small_calls & 1);
	size_t esz = gice_dtype_size(c->type), bytes = c->count * esz;
	uint64_t bank = st->small_off + (uint64_t)p * n * st->small_slot, mine_off = bank + me * st->small_slot;
	uint8_t *mine = gice_sym_ptr(k->dev, mine_off), *recv = gice_sym_ptr(k->dev, c->recv);
	gice_counter_t ctr = st->c[COLL_C_SMALL0 + p];
	uint32_t plane[API_SYM_MAX_LOCAL * 8], n_plane = 0;
	int rc = GICE_OK;

	memcpy(mine, gice_sym_ptr(k->dev, c->send), bytes); /* the source of the puts, and in place safe */
	for (uint32_t i = 1; i < n && !rc; i++) {
		uint32_t pe = (me + i) % n;
		void *q = n_plane < sizeof(plane) / sizeof(plane[0]) ? gice_sym_peer_ptr(k, t, pe, mine_off, bytes) : NULL;
		if (q) {
			memcpy(q, mine, bytes);
			plane[n_plane++] = pe;
		} else
			rc = gice_sym_put_signal(k, t, pe, mine_off, mine, bytes, ctr, 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER);
	}
	/* each add below is a seq_cst read-modify-write of the peer's counter: it releases the stores
	 * above to the peer that reads the counter (acquire) */
	for (uint32_t i = 0; i < n_plane && !rc; i++)
		rc = gice_peer_trigger_add(k, t->gids[plane[i]], ctr, 1);
	if (rc)
		return rc;
	l->small_seen[p] += n - 1;
	if ((rc = coll_wait(k, ctr, l->small_seen[p])))
		return rc;
	l->small_calls++;
	/* recv = slot 0 op slot 1 op ... op slot n-1 */
	const uint8_t *s0 = gice_sym_ptr(k->dev, bank);
	if (n > 1)
		coll_reduce(recv, s0, s0 + st->small_slot, c->count, c->type, c->op);
	for (uint32_t r = 2; r < n; r++)
		coll_reduce(recv, recv, s0 + (uint64_t)r * st->small_slot, c->count, c->type, c->op);
	if (c->op == GICE_RED_AVG)
		coll_scale(recv, c->count, c->type, n);
	return GICE_OK;
}
