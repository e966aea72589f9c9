/* api_device.c: devices (open, wiring to the peers of this process and of the job; the close:
 * api_device_close.c), their memory, the NVLink plane (peer pointers and trigger writes) and
 * connections. */
#include "api/api_internal.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu/common/tsan.h"
#include "emu/ct_engine/ct_proto.h"
#include "fabric/fab_fault.h"

/* ---------------------------------------------------------------- devices */

static int param_u32(const gice_param_t *table, const char *name, uint32_t given, uint32_t *out)
{
	uint64_t v;
	int rc;

	if (given) {
		*out = given;
		return GICE_OK;
	}
	if ((rc = gice_param_u64(gice_param_find(table, name), &v)))
		return rc;
	*out = (uint32_t)v;
	return GICE_OK;
}

/* Restrict the calling thread to the index-th CPU it may use (round robin); *saved gets the old
 * mask. Returns 1 if the mask changed. One CPU allowed: nothing to do. */
/* A stream thread (device side: the GPU's front end) runs the CTs after writing a trigger. */
static int engine_step(void *ct, uint32_t ring) { return ct_engine_step_ring(ct, ring); }

static int bind_to_device_cpu(uint32_t index, cpu_set_t *saved)
{
	cpu_set_t one;
	int n, k = 0;

	if (pthread_getaffinity_np(pthread_self(), sizeof(*saved), saved) || (n = CPU_COUNT(saved)) < 2)
		return 0;
	int want = (int)((index + gice_rank()) % (uint32_t)n);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, saved) && k++ == want) {
			CPU_SET(c, &one);
			break;
		}
	return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
}

/* A same-host device of another rank: attach its trigger memory (to see it close: its state
 * reads GICE_ERR_CANCELED; on the NVLink plane kernels here write its triggers and signals) and,
 * on the NVLink plane, map its device memory, both through its process's memfds. */
static struct peer_map map_peer(const struct dev_blob *b)
{
	struct peer_map m = {0};
	char path[64];

	if (strcmp(b->host, api_g.host))
		return m;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", b->pid, b->tm_fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || tm_region_attach(fd, &m.tm))
		gice_warn("api", "cannot attach device %u's trigger memory (%s)", b->gid, path);
	if (fd >= 0)
		close(fd); /* attach keeps its own descriptor */
	/* The plane needs both ends: each decides alone how a rendezvous moves its bytes (a copy
	 * from the peer's mapped memory or a read over the provider), and a device that does not
	 * map us could not read our memory the way a mapped one would. So a rank with
	 * GICE_PLANE=net keeps every same-host peer on the network, on their side too. */
	if (!api_g.nvlink || !b->plane || b->hbm_fd < 0)
		return m;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", b->pid, b->hbm_fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		gice_warn("api", "NVLink plane: cannot open device %u's memory (%s): %m; using the network", b->gid,
			  path);
		return m;
	}
	void *p = mmap(NULL, b->hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		gice_warn("api", "NVLink plane: cannot map %llu bytes of device %u's memory: %m; using the network",
			  (unsigned long long)b->hbm_size, b->gid);
		return m;
	}
	m.base = p;
	m.size = b->hbm_size;
	return m;
}

void api_plane_set(uint32_t gid, tm_region_t *tm)
{
	if (gid < api_g.max_gids)
		/* release: the mapping is complete before a kernel can load the pointer */
		atomic_store_explicit(&api_g.peer_tm[gid], api_g.nvlink ? tm : NULL, memory_order_release);
}

static int add_peer(ct_engine_t *ct, const struct dev_blob *b, const struct peer_map *m)
{
	ct_peer_info_t pi = {.addr = b->addr, .addr_len = b->addr_len, .mr = b->has_mr ? &b->mr : NULL,
			     .hbm = m->base, .hbm_size = m->size, .tm = m->tm,
			     .pid = strcmp(b->pidns, api_g.pidns) ? 0 : (int32_t)b->pid};
	return ct_peer_add(ct, b->gid, &pi);
}

/* Collective round of a device open in a multi-rank job: tell every rank about the new device
 * and learn theirs; the new device meets every remote device known so far, this process's other
 * devices meet this round's remote ones. */
