/* ct_engine.c: the engine's set-up calls — create and destroy, peers and connections, quiet
 * points, statistics and traces. The engine's parts: ct_params.c (its parameters), ct_tile.c
 * (the CT threads: request queues, the Initiator's translation step, retirement), ct_armed.c
 * (armed descriptors), ct_watch.c (watchdog hooks, CT fault injection) and the link,
 * ct_link*.c (MPG scheduling, packets, reliability; see ct_link.c). */
#include "emu/ct_engine/ct_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- set-up */

/* Free everything ct_engine_create allocated (threads already stopped). */
static void engine_free(ct_engine_t *e)
{
	for (uint32_t c = 0; e->tiles && c < e->attr.n_cts; c++) {
		free(e->tiles[c].rq.done);
		free(e->tiles[c].rf.done);
		if (e->tiles[c].rf.counter)
			tm_counter_free(e->attr.tm, e->tiles[c].rf.counter);
		free(e->tiles[c].armed);
	}
	free(e->descs);
	free(e->conns);
	for (uint32_t g = 0; e->peers && g < e->max_peers; g++)
		free(e->peers[g].tx);
	free(e->peers);
	free(e->dack_peers);
	free(e->tiles);
	free(e->msgs);
	free(e->bundle);
	free(e->puts_buf);
	pthread_mutex_destroy(&e->setup_lock);
	free(e);
}

int ct_engine_create(const ct_engine_attr_t *attr, ct_engine_t **out)
{
	const tm_layout_t *lay = tm_region_layout(attr->tm);
	ct_engine_t *e;
	uint32_t n_msgs;
	int rc;

	if (!attr->n_cts || attr->n_cts > lay->n_cts) {
		gice_error("ct", "%u CTs requested, trigger memory has queues for %u", attr->n_cts, lay->n_cts);
		return GICE_ERR_INVALID;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return GICE_ERR_NO_MEMORY;
	e->attr = *attr;
	e->base = hbm_base(attr->hbm);
	e->n_counters = lay->n_counters;
	if ((rc = ct_read_params(e)))
		goto err_free;
	e->timeout_ns = attr->timeout_ns ? attr->timeout_ns : 10000000000ull;
	e->hb_ns = e->timeout_ns / 4;
	atomic_store(&e->hang_at_ns, attr->hang_at_ns);
	atomic_store(&e->t_poll, gice_now_ns());
	if (attr->gid >= e->max_peers) {
		gice_error("ct", "device gid %u >= GICE_CT_MAX_PEERS=%u", attr->gid, e->max_peers);
		rc = GICE_ERR_CONFIG;
		goto err_free;
	}
	pthread_mutex_init(&e->setup_lock, NULL);
	rc = GICE_ERR_NO_MEMORY;
	n_msgs = attr->n_cts * CT_MSGS_PER_CT + CT_RESP_MSGS;
	e->msgs = calloc(n_msgs, sizeof(*e->msgs));
	e->tiles = calloc(attr->n_cts, sizeof(*e->tiles));
	e->peers = calloc(e->max_peers, sizeof(*e->peers));
	e->dack_peers = calloc(e->max_peers, sizeof(*e->dack_peers));
	e->conns = calloc(CT_MAX_CONNS, sizeof(*e->conns));
	e->descs = calloc(e->max_descs, sizeof(*e->descs));
	e->bundle = malloc(e->bundle_max);
	e->puts_buf = malloc(e->mtu_max);
	if (!e->msgs || !e->tiles || !e->peers || !e->dack_peers || !e->conns || !e->descs || !e->bundle ||
	    !e->puts_buf)
		goto err_mem;
	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++) {
		e->act_head[q] = e->act_tail[q] = CT_NIL;
		e->resp_head[q] = e->resp_tail[q] = CT_NIL;
	}
	e->resp_free = CT_NIL;
	atomic_store_explicit(&e->cork_gid, CT_NIL, memory_order_relaxed);
	atomic_store_explicit(&e->ackin_gid, CT_NIL, memory_order_relaxed);
	e->resp_share = CT_RESP_MSGS; /* shared out as peers are added */
	for (uint32_t i = attr->n_cts * CT_MSGS_PER_CT; i < n_msgs; i++) {
		e->msgs[i].owner = CT_NIL;
		e->msgs[i].next = e->resp_free;
		e->resp_free = i;
	}
	for (uint32_t c = 0; c < attr->n_cts; c++) {
		ct_tile_t *t = &e->tiles[c];
		uint32_t ring = 1;
		while (ring < lay->queue_depth * 4)
			ring <<= 1;
		t->e = e;
		t->idx = c;
		t->rq.mask = t->rf.mask = ring - 1;
		t->rq.counter = c; /* the queue's retired-ticket counter (triggermem reserves it) */
		t->rq.done = calloc(ring, sizeof(*t->rq.done));
		t->rf.done = calloc(ring, sizeof(*t->rf.done));
		t->armed = malloc(sizeof(uint32_t) * e->n_counters);
		if (!t->rq.done || !t->rf.done || !t->armed)
			goto err_mem;
		if (tm_counter_alloc(attr->tm, &t->rf.counter)) /* counts its retired fired tickets */
			goto err_mem;
		memset(t->armed, 0xff, sizeof(uint32_t) * e->n_counters);
		t->free_head = CT_NIL;
		for (uint32_t k = 0; attr->faults && k < attr->faults->n_stall; k++) {
			const gice_fault_stall_t *st = &attr->faults->stall[k];
			if (st->ct != c)
				continue;
			ct_engine_fault_stall(e, c, attr->t0_ns + st->at_ns, st->dur_ns);
			gice_info("fault", "device %u CT %u will stall %llu ms after start for %llu ms", attr->gid, c,
				  (unsigned long long)(st->at_ns / 1000000),
				  (unsigned long long)(st->dur_ns == UINT64_MAX ? 0 : st->dur_ns / 1000000));
		}
		atomic_store(&t->hb_ns, gice_now_ns());
		for (uint32_t i = 0; i < CT_MSGS_PER_CT; i++) {
			uint32_t idx = c * CT_MSGS_PER_CT + i;
			e->msgs[idx].owner = c;
			e->msgs[idx].next = t->free_head;
			t->free_head = idx;
		}
	}
	if ((e->rndv_from[0][0] || e->rndv_from[1][0]) && attr->ep->rma) {
		if (fab_mr_reg(attr->ep, e->base, hbm_size(attr->hbm)) == GICE_OK)
			e->rma = 1;
		else
			gice_info("ct", "device %u: no remote reads; large puts go as packets", attr->gid);
	}
	for (uint32_t c = 0; c < attr->n_cts; c++) {
		if ((rc = pthread_create(&e->tiles[c].thread, NULL, ct_thread, &e->tiles[c]))) {
			gice_error("ct", "pthread_create of CT %u: %s", c, strerror(rc));
			rc = GICE_ERR_NO_MEMORY;
			goto err_threads;
		}
		e->tiles[c].started = 1;
	}
	*out = e;
	return GICE_OK;

err_threads:
	atomic_store(&e->stop, 1);
	for (uint32_t c = 0; c < attr->n_cts; c++) {
		if (!e->tiles[c].started)
			continue;
		tm_doorbell_ring(attr->tm, c);
		pthread_join(e->tiles[c].thread, NULL);
	}
err_mem:
	engine_free(e);
	return rc;
err_free:
	free(e);
	return rc;
}

