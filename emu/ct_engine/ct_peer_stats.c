/* ct_peer_stats.c: the engine's counters per peer (GICE_PEER_STATS_LIST, api/gice_stats.h). */
#include <endian.h>
#include <string.h>

#include "emu/ct_engine/ct_internal.h"

void ct_rx_csum_peer(ct_engine_t *e, const uint8_t *buf, size_t len)
{
	uint32_t src;

	if (len < CT_HDR_BYTES)
		return;
	memcpy(&src, buf + 8, 4); /* src_gid (ct_proto.h); the header may be the corrupted part */
	src = le32toh(src);
	if (src < e->max_peers && e->peers[src].present)
		atomic_fetch_add_explicit(&e->peers[src].st[CT_STAT_rx_csum_bad], 1, memory_order_relaxed);
}

int ct_engine_peer_stats(const ct_engine_t *e, uint32_t gid, ct_stats_t *st)
{
	if (gid >= e->max_peers)
		return GICE_ERR_OUT_OF_BOUNDS;
	for (int i = 0; i < CT_STATS; i++)
		st->v[i] = atomic_load_explicit(&e->peers[gid].st[i], memory_order_relaxed);
	return GICE_OK;
}
