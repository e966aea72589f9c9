/* ct_engine.c: the engine's set-up calls — parameters, create and destroy, peers and
 * connections, quiet points, statistics and traces. The engine's parts: ct_tile.c (the CT
 * threads: request queues, the Initiator's translation step, retirement), ct_armed.c (armed
 * descriptors), ct_watch.c (watchdog hooks, CT fault injection) and the link, ct_link*.c (MPG
 * scheduling, packets, reliability; see ct_link.c). */
#include "emu/ct_engine/ct_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const gice_param_t ct_params[] = {
	{"GICE_CTS", "2", "CT engine threads per device", GICE_PARAM_U64, 1, TM_MAX_CTS},
	{"GICE_MTU", "16384",
	 "largest packet on the link in bytes, the 96-byte header included (connections may use less); small packets "
	 "to one peer travel bundled in messages of this size",
	 GICE_PARAM_SIZE, CT_MTU_MIN, CT_MAX_PAYLOAD},
	{"GICE_CT_SPIN_US", "200",
	 "microseconds a CT polls after its last work before it sleeps on its doorbell (a kernel that waits and "
	 "steps the CTs spins as long in their place); unset, CT threads do not spin when the job's CT threads on "
	 "this machine outnumber its CPUs",
	 GICE_PARAM_U64, 0, 10000000},
	{"GICE_CT_POLL_US", "2000",
	 "while idle, CT 0 wakes this often to poll the fabric for arriving packets (microseconds); over a "
	 "provider whose wait fd CT 0 cannot sleep on (shm, udp;ofi_rxd, net) it bounds how late an idle device "
	 "sees a packet from another process or host",
	 GICE_PARAM_U64, 10, 10000000},
	{"GICE_CT_MAX_DESCS", "4096", "armed descriptors per device", GICE_PARAM_U64, 16, 1u << 20},
	{"GICE_CT_MAX_PEERS", "64", "largest global device id + 1 a device can talk to", GICE_PARAM_U64, 1, 65536},
	{"GICE_CT_CREDITS", "128", "unacknowledged packets in flight per peer (any value works with any GICE_CT_ACK_EVERY)",
	 GICE_PARAM_U64, 1, CT_PSN_WIN},
	{"GICE_CT_ACK_EVERY", "16",
	 "a receiver acknowledges at least every this many packets, or every GICE_CT_CREDITS/2 if fewer (and every "
	 "message end; the rest after a quarter of GICE_RTO_MIN_US)",
	 GICE_PARAM_U64, 1, CT_PSN_WIN / 2},
	{"GICE_CT_RNDV_BYTES", "auto",
	 "puts and gets of at least this many bytes move by rendezvous: one remote read (or NVLink plane copy) "
	 "after the peer validated the range, when the provider offers reads or the peer is on the plane; "
	 "auto: a size per provider, op and path, measured (docs/protocol.md); 0: always packets",
	 GICE_PARAM_STR, 0, UINT32_MAX},
	{"GICE_QOS_WEIGHTS", "8,4,2,1", "packets per turn of QoS classes 0..3 in the MPG weighted round robin",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_RTO_MIN_US", "1000", "smallest retransmission timeout (microseconds); the timeout follows the measured "
	 "round trip (srtt + 4 rttvar) and doubles at each expiry", GICE_PARAM_U64, 10, 10000000},
	{"GICE_RTO_MAX_US", "100000", "largest retransmission timeout (microseconds)", GICE_PARAM_U64, 100, 60000000},
	{"GICE_RELIABLE", "auto",
	 "1: gice retransmits lost packets itself (timeouts, selective acks); 0: it relies on the provider; "
	 "auto: 1 on unreliable providers (udp datagrams) or when GICE_FAULTS injects network faults",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CHECKSUM", "auto",
	 "1: every packet carries a CRC32C of header and payload, checked on receipt (a bad one is dropped and "
	 "retransmitted); 0: none; auto: 1 on unreliable providers or when GICE_FAULTS corrupts packets",
	 GICE_PARAM_STR, 0, 0},
	{"GICE_CT_AUTH", "1",
	 "1: every packet carries a MAC under the job's key (from the bootstrap's secret) and its claimed sender "
	 "must be the endpoint it came from; packets failing either are dropped and counted (rx_auth_bad); "
	 "0: neither (to measure the cost; every rank of the job must agree)",
	 GICE_PARAM_U64, 0, 1},
	{"GICE_CT_POLL_EVERY", "16",
	 "a pass of the link polls the fabric only when same-host peers announced packets (their kicks count "
	 "them), a peer is on another host or the endpoint has work of its own; and every this many passes "
	 "whatever the counts say; 0: only then (tests use it to show the counts are exact)",
	 GICE_PARAM_U64, 0, 1u << 20},
	{"GICE_CT_LEASE_US", "10",
	 "a kernel that queues a request counts for this long as looking at its device's link (it does at its "
	 "next request if anything arrived): same-host peers' packets meanwhile do not wake its CT 0 unless the "
	 "kernel has not come back by then (microseconds; 0: they always do)",
	 GICE_PARAM_U64, 0, 60000000},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* "auto", "0" or "1" → -1, 0, 1; GICE_ERR_CONFIG otherwise. */