/* Tell the CT threads to stop, every one rung. */
static void threads_stop(ct_engine_t *e)
{
	atomic_store_explicit(&e->stop, 1, memory_order_release);
	for (uint32_t c = 0; c < e->attr.n_cts; c++)
		tm_doorbell_ring(e->attr.tm, c);
}

void ct_engine_destroy(ct_engine_t *e)
{
	if (!e)
		return;
	threads_stop(e);
	for (uint32_t c = 0; c < e->attr.n_cts; c++)
		pthread_join(e->tiles[c].thread, NULL);
	if (atomic_load(&e->proxy_started))
		pthread_join(e->proxy, NULL);
	uint64_t hang = atomic_load(&e->hang_at_ns);
	if (!hang || gice_now_ns() < hang) {
		ct_link_progress(e); /* take in the BYEs of peers that closed before us */
		ct_link_bye(e);
		/* let the provider push the BYEs out before the endpoint closes */
		for (int i = 0; i < 10 && (ct_link_progress(e), atomic_load(&e->attr.ep->held)); i++)
			ct_nap_us(1000);
		ct_link_progress(e);
	}
	ct_link_cancel_all(e);
	ct_grants_revoke_all(e);
	engine_free(e);
}

uint32_t ct_engine_abandon(ct_engine_t *e, uint64_t deadline_ns)
{
	uint32_t left = 0;

	threads_stop(e);
	for (uint32_t c = 0; c < e->attr.n_cts; c++)
		left += (uint32_t)!gice_join_by(e->tiles[c].thread, deadline_ns);
	if (atomic_load(&e->proxy_started))
		left += (uint32_t)!gice_join_by(e->proxy, deadline_ns);
	return left;
}

