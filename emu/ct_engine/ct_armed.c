/* ct_armed.c: armed descriptors — an operation that fires when its trigger counter reaches a
 * threshold (again every period, if it has one). The host arms and disarms through the CT's
 * request queue (ARM/DISARM control requests, so they keep their place among the requests);
 * the CT keeps them per counter sorted by (threshold, arming order) and fires the due ones when
 * the counter is written. A descriptor's life: DS_FREE → DS_ARMING (queued) → DS_ARMED →
 * DS_FIRED (once) or DS_DISARMED, a slot that may be armed again; a periodic one stays DS_ARMED. */
#include "emu/ct_engine/ct_internal.h"

#include <sched.h>
#include <time.h>

static int thr_before(uint64_t a, uint64_t b) { return (int64_t)(a - b) < 0; }

static void armed_insert(ct_tile_t *t, uint32_t di)
{
	ct_engine_t *e = t->e;
	ct_desc_t *d = &e->descs[di];
	uint32_t *link = &t->armed[d->trig];

	/* after every descriptor whose threshold is <= ours: equal thresholds fire in arming order */
	while (*link != CT_NIL && !thr_before(d->threshold, e->descs[*link].threshold))
		link = &e->descs[*link].next;
	d->next = *link;
	*link = di;
}

static int armed_remove(ct_tile_t *t, uint32_t di)
{
	ct_engine_t *e = t->e;
	uint32_t *link = &t->armed[e->descs[di].trig];

	while (*link != CT_NIL && *link != di)
		link = &e->descs[*link].next;
	if (*link == CT_NIL)
		return 0;
	*link = e->descs[di].next;
	return 1;
}

int ct_fire_due(ct_tile_t *t, uint32_t id, uint64_t v)
{
	ct_engine_t *e = t->e;
	int n = 0;

	while (t->armed[id] != CT_NIL) {
		uint32_t di = t->armed[id];
		ct_desc_t *d = &e->descs[di];
		if (thr_before(v, d->threshold))
			break;
		ct_req_t r = d->req;
		tm_counter_state_t cs;
		tm_counter_get(e->attr.tm, id, &cs);
		r.t_issue = cs.ts_ns; /* the trigger write that made it due */
		uint64_t fired = atomic_load_explicit(&t->fired_next, memory_order_relaxed);
		/* no message entry free, or the retirement ring full: look again later */
		if (fired - atomic_load_explicit(&t->rf.cursor, memory_order_acquire) > t->rf.mask ||
		    ct_exec_req(t, &r, fired | CT_TICKET_FIRED, id, d->threshold) == GICE_ERR_AGAIN) {
			tm_dirty_mark(e->attr.tm, t->idx, id);
			break;
		}
		/* release: quiet reads it, then waits for the fired counter to reach it */
		atomic_store_explicit(&t->fired_next, fired + 1, memory_order_release);
		t->armed[id] = d->next;
		ct_stat_add(e, CT_STAT_fired, 1);
		n++;
		if (d->period) {
			d->threshold += d->period;
			armed_insert(t, di);
		} else {
			atomic_store_explicit(&d->state, DS_FIRED, memory_order_release);
		}
	}
	if (t->armed[id] == CT_NIL)
		tm_counter_watch(e->attr.tm, id, t->idx, 0);
	return n;
}

void ct_control_req(ct_tile_t *t, const ct_req_t *r, uint64_t ticket)
{
	ct_engine_t *e = t->e;
	ct_desc_t *d = &e->descs[r->desc];

	/* read the trigger before publishing the state: once DS_DISARMED is visible, ct_arm on
	 * another thread may take the slot again and rewrite d->trig */
	uint32_t trig = d->trig;

	if (r->op == CT_OP_ARM_) {
		armed_insert(t, r->desc);
		atomic_store_explicit(&d->state, DS_ARMED, memory_order_release);
		tm_counter_watch(e->attr.tm, trig, t->idx, 1);
		/* a threshold already reached fires in the next pass, after the requests queued
		 * behind this ARM (they may have been issued before the trigger write) */
		tm_dirty_mark(e->attr.tm, t->idx, trig);
	} else if (armed_remove(t, r->desc)) {
		atomic_store_explicit(&d->state, DS_DISARMED, memory_order_release);
		if (t->armed[trig] == CT_NIL)
			tm_counter_watch(e->attr.tm, trig, t->idx, 0);
	}
	ct_retire(e, t->idx, ticket);
}

