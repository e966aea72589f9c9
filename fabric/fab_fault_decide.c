/* fab_fault_decide.c: what the fault injector does to one fabric message (see fab_fault.h).
 *
 * A message is planned (ff_plan) before it is sent and committed (ff_commit) once the inner
 * endpoint took it: a send refused with GICE_ERR_AGAIN is planned again later and, since nothing
 * changed, gets the same plan.
 *
 * Packets. The owner's classifier reads each packet of the message (a bundle holds several back
 * to back): sender, receiver, psn, whether it is sequenced and starts an operation. A message it
 * cannot read is opaque: one packet of unknown destination, touched only by unscoped rules.
 *
 * Decisions. A sequenced packet's draw for rule j is a hash of (seed, sender, receiver, psn,
 * attempt, j), attempt being how many times this psn went out before (remembered per peer in a
 * ring of FF_ATT_RING psns): a retransmission draws anew, and the same seed draws the same
 * whatever the order in which the engine's threads sent. Control packets (rules with ctl=1) and
 * opaque messages draw from (seed, stream, k, j), k the messages accepted so far: call order.
 *
 * Rules. A packet is in a rule's scope when its sender's rank is in from, its receiver's in to,
 * and it is sequenced or the rule has ctl; a partition takes every packet between its sides,
 * control packets included. The rule acts in its window (of time, or of the owner's collective
 * operations: fab_fault_coll) and once after_ops operations of its
 * scope went out (counted from its start, first transmissions only). Per packet: drop (any
 * rule), corrupt (one bit; corrupt_msg flips one in the payload when there is one). Per message
 * (from the rules that took one of its packets): dup, reorder, the largest delay drawn, the sum
 * of the latencies, the smallest rate cap.
 */
#include "fabric/fab_fault_internal.h"

#include <string.h>

int ff_rule_on(const ff_rule_t *r, uint64_t now, uint64_t colls)
{
	uint64_t from;

	if (!r->origin)
		return 0;
	if (r->r.coll_at) { /* the n-th collective since the rule started is n = colls - coll_origin */
		uint64_t n = colls - r->coll_origin;
		return colls >= r->coll_origin && n >= r->r.coll_at && (r->r.coll_n == UINT64_MAX || n - r->r.coll_at < r->r.coll_n);
	}
	from = r->origin + r->r.at_ns;
	if (now < from || from < r->origin)
		return 0;
	return r->r.dur_ns == UINT64_MAX || now - from < r->r.dur_ns;
}

ff_peer_t *ff_peer(ff_ep_t *w, uint32_t dst)
{
	return (w->peers && dst < w->attr.max_gids) ? &w->peers[dst] : &w->unknown;
}

static int in_mask(uint64_t m, uint32_t rank)
{
	return m == GICE_FAULTS_ANY || (rank <= GICE_FAULTS_MAX_RANK && ((m >> rank) & 1));
}

static uint32_t rank_of(const ff_ep_t *w, uint32_t gid) { return w->attr.nranks ? gid % w->attr.nranks : gid; }

/* Times psn was sent to dst before (0: never, or forgotten). */
static uint32_t attempt_of(const ff_ep_t *w, uint32_t dst, uint32_t psn)
{
	const ff_att_t *a;

	if (!w->att || dst >= w->attr.max_gids)
		return 0;
	a = &w->att[(size_t)dst * FF_ATT_RING + (psn & (FF_ATT_RING - 1))];
	return (a->tries && a->psn == psn) ? a->tries : 0;
}

/* The 64-bit draw of purpose `salt` for a sequenced packet. */
static uint64_t draw_seq(const ff_ep_t *w, const fab_fault_pkt_t *k, uint32_t attempt, uint32_t salt)
{
	return ff_mix(w->cfg.seed ^ ff_mix(((uint64_t)k->src << 32 | k->dst) ^
					   ff_mix((uint64_t)k->psn << 24 ^ (uint64_t)attempt << 8 ^ salt)));
}