static int wire_remote(gice_device_t *d)
{
	struct dev_blob mine = {.gid = d->gid, .addr_len = (uint32_t)d->addr_len, .has_mr = (uint32_t)d->has_mr,
				.mr = d->mr, .pid = (uint32_t)getpid(), .hbm_fd = hbm_fd(d->hbm), .hbm_size = d->size,
				.tm_fd = tm_region_fd(d->tm), .auth = (uint32_t)ct_engine_auth(d->ct),
				.plane = (uint32_t)api_g.nvlink};
	struct dev_blob *all, *grown;
	struct peer_map *grown_map;
	int rc;

	memcpy(mine.addr, d->addr, d->addr_len);
	snprintf(mine.provider, sizeof(mine.provider), "%s", d->ep->provider);
	snprintf(mine.host, sizeof(mine.host), "%s", api_g.host);
	snprintf(mine.pidns, sizeof(mine.pidns), "%s", api_g.pidns);
	all = calloc(api_g.size, sizeof(*all));
	if (!all)
		return GICE_ERR_NO_MEMORY;
	if ((rc = boot_allgather(api_g.boot, &mine, sizeof(mine), all))) {
		gice_error("api", "device %u: exchanging addresses with the other %u ranks failed", d->gid, api_g.size - 1);
		goto out;
	}
	/* Providers do not speak each other's protocol (net and tcp;ofi_rxm both run over TCP):
	 * ranks that opened different ones would only stall. Every rank fails the open alike. */
	for (uint32_t r = 0; r < api_g.size; r++)
		if (strncmp(all[r].provider, mine.provider, sizeof(mine.provider))) {
			gice_error("api", "device %u: provider %s here but %.*s on rank %u (device %u): every rank of a "
					  "job must use the same one (set GICE_FI_PROVIDER alike everywhere)",
				   d->gid, mine.provider, (int)sizeof(all[r].provider), all[r].provider, r, all[r].gid);
			rc = GICE_ERR_CONFIG;
		}
	/* A loopback address handed to a rank on another host: nothing sent there would arrive,
	 * and the job would stall for GICE_TIMEOUT_MS. Every rank sees every blob, so every rank
	 * fails the open alike, at once. */
	for (uint32_t r = 0; r < api_g.size && rc != GICE_ERR_CONFIG; r++) {
		const size_t hl = sizeof(all[r].host);
		char addr[64], src[128];
		uint32_t o = 0;
		if (!fab_addr_loopback(d->ep->provider, all[r].addr, GICE_MIN(all[r].addr_len, FAB_ADDR_MAX), addr,
				       sizeof(addr)))
			continue;
		while (o < api_g.size && !strncmp(all[o].host, all[r].host, hl))
			o++;
		if (o == api_g.size)
			continue;
		fab_iface_source(d->ep->provider, src, sizeof(src));
		gice_error("api", "device %u: rank %u advertises the loopback address %s (%s) to rank %u on another "
				  "host (%.*s), which cannot reach it; the interface comes from %s%s: give the socket "
				  "providers an interface the other hosts reach, or start the job with gicerun --netns",
			   d->gid, r, addr, d->ep->provider, o, (int)hl, all[o].host, src,
			   r == api_g.rank ? " here" : " (read on this rank)");
		rc = GICE_ERR_FABRIC;
	}
	/* A device that signs drops every unsigned packet and the other way round: the job would
	 * only stall. Every rank sees every blob and fails the open alike. */
	for (uint32_t r = 0; r < api_g.size && !rc; r++)
		if (all[r].auth != mine.auth) {
			gice_error("api", "device %u: GICE_CT_AUTH=%u here but %u on rank %u (device %u): every rank of a "
					  "job must use the same setting", d->gid, mine.auth, all[r].auth, r, all[r].gid);
			rc = GICE_ERR_CONFIG;
		}
	if (rc)
		goto out;
	pthread_mutex_lock(&api_g.lock);
	grown = realloc(api_g.remote, (api_g.n_remote + api_g.size) * sizeof(*grown));
	if (grown)
		api_g.remote = grown;
	grown_map = realloc(api_g.remote_map, (api_g.n_remote + api_g.size) * sizeof(*grown_map));
	if (grown_map)
		api_g.remote_map = grown_map;
	if (!grown || !grown_map) {
		pthread_mutex_unlock(&api_g.lock);
		rc = GICE_ERR_NO_MEMORY;
		goto out;
	}
	uint32_t first_new = api_g.n_remote;
	for (uint32_t r = 0; r < api_g.size; r++)
		if (r != api_g.rank) {
			api_g.remote[api_g.n_remote] = all[r];
			api_g.remote_map[api_g.n_remote] = map_peer(&all[r]);
			api_plane_set(all[r].gid, all[r].plane ? api_g.remote_map[api_g.n_remote].tm : NULL);
			api_g.n_remote++;
		}
	for (uint32_t i = 0; i < api_g.n_remote && !rc; i++) {
		rc = add_peer(d->ct, &api_g.remote[i], &api_g.remote_map[i]);
		for (uint64_t j = 0; j < api_g.max_devices && !rc && i >= first_new; j++)
			if (api_g.devs[j] && api_g.devs[j] != d && api_g.devs[j]->live)
				rc = add_peer(api_g.devs[j]->ct, &api_g.remote[i], &api_g.remote_map[i]);
	}
	pthread_mutex_unlock(&api_g.lock);
out:
	free(all);
	return rc;
}