int ct_engine_auth(const ct_engine_t *e) { return e->auth; }

int ct_engine_mr(const ct_engine_t *e, fab_mr_info_t *mr)
{
	if (!e->rma)
		return GICE_ERR_UNSUPPORTED;
	*mr = e->mr;
	return GICE_OK;
}

int ct_peer_add(ct_engine_t *e, uint32_t gid, const ct_peer_info_t *info)
{
	fab_addr_t fa;
	int rc;

	if (gid >= e->max_peers) {
		gice_error("ct", "peer gid %u >= GICE_CT_MAX_PEERS=%u", gid, e->max_peers);
		return GICE_ERR_INVALID;
	}
	ct_link_lock(e);
	if (e->peers[gid].present) {
		ct_link_unlock(e);
		return GICE_OK;
	}
	uint32_t win = 1;
	while (win < e->credits)
		win <<= 1;
	ct_txrec_t *tx = calloc(win, sizeof(*tx));
	rc = tx ? fab_insert(e->attr.ep, info->addr, info->addr_len, &fa) : GICE_ERR_NO_MEMORY;
	if (rc != GICE_OK)
		free(tx);
	if (rc == GICE_OK) {
		ct_peer_t *p = &e->peers[gid];
		memset(p, 0, sizeof(*p));
		p->cwnd = GICE_MIN(e->credits, GICE_MAX(e->ack_every, 16u));
		p->ssthresh = e->credits;
		p->tx = tx;
		p->tx_mask = win - 1;
		p->addr = fa;
		p->wait_head = p->wait_tail = CT_NIL;
		if (info->mr) {
			p->mr = *info->mr;
			p->rma = 1;
		}
		p->map = info->hbm;
		p->map_size = info->hbm_size;
		p->pid = info->pid;
		p->tm = info->tm;
		if (!p->tm)
			atomic_fetch_add_explicit(&e->n_remote, 1, memory_order_relaxed);
		p->present = 1;
		e->n_present++;
		e->resp_share = GICE_MAX(CT_RESP_MIN_SHARE, CT_RESP_MSGS / e->n_present);
	}
	ct_link_unlock(e);
	return rc;
}

void ct_peer_closed(ct_engine_t *e, uint32_t gid)
{
	if (gid >= e->max_peers || gid == e->attr.gid)
		return;
	ct_link_lock(e);
	if (e->peers[gid].present && !e->peers[gid].dead) {
		ct_peer_fail(e, gid, GICE_ERR_PEER_DEAD, "closed its device");
		/* nor may the endpoint send it what it holds back (the fault injector) */
		fab_forget(e->attr.ep, e->peers[gid].addr);
	}
	e->peers[gid].tm = NULL; /* its trigger memory goes with it: no more kicks */
	ct_link_unlock(e);
}

int ct_conn_open(ct_engine_t *e, const ct_conn_attr_t *attr, uint32_t *conn)
{
	uint32_t mtu = attr->mtu ? attr->mtu : e->mtu_max;
	int present;

	if (attr->peer_gid >= e->max_peers || attr->qos >= CT_QOS_CLASSES || mtu > e->mtu_max || mtu < CT_MTU_MIN) {
		gice_error("ct", "connection to gid %u qos %u mtu %u: bad attribute (max gid %u, qos < %u, mtu 256..%u)",
			   attr->peer_gid, attr->qos, mtu, e->max_peers - 1, CT_QOS_CLASSES, e->mtu_max);
		return GICE_ERR_INVALID;
	}
	ct_link_lock(e);
	present = e->peers[attr->peer_gid].present;
	ct_link_unlock(e);
	if (!present) {
		gice_error("ct", "connection to device %u: peer was never added", attr->peer_gid);
		return GICE_ERR_NOT_FOUND;
	}
	pthread_mutex_lock(&e->setup_lock);
	for (uint32_t i = 0; i < CT_MAX_CONNS; i++) {
		if (e->conns[i].open)
			continue;
		e->conns[i].peer = attr->peer_gid;
		e->conns[i].mtu = mtu - CT_HDR_BYTES; /* payload bytes per packet */
		e->conns[i].qos = attr->qos;
		/* published before any request can name it: the id travels to the CT through the
		 * queue's release/acquire */
		e->conns[i].open = 1;
		pthread_mutex_unlock(&e->setup_lock);
		*conn = i;
		return GICE_OK;
	}
	pthread_mutex_unlock(&e->setup_lock);
	gice_error("ct", "all %u connections are open", CT_MAX_CONNS);
	return GICE_ERR_OVERFLOW;
}