/* ... and for a control packet or an opaque message: call order (k). */
static uint64_t draw_seq_free(const ff_ep_t *w, uint32_t i, uint32_t salt)
{
	return ff_mix(w->cfg.seed ^ ff_mix(w->stream) ^ ff_mix(w->k << 20 ^ (uint64_t)i << 10 ^ salt));
}

static int hit(uint64_t u, uint64_t thr) { return (u >> 11) < thr; }

/* Read the packets of the message; 0 when the classifier took them all. */
static int classify(ff_ep_t *w, const void *hdr, size_t hlen, const void *payload, size_t plen,
		    fab_fault_pkt_t *first)
{
	ff_plan_t *pl = &w->plan;
	size_t off = 0, total = hlen + plen;

	if (!w->attr.classify)
		return -1;
	while (off < total) {
		fab_fault_pkt_t k;

		if (pl->n_pkts == FF_BUNDLE_MAX || off >= hlen ||
		    w->attr.classify((const uint8_t *)hdr + off, hlen - off, &k) || !k.len || k.len > total - off ||
		    k.hdr_len > k.len || (payload && k.len != total))
			return -1;
		if (!pl->n_pkts)
			*first = k;
		else if (k.dst != first->dst)
			return -1;
		pl->pkt[pl->n_pkts++] = (ff_pkt_t){.off = (uint32_t)off, .len = (uint32_t)k.len,
						   .hdr_len = (uint32_t)k.hdr_len, .psn = k.psn, .seq = k.seq};
		off += k.len;
	}
	return pl->n_pkts ? 0 : -1;
}

/* Rule j on packet i (k) of the message: its effects into the plan. */
static void rule_apply(ff_ep_t *w, uint32_t j, uint32_t i, const fab_fault_pkt_t *k, uint32_t attempt, uint64_t now,
		       uint8_t *took)
{
	const ff_rule_t *R = &w->cfg.rule[j];
	const gice_fault_rule_t *r = &R->r;
	ff_rstate_t *rs = &w->rs[j];
	ff_plan_t *pl = &w->plan;
	ff_pkt_t *p = &pl->pkt[i];
	uint32_t sr = rank_of(w, k->src), dr = rank_of(w, k->dst);
	int on = ff_rule_on(R, now, w->plan.colls), is_op = k->seq && k->op_start && attempt == 0 && R->origin;
	uint64_t ops_before = rs->ops + pl->ops_add[j];
	uint64_t u;

	if (r->kind == GICE_FK_PARTITION) {
		if (on && ((in_mask(r->from, sr) && in_mask(r->to, dr)) || (in_mask(r->to, sr) && in_mask(r->from, dr)))) {
			p->drop = 1;
			*took = 1;
		}
		return;
	}
	if (!in_mask(r->from, sr) || !in_mask(r->to, dr) || (!k->seq && !r->ctl))
		return;
	pl->ops_add[j] += (uint64_t)is_op;
	if (!on || ops_before < r->after_ops)
		return;
	*took = 1;
	u = k->seq ? draw_seq(w, k, attempt, j << 2) : draw_seq_free(w, i, j << 2);
	switch (r->kind) {
	case GICE_FK_DROP: p->drop |= (uint8_t)hit(u, R->thr); break;
	case GICE_FK_CORRUPT:
		if (hit(u, R->thr) && !p->corrupt) {
			p->corrupt = 1;
			p->pick = k->seq ? draw_seq(w, k, attempt, j << 2 | 1) : draw_seq_free(w, i, j << 2 | 1);
		}
		break;
	case GICE_FK_DUP: pl->dup |= (uint8_t)hit(u, R->thr); break;
	case GICE_FK_REORDER: pl->reorder |= (uint8_t)hit(u, R->thr); break;
	case GICE_FK_DELAY: {
		uint64_t d = (uint64_t)((double)(u >> 11) / FF_ONE * ((double)r->n + 1));
		pl->delay_ns = GICE_MAX(pl->delay_ns, GICE_MIN(d, r->n));
		break;
	}
	case GICE_FK_NTH_PUT:
		if (k->seq && rs->victim_gid == k->dst && k->msg_id == rs->victim_msg) {
			p->drop = 1; /* the lost put, sent again */
		} else if (k->seq && pl->set_victim[j] && k->msg_id == pl->victim_msg[j]) {
			p->drop = 1; /* a later packet of it in this bundle */
		} else if (is_op && k->put && rs->victim_gid == UINT32_MAX && !pl->set_victim[j]) {
			if (rs->nth + pl->nth_add[j]++ + 1 == r->n) {
				pl->set_victim[j] = 1;
				pl->victim_msg[j] = k->msg_id;
				p->drop = 1;
			}
		}
		break;
	case GICE_FK_CORRUPT_MSG:
		if (is_op && !rs->done && !pl->set_done[j] && rs->nth + pl->nth_add[j]++ + 1 == r->n) {
			pl->set_done[j] = 1;
			p->corrupt = 2; /* in the payload */
			p->pick = draw_seq(w, k, attempt, j << 2 | 1);
		}
		break;
	default: break; /* LATENCY, RATE: per message, below */
	}
}