int gice_device_open(const gice_device_attr_t *attr, gice_device_t **out)
{
	gice_device_attr_t a = {0};
	gice_device_t *d;
	tm_layout_t lay;
	uint64_t v;
	char name[32];
	int rc;

	if (attr)
		a = *attr;
	if (!api_g.refs) {
		gice_error("api", "gice_device_open before gice_init");
		return GICE_ERR_INVALID;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return GICE_ERR_NO_MEMORY;
	if ((api_g.stats || api_g.trace_path[0]) && !(d->evs = calloc(API_EVS, sizeof(*d->evs)))) {
		rc = GICE_ERR_NO_MEMORY;
		goto err_free;
	}
	if ((rc = param_u32(ct_params, "GICE_CTS", a.n_cts, &d->n_cts)) ||
	    (rc = param_u32(smt_params, "GICE_SMS", a.n_sms, &a.n_sms)) ||
	    (rc = param_u32(tm_params, "GICE_COUNTERS", 0, &lay.n_counters)) ||
	    (rc = param_u32(tm_params, "GICE_CT_QUEUE_DEPTH", 0, &lay.queue_depth)))
		goto err_free;
	if (!a.hbm_bytes) {
		if ((rc = gice_param_u64(gice_param_find(hbm_params, "GICE_HBM_BYTES"), &v)))
			goto err_free;
		a.hbm_bytes = v;
	}
	if (api_g.host_mode)
		d->n_cts = 1; /* one host proxy thread replaces the CTs */
	lay.n_cts = d->n_cts;

	pthread_mutex_lock(&api_g.lock);
	for (d->index = 0; d->index < api_g.max_devices && api_g.devs[d->index]; d->index++)
		;
	if (d->index == api_g.max_devices) {
		pthread_mutex_unlock(&api_g.lock);
		gice_error("api", "all %llu devices (GICE_MAX_DEVICES) are open", (unsigned long long)api_g.max_devices);
		rc = GICE_ERR_OVERFLOW;
		goto err_free;
	}
	d->gid = api_g.opened++ * api_g.size + api_g.rank; /* collective round k on rank r */
	api_g.devs[d->index] = d; /* reserve the slot; peers are wired below */
	pthread_mutex_unlock(&api_g.lock);

	snprintf(name, sizeof(name), "gice-hbm-%u", d->gid);
	if ((rc = hbm_create(a.hbm_bytes, name, &d->hbm)))
		goto err_slot;
	d->base = hbm_base(d->hbm);
	d->size = hbm_size(d->hbm);
	if ((rc = api_pool_setup(d)))
		goto err_hbm;
	snprintf(name, sizeof(name), "gice-tm-%u", d->gid);
	if ((rc = tm_region_create(&lay, name, &d->tm)))
		goto err_hbm;
	uint64_t max_packet;
	if ((rc = ct_fabric_packet_bytes(&max_packet)))
		goto err_tm;
	fab_attr_t fa = {.provider = a.provider, .max_packet = max_packet, .cross_host = api_g.spans_hosts};
	fab_ep_t *raw;
	if ((rc = fab_open(&fa, &raw)))
		goto err_tm;
	/* every endpoint goes through the fault injector (a pass-through without GICE_FAULTS) */
	fab_fault_attr_t ffa = {.nranks = api_g.size, .max_gids = (uint32_t)api_g.max_gids,
				.classify = ct_fault_classify, .start_later = 1};
	if ((rc = fab_fault_wrap(raw, &api_g.faults, d->gid, &ffa, &d->ep))) {
		fab_close(raw);
		goto err_tm;
	}
	d->addr_len = sizeof(d->addr);
	if ((rc = fab_getname(d->ep, d->addr, &d->addr_len)))
		goto err_ep;
	ct_engine_attr_t ca = {.gid = d->gid, .index = d->index, .n_cts = d->n_cts, .hbm = d->hbm, .tm = d->tm,
			       .ep = d->ep, .timeout_ns = api_g.timeout_ns, .faults = &api_g.faults,
			       .t0_ns = API_FAULTS_LATER, /* the schedule starts at the end of the open */
			       .host_proxy = api_g.host_mode, .fail_signals = !api_g.tolerate_dead,
			       .on_peer_lost = api_peer_lost, .on_peer_lost_arg = d,
			       .on_fault = api_fault_request, .on_fault_arg = d,
			       .machine_devices = api_g.machine_ranks * gice_devices_per_rank()};
	ct_proto_job_key(boot_secret(api_g.boot), ca.job_key);
	d->host_mode = api_g.host_mode;
	/* threads inherit their creator's CPU mask: create the device's threads on its CPU */
	cpu_set_t saved;
	int bound = (api_g.bind == 1 || (api_g.bind == 2 && api_g.size > 1)) && bind_to_device_cpu(d->index, &saved);
	rc = ct_engine_create(&ca, &d->ct);
	if (!rc && (rc = smt_create(a.n_sms, d->index, d->tm, &d->smt)))
		ct_engine_destroy(d->ct);
	if (bound)
		pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (rc)
		goto err_ep;
	if (api_kernel_steps(d))
		smt_set_engine_step(d->smt, engine_step, d->ct);
	d->has_mr = ct_engine_mr(d->ct, &d->mr) == GICE_OK;

	/* wire peers both ways, including the device itself (loopback through its endpoint) */
	pthread_mutex_lock(&api_g.lock);
	d->live = 1;
	api_plane_set(d->gid, d->tm);
	for (uint64_t i = 0; i < api_g.max_devices && !rc; i++) {
		gice_device_t *p = api_g.devs[i];
		if (!p || !p->live)
			continue;
		/* devices of one process share its address space: the NVLink plane is free */
		ct_peer_info_t to_p = {.addr = p->addr, .addr_len = p->addr_len, .mr = p->has_mr ? &p->mr : NULL,
				       .hbm = api_g.nvlink ? p->base : NULL, .hbm_size = p->size, .tm = p->tm,
				       .pid = getpid()};
		ct_peer_info_t to_d = {.addr = d->addr, .addr_len = d->addr_len, .mr = d->has_mr ? &d->mr : NULL,
				       .hbm = api_g.nvlink ? d->base : NULL, .hbm_size = d->size, .tm = d->tm,
				       .pid = getpid()};
		rc = ct_peer_add(d->ct, p->gid, &to_p);
		if (!rc && p != d)
			rc = ct_peer_add(p->ct, d->gid, &to_d);
	}
	pthread_mutex_unlock(&api_g.lock);
	if (!rc && api_g.size > 1)
		rc = wire_remote(d);
	if (rc)
		goto err_smt;
	gice_info("api", "device %u open: %u SMs, %u CTs, %llu bytes HBM, provider %s", d->gid, a.n_sms, d->n_cts,
		  (unsigned long long)d->size, d->ep->provider);
	api_faults_start(d); /* fault times count from now: set-up is never hit */
	*out = d;
	return GICE_OK;

err_smt:
	pthread_mutex_lock(&api_g.lock);
	d->live = 0; /* out of the watchdog's sight */
	api_plane_set(d->gid, NULL);
	pthread_mutex_unlock(&api_g.lock);
	smt_destroy(d->smt);
	d->smt = NULL;
	ct_engine_destroy(d->ct);
err_ep:
	fab_close(d->ep);
err_tm:
	tm_region_destroy(d->tm);
err_hbm:
	hbm_destroy(d->hbm);
err_slot:
	pthread_mutex_lock(&api_g.lock);
	api_g.devs[d->index] = NULL;
	pthread_mutex_unlock(&api_g.lock);
err_free:
	free(d->evs);
	free(d);
	return rc;
}

uint32_t gice_device_id(const gice_device_t *d) { return d->gid; }
const char *gice_device_provider(const gice_device_t *d) { return d->ep->provider; }

int gice_mem_alloc(gice_device_t *d, size_t size, void **ptr)
{
	return gice_pool_alloc(d, GICE_POOL_COMPUTE, size, ptr); /* api_pool.c */
}

int gice_mem_free(gice_device_t *d, void *ptr)
{
	uint64_t off;

	if (api_dev_off(d, ptr, &off)) {
		gice_error("api", "gice_mem_free(%p): not in device %u memory", ptr, d->gid);
		return GICE_ERR_INVALID;
	}
	return hbm_free(d->hbm, off);
}

int gice_mem_register(gice_device_t *d, void *ptr, size_t len, uint64_t *key)
{
	uint64_t off;

	if (api_dev_off(d, ptr, &off)) {
		gice_error("api", "gice_mem_register(%p, %zu): not in device %u memory", ptr, len, d->gid);
		return GICE_ERR_INVALID;
	}
	uint64_t k;
	int rc = hbm_register(d->hbm, off, len, &k);
	if (rc)
		return rc;
	/* its own provider registration for peers' rendezvous reads: nothing else of the device's
	 * memory is readable over the provider */
	if ((rc = ct_engine_expose(d->ct, k, off, len))) {
		hbm_deregister(d->hbm, k);
		return rc;
	}
	*key = k;
	return GICE_OK;
}

int gice_mem_deregister(gice_device_t *d, uint64_t key)
{
	int rc = hbm_deregister(d->hbm, key);

	/* revoked after the key stops translating: from now on no peer reads it either */
	if (!rc)
		ct_engine_revoke(d->ct, key);
	return rc;
}

int gice_mem_offset(gice_device_t *d, const void *ptr, uint64_t *offset)
{
	uint64_t off;

	if (api_dev_off(d, ptr, &off))
		return GICE_ERR_INVALID;
	*offset = off;
	return GICE_OK;
}

int gice_peer_trigger_add(gice_kctx_t *k, uint32_t peer_id, gice_trigger_t t, uint64_t value)
{
	/* no lock on the device path: acquire pairs with api_plane_set's release */
	tm_region_t *tm = peer_id < api_g.max_gids ? atomic_load_explicit(&api_g.peer_tm[peer_id], memory_order_acquire)
						  : NULL;

	(void)k;
	if (!tm) {
		gice_error("api", "gice_peer_trigger_add: device %u is not on this device's NVLink plane", peer_id);
		return GICE_ERR_UNSUPPORTED;
	}
	if (t < tm_region_layout(tm)->n_cts || t >= tm_region_layout(tm)->n_counters) {
		gice_error("api", "gice_peer_trigger_add: %u is not a counter of device %u", t, peer_id);
		return GICE_ERR_INVALID;
	}
	GICE_TSAN_OUT(); /* what the kernel stored into the peer leaves the process (tsan.h) */
	tm_counter_add(tm, t, value);
	return GICE_OK;
}

void *gice_peer_ptr(gice_device_t *d, uint32_t peer_id, uint64_t offset, size_t len)
{
	uint8_t *base = NULL;
	uint64_t size = 0;

	pthread_mutex_lock(&api_g.lock);
	for (uint64_t i = 0; i < api_g.max_devices && !base; i++)
		if (api_g.devs[i] && api_g.devs[i]->gid == peer_id && api_g.nvlink) {
			base = api_g.devs[i]->base;
			size = api_g.devs[i]->size;
		}
	for (uint32_t i = 0; i < api_g.n_remote && !base; i++)
		if (api_g.remote[i].gid == peer_id) {
			base = api_g.remote_map[i].base;
			size = api_g.remote_map[i].size;
		}
	pthread_mutex_unlock(&api_g.lock);
	(void)d;
	if (!base || offset > size || len > size - offset)
		return NULL;
	return base + offset;
}

/* ---------------------------------------------------------------- connections, counters */

int gice_conn_open(gice_device_t *d, uint32_t peer_id, const gice_conn_attr_t *attr, gice_conn_t *conn)
{
	ct_conn_attr_t ca = {.peer_gid = peer_id, .qos = attr ? attr->qos : 0, .mtu = attr ? attr->mtu : 0};

	return ct_conn_open(d->ct, &ca, conn);
}

int gice_conn_close(gice_device_t *d, gice_conn_t conn) { return ct_conn_close(d->ct, conn); }

