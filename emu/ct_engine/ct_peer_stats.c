/* ct_peer_stats.c: the engine's counters per peer (GICE_PEER_STATS_LIST, api/gice_stats.h) and
 * the link's round-trip gauges (GICE_PEER_GAUGE_LIST). */
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

/* Min and max are stored before srtt (release), and read after it (acquire): a reader that sees
 * an srtt sees min and max at least as recent, and since srtt is a weighted mean of samples
 * (rounded down, so never below the smallest), min <= srtt <= max holds in every view. */
void ct_rtt_sample(ct_engine_t *e, ct_peer_t *p, uint64_t rtt, uint64_t srtt)
{
	uint64_t lo = atomic_load_explicit(&p->gauge[CT_GAUGE_rtt_min_ns], memory_order_relaxed);
	uint64_t hi = atomic_load_explicit(&p->gauge[CT_GAUGE_rtt_max_ns], memory_order_relaxed);

	if (!lo || rtt < lo)
		atomic_store_explicit(&p->gauge[CT_GAUGE_rtt_min_ns], rtt, memory_order_relaxed);
	if (rtt > hi)
		atomic_store_explicit(&p->gauge[CT_GAUGE_rtt_max_ns], rtt, memory_order_relaxed);
	atomic_store_explicit(&p->gauge[CT_GAUGE_srtt_ns], srtt, memory_order_release);
	ct_stat_add_peer(e, p, CT_STAT_rtt_samples, 1);
}

int ct_engine_peer_gauges(const ct_engine_t *e, uint32_t gid, uint64_t g[CT_GAUGES])
{
	if (gid >= e->max_peers)
		return GICE_ERR_OUT_OF_BOUNDS;
	g[CT_GAUGE_srtt_ns] = atomic_load_explicit(&e->peers[gid].gauge[CT_GAUGE_srtt_ns], memory_order_acquire);
	g[CT_GAUGE_rtt_min_ns] = atomic_load_explicit(&e->peers[gid].gauge[CT_GAUGE_rtt_min_ns], memory_order_relaxed);
	g[CT_GAUGE_rtt_max_ns] = atomic_load_explicit(&e->peers[gid].gauge[CT_GAUGE_rtt_max_ns], memory_order_relaxed);
	return GICE_OK;
}