/* An opaque message: unscoped rules only, drawn in call order. */
static void plan_opaque(ff_ep_t *w, size_t total, uint64_t now)
{
	ff_plan_t *pl = &w->plan;
	ff_pkt_t *p = &pl->pkt[0];

	*p = (ff_pkt_t){.off = 0, .len = (uint32_t)total, .hdr_len = 0};
	pl->opaque = 1;
	pl->n_pkts = 1;
	for (uint32_t j = 0; j < w->cfg.n_rules; j++) {
		const ff_rule_t *R = &w->cfg.rule[j];
		const gice_fault_rule_t *r = &R->r;
		uint64_t u = draw_seq_free(w, 0, j << 2);

		if (r->from != GICE_FAULTS_ANY || r->to != GICE_FAULTS_ANY || r->kind == GICE_FK_PARTITION)
			continue;
		pl->ops_add[j] = R->origin != 0; /* an opaque message counts as one operation */
		if (!ff_rule_on(R, now, pl->colls) || w->rs[j].ops < r->after_ops)
			continue;
		switch (r->kind) {
		case GICE_FK_DROP: p->drop |= (uint8_t)hit(u, R->thr); break;
		case GICE_FK_CORRUPT:
			if (hit(u, R->thr) && !p->corrupt) {
				p->corrupt = 1;
				p->pick = draw_seq_free(w, 0, j << 2 | 1);
			}
			break;
		case GICE_FK_DUP: pl->dup |= (uint8_t)hit(u, R->thr); break;
		case GICE_FK_REORDER: pl->reorder |= (uint8_t)hit(u, R->thr); break;
		case GICE_FK_DELAY: {
			uint64_t d = (uint64_t)((double)(u >> 11) / FF_ONE * ((double)r->n + 1));
			pl->delay_ns = GICE_MAX(pl->delay_ns, GICE_MIN(d, r->n));
			break;
		}
		case GICE_FK_LATENCY: pl->latency_ns += r->n; break;
		case GICE_FK_RATE: pl->rate = pl->rate ? GICE_MIN(pl->rate, r->n) : r->n; break;
		case GICE_FK_CORRUPT_MSG:
			if (!w->rs[j].done && w->rs[j].nth + 1 == r->n) {
				pl->set_done[j] = 1;
				p->corrupt = 1;
				p->pick = draw_seq_free(w, 0, j << 2 | 1);
			}
			pl->nth_add[j] = 1;
			break;
		default: break; /* NTH_PUT needs to know puts */
		}
	}
	pl->n_drop = p->drop;
	pl->n_corrupt = !p->drop && p->corrupt;
}