static int param_auto(const gice_param_t *p, int *out)
{
	const char *v = gice_param_str(p);

	if (!strcmp(v, "auto"))
		*out = -1;
	else if (!strcmp(v, "0") || !strcmp(v, "1"))
		*out = v[0] - '0';
	else {
		gice_error("ct", "%s=\"%s\": expected auto, 0 or 1", p->name, v);
		return GICE_ERR_CONFIG;
	}
	return GICE_OK;
}

/* GICE_CT_RNDV_BYTES: "auto" (ct_rndv_auto for this endpoint's provider) or one size for every
 * op and path. Rendezvous reads and copies go around the fault injector: while GICE_FAULTS
 * injects network faults, auto keeps the former 64 KiB, so that it sees the packets it saw. */
static int rndv_param(ct_engine_t *e, const gice_param_t *p)
{
	gice_param_t size = *p;
	uint64_t v;
	int rc, automatic = !strcmp(gice_param_str(p), "auto");

	size.type = GICE_PARAM_SIZE;
	if (!automatic && (gice_param_str(p)[0] < '0' || gice_param_str(p)[0] > '9')) {
		gice_error("ct", "%s=\"%s\": expected auto or a size in bytes (0: never)", p->name, gice_param_str(p));
		return GICE_ERR_CONFIG;
	}
	if (!automatic && (rc = gice_param_u64(&size, &v))) /* logged there: suffix, range */
		return rc;
	if (automatic && gice_faults_any_net(e->attr.faults)) {
		automatic = 0;
		v = 65536;
	}
	for (int get = 0; get < 2; get++)
		for (int plane = 0; plane < 2; plane++)
			e->rndv_from[get][plane] = automatic ? ct_rndv_auto(e->attr.ep->provider, get, plane) : v;
	gice_debug("ct", "device %u over %s: rendezvous from %llu bytes (put) and %llu (get), on the NVLink plane "
		   "from %llu and %llu (GICE_CT_RNDV_BYTES=%s)", e->attr.gid, e->attr.ep->provider,
		   (unsigned long long)e->rndv_from[0][0], (unsigned long long)e->rndv_from[1][0],
		   (unsigned long long)e->rndv_from[0][1], (unsigned long long)e->rndv_from[1][1], gice_param_str(p));
	return GICE_OK;
}

