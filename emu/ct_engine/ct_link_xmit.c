/* ct_link_xmit.c: packets onto the fabric — each signed with the job's MAC and checksummed
 * when checksums are on, small ones to one peer bundled into one fabric message, the peer's
 * doorbell told of them just before the provider takes them (a same-host peer), a send the
 * fabric refuses kept for the next flush. Runs under the link lock. */
#include "emu/ct_engine/ct_internal.h"

#include <endian.h>
#include <string.h>

#include "emu/common/tsan.h"

/* Small packets to one peer leave bundled: back to back in one fabric message (protocol.md), so
 * a burst of small puts costs one send of the provider (one syscall on tcp), not one each. A
 * bundle the fabric cannot take now stays, and goes at the next flush: meanwhile it is link work
 * (CT 0 comes round soon), and the peer is rung, as it must make progress for us to send (shm's
 * first send to a peer waits for the peer to map us) and again once the bundle has left.
 * A same-host peer is told of the packets just before the provider takes them, not after (as a
 * NIC's doorbell write overtakes its DMA): one that polls sees them coming while the provider
 * still copies them, and one asleep wakes meanwhile (an 8 B ping-pong over shm: ~0.1 us less
 * each way). Until they arrive it polls (the delay fault layer does the same). A send that fails
 * takes its count back (tm_doorbell_unsent): the peer's count stays exact. */
int ct_bundle_flush(ct_engine_t *e)
{
	ct_peer_t *p = &e->peers[e->bundle_gid];
	uint32_t told = 0;
	int rc;

	if (!e->bundle_len)
		return GICE_OK;
	if (p->dead) {
		/* failed or closed since its packets joined: nothing may reach it (a send to a closed
		 * peer can crash libfabric's shm) and what they carried has been failed */
		e->bundle_len = 0;
		atomic_store_explicit(&e->bundle_held, 0, memory_order_relaxed);
		return GICE_OK;
	}
	if (p->tm && p->kick_pkts) {
		told = p->kick_pkts;
		p->kick_pkts = 0;
		ct_kick(e, p, told);
	}
	rc = fab_send(e->attr.ep, p->addr, e->bundle, e->bundle_len, NULL, 0);
	if (told && rc != GICE_OK) { /* counted again at its next flush, or by kick_one */
		tm_doorbell_unsent(p->tm, 0, told);
		p->kick_pkts = told;
	} else if (told) {
		/* Who was awake there at the count may have left since, its last look too early to
		 * find them (tm_doorbell_awake): look again now that they are out (seq_cst: the
		 * provider's stores before our load, as the kick's own count) and ring if no one is. */
		atomic_thread_fence(memory_order_seq_cst);
		ct_nudge(e, p);
	}
	if (rc == GICE_ERR_AGAIN || atomic_load_explicit(&e->bundle_held, memory_order_relaxed)) {
		atomic_store_explicit(&e->bundle_held, rc == GICE_ERR_AGAIN, memory_order_relaxed);
		if (p->tm)
			ct_kick(e, p, 0);
	}
	if (rc == GICE_OK) {
		e->bundle_len = 0;
		ct_stat_link(&e->st[CT_STAT_fab_sends], 1);
	} else if (rc != GICE_ERR_AGAIN) {
		gice_error("ct", "send of %u bytes of packets to device %u failed: %s", e->bundle_len, e->bundle_gid,
			   gice_status_name(rc));
		e->bundle_len = 0; /* lost, as a packet the fabric refused: reliability resends them */
	}
	return rc;
}

/* Hand one encoded packet to the fabric, with the job's MAC (GICE_CT_AUTH) and its CRC32C when
 * checksums are on. hdr is modified (mac, flag and csum) in place. */
int ct_xmit(ct_engine_t *e, ct_peer_t *p, uint8_t *hdr, const void *payload, uint32_t plen)
{
	int rc;

	GICE_TSAN_OUT(); /* leaving the process (tsan.h) */
	int csum = atomic_load_explicit(&e->csum, memory_order_relaxed) ||
		   atomic_load_explicit(&e->csum_tx, memory_order_relaxed); /* run-time faults: send only */

	/* the flag, then the MAC (it covers the flags), then the checksum (it covers the MAC) */
	if (csum)
		hdr[CT_HDR_FLAGS_OFF] |= CT_HF_CSUM;
	if (e->auth)
		ct_proto_sign(hdr, e->attr.job_key);
	if (csum) {
		memset(hdr + CT_HDR_CSUM_OFF, 0, 4);
		uint32_t c = htole32(ct_proto_csum(hdr, payload, plen));
		memcpy(hdr + CT_HDR_CSUM_OFF, &c, 4);
	}
	uint32_t gid = (uint32_t)(p - e->peers), len = CT_HDR_BYTES + plen;
	int alone = len > e->mtu_max / 2; /* a large packet goes alone: no copy */
	if (e->bundle_len && (e->bundle_gid != gid || e->bundle_len + len > e->bundle_max || alone) &&
	    (rc = ct_bundle_flush(e))) {
		/* the fabric refuses the bundle for now: a packet to another peer goes alone, past it
		 * (nothing orders packets to different peers); else a peer that stopped taking packets
		 * (dead, its queue full) would hold up the heartbeats and ACKs to every other one,
		 * which would then find this device silent and blame it */
		if (rc != GICE_ERR_AGAIN || e->bundle_gid == gid)
			return rc;
		alone = 1;
	}
	if (alone) {
		rc = fab_send(e->attr.ep, p->addr, hdr, CT_HDR_BYTES, payload, plen);
		if (rc == GICE_OK)
			ct_stat_link(&e->st[CT_STAT_fab_sends], 1);
	} else {
		if (!e->bundle_len)
			e->bundle_cork = p->next_psn != ct_acked_psn(e, p);
		memcpy(e->bundle + e->bundle_len, hdr, CT_HDR_BYTES);
		if (plen)
			memcpy(e->bundle + e->bundle_len + CT_HDR_BYTES, payload, plen);
		e->bundle_len += len;
		e->bundle_gid = gid;
		rc = GICE_OK;
	}
	if (rc == GICE_OK) {
		p->t_tx = gice_now_ns();
		/* its CT 0 may sleep: ring it at the end of this pass, once the packet is out
		 * (ct_link.c), and count it then */
		if (p->tm) {
			p->kick_pkts++;
			if (!p->kick) {
				p->kick = 1;
				if (e->n_kick < GICE_ARRAY_SIZE(e->kick))
					e->kick[e->n_kick++] = gid;
				else
					e->kick_overflow = 1;
			}
		}
	}
	return rc;
}