void ff_plan(ff_ep_t *w, const void *hdr, size_t hlen, const void *payload, size_t plen, uint64_t now)
{
	ff_plan_t *pl = &w->plan;
	fab_fault_pkt_t first = {0};
	uint8_t took[GICE_FAULTS_MAX_RULES] = {0};

	pl->n_pkts = pl->n_drop = pl->n_corrupt = 0;
	pl->opaque = 0;
	pl->dup = pl->reorder = 0;
	pl->delay_ns = pl->latency_ns = pl->rate = 0;
	pl->dst = UINT32_MAX;
	pl->colls = atomic_load_explicit(&w->colls, memory_order_relaxed);
	memset(pl->ops_add, 0, sizeof(pl->ops_add));
	memset(pl->nth_add, 0, sizeof(pl->nth_add));
	memset(pl->set_victim, 0, sizeof(pl->set_victim));
	memset(pl->set_done, 0, sizeof(pl->set_done));
	if (classify(w, hdr, hlen, payload, plen, &first)) {
		plan_opaque(w, hlen + plen, now);
		return;
	}
	pl->dst = first.dst;
	for (uint32_t i = 0; i < pl->n_pkts; i++) {
		fab_fault_pkt_t k;
		ff_pkt_t *p = &pl->pkt[i];
		uint32_t att;

		if (i == 0)
			k = first;
		else
			w->attr.classify((const uint8_t *)hdr + p->off, hlen - p->off, &k);
		att = k.seq ? attempt_of(w, k.dst, k.psn) : 0;
		p->drop = p->corrupt = 0;
		for (uint32_t j = 0; j < w->cfg.n_rules; j++)
			rule_apply(w, j, i, &k, att, now, &took[j]);
		pl->n_drop += p->drop;
		pl->n_corrupt += !p->drop && p->corrupt;
	}
	for (uint32_t j = 0; j < w->cfg.n_rules; j++) {
		const gice_fault_rule_t *r = &w->cfg.rule[j].r;

		if (!took[j])
			continue;
		if (r->kind == GICE_FK_LATENCY)
			pl->latency_ns += r->n;
		else if (r->kind == GICE_FK_RATE)
			pl->rate = pl->rate ? GICE_MIN(pl->rate, r->n) : r->n;
	}
}

void ff_commit(ff_ep_t *w, int dups, int held_reorder, int held_delay)
{
	ff_plan_t *pl = &w->plan;
	ff_peer_t *pp = ff_peer(w, pl->dst);
	uint64_t sent = pl->n_pkts, left = pl->n_pkts - pl->n_drop;
	uint64_t add[FF_NSTATS] = {0};

	for (uint32_t i = 0; !pl->opaque && w->att && pl->dst < w->attr.max_gids && i < pl->n_pkts; i++) {
		ff_pkt_t *p = &pl->pkt[i];
		ff_att_t *a;

		if (!p->seq)
			continue;
		a = &w->att[(size_t)pl->dst * FF_ATT_RING + (p->psn & (FF_ATT_RING - 1))];
		if (a->tries && a->psn == p->psn) {
			a->tries++;
		} else {
			a->psn = p->psn;
			a->tries = 1;
		}
	}
	for (uint32_t j = 0; j < w->cfg.n_rules; j++) {
		ff_rstate_t *rs = &w->rs[j];

		rs->ops += pl->ops_add[j];
		rs->nth += pl->nth_add[j];
		if (pl->set_victim[j]) {
			rs->victim_gid = pl->dst;
			rs->victim_msg = pl->victim_msg[j];
		}
		rs->done |= pl->set_done[j];
	}
	add[FF_ST_sent] = sent;
	add[FF_ST_dropped] = pl->n_drop;
	add[FF_ST_corrupted] = pl->n_corrupt;
	add[FF_ST_duplicated] = dups ? left : 0;
	add[FF_ST_reordered] = held_reorder ? left : 0;
	add[FF_ST_delayed] = held_delay ? left : 0;
	for (int s = 0; s < FF_NSTATS; s++) {
		ff_count(&w->n[s], add[s]);
		if (pp != &w->unknown)
			ff_count(&pp->n[s], add[s]);
	}
	w->k++;
}
