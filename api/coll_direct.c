/* coll_direct.c: broadcast, as a pipelined chain from the root around the ring (each chunk
 * forwarded as soon as it lands: its arrival counter wakes the block that sends it on), and
 * alltoall, every block put straight into its device's recv. Both start with a team sync
 * (coll_api.c): no device writes a recv another may still be reading for the call before. On
 * this host's NVLink plane a send is a store and a direct add to the peer's counter; otherwise a
 * put with a strong signal through the CT. */
#include "api/coll.h"

#include <stdatomic.h>
#include <string.h>

/* Send bytes at src to team rank pe's heap offset dst_off and add 1 to its counter ctr once
 * they have landed; l->done counts the puts through the CT. */
static int direct_send(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l,
		       uint32_t pe, uint64_t dst_off, const uint8_t *src, size_t bytes)
{
	uint8_t *q = gice_sym_peer_ptr(k, c->team, pe, dst_off, bytes);

	if (q) {
		memcpy(q, src, bytes);
		atomic_thread_fence(memory_order_release); /* the bytes before the counter */
		return gice_peer_trigger_add(k, c->team->gids[pe], st->c[COLL_C_AG], 1);
	}
	l->done++;
	if (!bytes)
		return gice_sym_signal(k, c->team, pe, st->c[COLL_C_AG], 1, GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG,
				       st->c[COLL_C_DONE]);
	return gice_sym_put_signal(k, c->team, pe, dst_off, src, bytes, st->c[COLL_C_AG], 1,
				   GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, st->c[COLL_C_DONE]);
}

static int direct_end(gice_kctx_t *k, struct api_coll *st, struct coll_local *l)
{
	return coll_wait(k, st->c[COLL_C_DONE], l->done);
}

int coll_broadcast(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	uint32_t n = c->team->n, right = (me + 1) % n;
	size_t esz = gice_dtype_size(c->type), bytes = c->count * esz;
	size_t cb = st->chunk_bytes < esz ? esz : st->chunk_bytes / esz * esz, K = (bytes + cb - 1) / cb;
	uint8_t *recv = gice_sym_ptr(k->dev, c->recv);
	int rc = GICE_OK;

	if (me == c->root && c->send != c->recv)
		memmove(recv, gice_sym_ptr(k->dev, c->send), bytes);
	for (size_t j = 0; j < K && !rc; j++) {
		size_t off = j * cb, len = bytes - off < cb ? bytes - off : cb;
		if (me != c->root)
			rc = coll_wait(k, st->c[COLL_C_AG], ++l->ag);
		if (!rc && right != c->root)
			rc = direct_send(k, c, st, l, right, c->recv + off, recv + off, len);
	}
	return rc ? rc : direct_end(k, st, l);
}

int coll_alltoall(gice_kctx_t *k, const struct coll_call *c, struct api_coll *st, struct coll_local *l, uint32_t me)
{
	uint32_t n = c->team->n;
	size_t bytes = c->count * gice_dtype_size(c->type);
	const uint8_t *send = gice_sym_ptr(k->dev, c->send);
	uint8_t *recv = gice_sym_ptr(k->dev, c->recv);
	int rc = GICE_OK;

	memcpy(recv + me * bytes, send + me * bytes, bytes);
	for (uint32_t i = 1; i < n && !rc; i++) {
		uint32_t pe = (me + i) % n;
		rc = direct_send(k, c, st, l, pe, c->recv + me * bytes, send + pe * bytes, bytes);
	}
	if (rc)
		return rc;
	l->ag += n - 1;
	if ((rc = coll_wait(k, st->c[COLL_C_AG], l->ag)))
		return rc;
	return direct_end(k, st, l);
}