static int read_params(ct_engine_t *e)
{
	uint64_t v[8];
	const char *w;
	int rc;

	for (int i = 0; i < 8; i++)
		if ((rc = gice_param_u64(&ct_params[i], &v[i])))
			return rc;
	if ((rc = rndv_param(e, &ct_params[8])))
		return rc;
	e->mtu_max = (uint32_t)v[1];
	if (e->attr.ep->max_packet && e->mtu_max > e->attr.ep->max_packet)
		e->mtu_max = (uint32_t)e->attr.ep->max_packet; /* datagrams: 1472 bytes on udp */
	e->spin_ns = e->spin_cfg_ns = v[2] * 1000;
	int spin_set = 0;
	gice_param_raw(&ct_params[2], &spin_set);
	if (!spin_set && e->attr.machine_cts > gice_cpus_usable()) {
		gice_debug("ct", "device %u: %u CT threads on this machine, %u CPUs: CTs sleep when idle", e->attr.gid,
			   e->attr.machine_cts, gice_cpus_usable());
		e->spin_ns = 0;
	}
	e->poll_ns = v[3] * 1000;
	e->max_descs = (uint32_t)v[4];
	e->max_peers = (uint32_t)v[5];
	e->credits = (uint32_t)v[6];
	e->ack_every = (uint32_t)v[7];
	if ((rc = gice_param_u64(&ct_params[10], &v[0])) || (rc = gice_param_u64(&ct_params[11], &v[1])))
		return rc;
	e->rto_min_ns = v[0] * 1000;
	e->rto_max_ns = GICE_MAX(v[1] * 1000, e->rto_min_ns);
	int rel, csum;
	if ((rc = param_auto(&ct_params[12], &rel)) || (rc = param_auto(&ct_params[13], &csum)))
		return rc;
	const gice_faults_t *f = e->attr.faults;
	int lossy = !e->attr.ep->reliable || gice_faults_any_net(f);
	atomic_store(&e->reliable, rel < 0 ? lossy : rel);
	atomic_store(&e->csum, csum < 0 ? !e->attr.ep->reliable || gice_faults_corrupts(f) : csum);
	if ((rc = gice_param_u64(&ct_params[14], &v[0])))
		return rc;
	e->auth = (int)v[0];
	if ((rc = gice_param_u64(&ct_params[15], &v[0])))
		return rc;
	e->poll_every = (uint32_t)v[0];
	if ((rc = gice_param_u64(&ct_params[16], &v[0])))
		return rc;
	e->lease_ns = v[0] * 1000;
	w = gice_param_str(&ct_params[9]);
	if (sscanf(w, "%u,%u,%u,%u", &e->weights[0], &e->weights[1], &e->weights[2], &e->weights[3]) != 4) {
		gice_error("ct", "GICE_QOS_WEIGHTS=\"%s\" is not four comma-separated numbers", w);
		return GICE_ERR_CONFIG;
	}
	for (int i = 0; i < CT_QOS_CLASSES; i++)
		if (e->weights[i] == 0 || e->weights[i] > 1024) {
			gice_error("ct", "GICE_QOS_WEIGHTS=\"%s\": weight %u of class %d is outside [1, 1024]", w,
				   e->weights[i], i);
			return GICE_ERR_CONFIG;
		}
	return GICE_OK;
}

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
	free(e->tiles);
	free(e->msgs);
	free(e->bundle);
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
	if ((rc = read_params(e)))
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
	e->conns = calloc(CT_MAX_CONNS, sizeof(*e->conns));
	e->descs = calloc(e->max_descs, sizeof(*e->descs));
	e->bundle = malloc(e->mtu_max);
	if (!e->msgs || !e->tiles || !e->peers || !e->conns || !e->descs || !e->bundle)
		goto err_mem;
	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++) {
		e->act_head[q] = e->act_tail[q] = CT_NIL;
		e->resp_head[q] = e->resp_tail[q] = CT_NIL;
	}
	e->resp_free = CT_NIL;
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

void ct_engine_destroy(ct_engine_t *e)
{
	if (!e)
		return;
	atomic_store_explicit(&e->stop, 1, memory_order_release);
	for (uint32_t c = 0; c < e->attr.n_cts; c++) {
		tm_doorbell_ring(e->attr.tm, c);
		pthread_join(e->tiles[c].thread, NULL);
	}
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

int ct_engine_ct_busy(const ct_engine_t *e, uint32_t ct, uint64_t *busy_ns, uint64_t *alive_ns)
{
	if (ct >= e->attr.n_cts || !e->tiles)
		return GICE_ERR_INVALID;
	uint64_t t0 = atomic_load_explicit(&e->tiles[ct].t_start_ns, memory_order_relaxed);
	*busy_ns = atomic_load_explicit(&e->tiles[ct].busy_ns, memory_order_relaxed);
	*alive_ns = t0 ? gice_now_ns() - t0 : 0;
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