int ct_conn_close(ct_engine_t *e, uint32_t conn)
{
	if (conn >= CT_MAX_CONNS || !e->conns[conn].open)
		return GICE_ERR_INVALID;
	pthread_mutex_lock(&e->setup_lock);
	e->conns[conn].open = 0;
	pthread_mutex_unlock(&e->setup_lock);
	return GICE_OK;
}

uint32_t ct_for_conn(const ct_engine_t *e, uint32_t conn) { return conn % e->attr.n_cts; }
uint32_t ct_num_cts(const ct_engine_t *e) { return e->attr.n_cts; }

uint32_t ct_quiet_points(const ct_engine_t *e, ct_quiet_point_t *pts)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < e->attr.n_cts; c++) {
		const ct_tile_t *t = &e->tiles[c];
		pts[n++] = (ct_quiet_point_t){t->rq.counter, tm_queue_prod(e->attr.tm, c)};
		/* acquire: pairs with ct_fire_due's release of the ticket */
		pts[n++] = (ct_quiet_point_t){t->rf.counter, atomic_load_explicit(&t->fired_next, memory_order_acquire)};
	}
	return n;
}

int ct_counter_engine_owned(const ct_engine_t *e, uint32_t id, uint32_t *ct)
{
	for (uint32_t c = 0; c < e->attr.n_cts; c++)
		if (e->tiles[c].rf.counter == id) {
			*ct = c;
			return 1;
		}
	return 0;
}

int ct_failure_take(ct_engine_t *e)
{
	return atomic_exchange_explicit(&e->first_fail, GICE_OK, memory_order_relaxed);
}

void ct_engine_stats(const ct_engine_t *e, ct_stats_t *s)
{
	for (int i = 0; i < CT_STATS; i++)
		s->v[i] = atomic_load_explicit((_Atomic uint64_t *)&e->st[i], memory_order_relaxed);
}

int ct_engine_ct_busy(const ct_engine_t *e, uint32_t ct, uint64_t *busy_ns, uint64_t *alive_ns, uint64_t *cpu_ns)
{
	clockid_t cid;
	struct timespec ts;

	if (ct >= e->attr.n_cts || !e->tiles)
		return GICE_ERR_INVALID;
	uint64_t t0 = atomic_load_explicit(&e->tiles[ct].t_start_ns, memory_order_relaxed);
	*busy_ns = atomic_load_explicit(&e->tiles[ct].busy_ns, memory_order_relaxed);
	*alive_ns = t0 ? gice_now_ns() - t0 : 0;
	/* t_start_ns is its thread's first store: started, and not joined before the engine's end */
	*cpu_ns = t0 && !pthread_getcpuclockid(e->tiles[ct].thread, &cid) && !clock_gettime(cid, &ts)
			  ? (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec
			  : 0;
	return GICE_OK;
}

uint32_t ct_trace_read(const ct_engine_t *ce, ct_trace_t *out, uint32_t max)
{
	ct_engine_t *e = (ct_engine_t *)ce;
	uint32_t n;

	ct_link_lock(e);
	n = (uint32_t)GICE_MIN((uint64_t)max, GICE_MIN(e->trace_n, (uint64_t)CT_TRACE_RING));
	for (uint32_t i = 0; i < n; i++)
		out[i] = e->trace[(e->trace_n - n + i) % CT_TRACE_RING];
	ct_link_unlock(e);
	return n;
}

uint32_t ct_rx_trace_read(const ct_engine_t *ce, ct_rx_trace_t *out, uint32_t max)
{
	ct_engine_t *e = (ct_engine_t *)ce;
	uint32_t n;

	ct_link_lock(e);
	n = (uint32_t)GICE_MIN((uint64_t)max, GICE_MIN(e->rx_trace_n, (uint64_t)CT_TRACE_RING));
	for (uint32_t i = 0; i < n; i++)
		out[i] = e->rx_trace[(e->rx_trace_n - n + i) % CT_TRACE_RING];
	ct_link_unlock(e);
	return n;
}

void ct_engine_fault_on(ct_engine_t *e, int corrupts)
{
	atomic_store(&e->reliable, 1);
	if (corrupts)
		atomic_store(&e->csum_tx, 1);
}

void ct_engine_set_reliable(ct_engine_t *e, int reliable, int csum)
{
	if (reliable >= 0)
		atomic_store(&e->reliable, reliable);
	if (csum >= 0)
		atomic_store(&e->csum, csum);
}