static int push_control(ct_engine_t *e, uint32_t ct, uint8_t op, uint32_t desc)
{
	ct_req_t r = {.op = op, .desc = desc, .counter = TM_NONE};
	uint64_t ticket;
	uint64_t deadline = gice_now_ns() + 5000000000ull;
	int rc;

	while ((rc = tm_queue_push(e->attr.tm, ct, &r, sizeof(r), &ticket)) == GICE_ERR_AGAIN) {
		if (gice_now_ns() > deadline) {
			gice_error("ct", "CT %u request queue full for 5 s while arming", ct);
			return GICE_ERR_TIMED_OUT;
		}
		sched_yield();
	}
	return rc;
}

#define DESC_SLOT(id) ((id) & 0xfffffu)
#define DESC_GEN(id) ((id) >> 20)

int ct_arm(ct_engine_t *e, uint32_t trig, uint64_t threshold, uint64_t period, const ct_req_t *op,
	   uint32_t *desc)
{
	if (!ct_counter_ok(e, trig) ||
	    (op->op > CT_OP_FENCE && !CT_OP_IS_FILE(op->op))) {
		gice_error("ct", "arm on counter %u (valid %u..%u) with op %u: invalid", trig, e->attr.n_cts,
			   e->n_counters - 1, op->op);
		return GICE_ERR_INVALID;
	}
	pthread_mutex_lock(&e->setup_lock);
	for (uint32_t i = 0; i < e->max_descs; i++) {
		ct_desc_t *d = &e->descs[i];
		int s = atomic_load_explicit(&d->state, memory_order_acquire);
		if (s != DS_FREE && s != DS_FIRED && s != DS_DISARMED)
			continue;
		d->gen = (d->gen + 1) & 0xfff;
		d->req = *op;
		d->req.t_issue = 0;
		d->trig = trig;
		d->threshold = threshold;
		d->period = period;
		/* a remote op fires on its connection's CT, so it keeps its place among that
		 * connection's other messages; local counter ops on the trigger's CT */
		d->ct = op->op >= CT_OP_PUT && op->op <= CT_OP_AMO_CSWAP ? ct_for_conn(e, op->conn)
									 : trig % e->attr.n_cts;
		d->next = CT_NIL;
		atomic_store_explicit(&d->state, DS_ARMING, memory_order_release);
		pthread_mutex_unlock(&e->setup_lock);
		int rc = push_control(e, d->ct, CT_OP_ARM_, i);
		if (rc) {
			atomic_store(&d->state, DS_FREE);
			return rc;
		}
		*desc = (d->gen << 20) | i;
		return GICE_OK;
	}
	pthread_mutex_unlock(&e->setup_lock);
	gice_error("ct", "all %u descriptors are armed (GICE_CT_MAX_DESCS)", e->max_descs);
	return GICE_ERR_OVERFLOW;
}

int ct_disarm(ct_engine_t *e, uint32_t desc)
{
	uint32_t i = DESC_SLOT(desc);
	ct_desc_t *d;
	int s;

	if (i >= e->max_descs || e->descs[i].gen != DESC_GEN(desc))
		return GICE_ERR_NOT_FOUND;
	d = &e->descs[i];
	/* wait for a pending ARM to be taken by the CT */
	while ((s = atomic_load_explicit(&d->state, memory_order_acquire)) == DS_ARMING)
		sched_yield();
	if (s != DS_ARMED)
		return GICE_ERR_NOT_FOUND;
	int rc = push_control(e, d->ct, CT_OP_DISARM_, i);
	if (rc)
		return rc;
	while ((s = atomic_load_explicit(&d->state, memory_order_acquire)) == DS_ARMED) {
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	return s == DS_DISARMED ? GICE_OK : GICE_ERR_NOT_FOUND;
}
