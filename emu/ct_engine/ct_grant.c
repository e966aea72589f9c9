/* ct_grant.c: read grants — each registered region of device memory is its own provider
 * registration that peers may read (fab_mr_expose), made when the region is registered and
 * closed (revoked) when it is deregistered. A rendezvous announcement (PUT_RTS) or answer
 * (GET_GO) carries the grant of the region its bytes are in: the reader reads with that key
 * only, so the provider of the device whose memory is read enforces the region's bounds, and no
 * byte outside a live registration can be read by anyone (docs/protocol.md, "Read grants").
 * Set-up calls take the link lock; ct_grant_find runs under it (the link's send path). A few
 * regions per device are the rule: the table is searched linearly. */
#include "emu/ct_engine/ct_internal.h"

#include <stdlib.h>

int ct_engine_expose(ct_engine_t *e, uint64_t key, uint64_t off, uint64_t len)
{
	int rc = GICE_OK;

	if (!e->rma)
		return GICE_OK; /* no remote reads: large messages go as packets (or on the plane) */
	ct_link_lock(e);
	if (e->n_grants == e->grants_cap) {
		uint32_t cap = e->grants_cap ? 2 * e->grants_cap : 16;
		ct_grant_t *g = realloc(e->grants, cap * sizeof(*g));
		if (!g) {
			rc = GICE_ERR_NO_MEMORY;
			goto out;
		}
		e->grants = g;
		e->grants_cap = cap;
	}
	ct_grant_t *g = &e->grants[e->n_grants];
	rc = fab_mr_expose(e->attr.ep, off, len, &g->mr, &g->info);
	if (rc)
		goto out;
	g->key = key;
	g->off = off;
	g->len = len;
	e->n_grants++;
out:
	ct_link_unlock(e);
	return rc;
}

int ct_engine_revoke(ct_engine_t *e, uint64_t key)
{
	int rc = GICE_ERR_BAD_KEY;

	if (!e->rma)
		return GICE_OK;
	ct_link_lock(e);
	for (uint32_t i = 0; i < e->n_grants; i++) {
		if (e->grants[i].key != key)
			continue;
		fab_mr_revoke(e->attr.ep, e->grants[i].mr);
		e->grants[i] = e->grants[--e->n_grants];
		rc = GICE_OK;
		break;
	}
	ct_link_unlock(e);
	return rc;
}

int ct_grant_find(const ct_engine_t *e, uint64_t off, uint64_t len, fab_mr_info_t *grant)
{
	for (uint32_t i = 0; i < e->n_grants; i++) {
		const ct_grant_t *g = &e->grants[i];
		if (off >= g->off && len <= g->len && off - g->off <= g->len - len) {
			grant->key = g->info.key;
			grant->addr = g->info.addr + (off - g->off);
			return GICE_OK;
		}
	}
	return GICE_ERR_UNREGISTERED;
}

void ct_grants_revoke_all(ct_engine_t *e)
{
	for (uint32_t i = 0; i < e->n_grants; i++)
		fab_mr_revoke(e->attr.ep, e->grants[i].mr);
	e->n_grants = 0;
	free(e->grants);
	e->grants = NULL;
	e->grants_cap = 0;
}
