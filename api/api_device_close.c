/* api_device_close.c: a device's close: it leaves the job's sight, its counters join the
 * rank's totals, its threads stop and its endpoint and memory are released, at once or with the
 * last device of the process (graves); or, when its link is held by a call that does not
 * return, it is abandoned: left with what it may touch to the process's exit (api_left.c). */
#include "api/api_internal.h"
#include "api/api_sym.h"

#include <stdlib.h>

/* What still waits on d ends (GICE_ERR_CANCELED), and same-host peers that map its trigger
 * memory see that it closed, rather than died; then d leaves the job's sight (the watchdog's
 * first), and the other devices of this process stop sending to it. */
static void device_unlist(gice_device_t *d)
{
	tm_region_abort(d->tm, GICE_ERR_CANCELED);
	pthread_mutex_lock(&api_g.lock);
	api_g.devs[d->index] = NULL;
	d->live = 0;
	api_plane_set(d->gid, NULL);
	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live)
			ct_peer_closed(api_g.devs[i]->ct, d->gid);
	pthread_mutex_unlock(&api_g.lock);
}

/* A closing device's counters join the rank's totals that GICE_STATS prints at gice_finalize;
 * observe: its stage records and traces too (they read its link: not while a call holds it). */
static void device_stats_keep(gice_device_t *d, int observe)
{
	gice_stats_t st;

	if (gice_device_stats(d, &st) != GICE_OK)
		return;
	pthread_mutex_lock(&api_g.lock);
	api_stats_add(&api_g.closed_stats, &st);
	if (observe && (api_g.stats || api_g.trace_path[0]))
		api_obs_collect(d);
	pthread_mutex_unlock(&api_g.lock);
}

/* The close of a device whose link is held by a call that does not return (a kernel's SM
 * thread or CT 0 stepping the link inside libfabric's shm, spinning on a lock a dead process
 * held): nothing can stop that thread, and destroying the device would wait for it forever (the
 * streams for its kernel, the engine for the link). The device leaves the job as a closed one
 * does; its other threads are stopped; the stuck thread, and everything it may still touch
 * (threads, endpoint, memory), are left to the process's exit. */
static int device_abandon(gice_device_t *d, uint64_t held_ns)
{
	uint64_t wait_ns = GICE_MIN(api_g.timeout_ns / 4, 250000000ull); /* for each module's threads */

	api_left_abandoned(); /* before its peers can go: what it may touch stays */
	device_unlist(d);
	/* no endpoint from now on is closed (api_device_bury): their names go now, not their
	 * regions */
	fab_shm_unlink_left(d->ep);
	pthread_mutex_lock(&api_g.lock);
	for (uint32_t i = 0; i < api_g.n_graves; i++)
		fab_shm_unlink_left(api_g.graves[i].ep);
	pthread_mutex_unlock(&api_g.lock);
	device_stats_keep(d, 0); /* its counters: atomics, read without the link */
	uint32_t left = smt_abandon(d->smt, gice_now_ns() + wait_ns);
	left += ct_engine_abandon(d->ct, gice_now_ns() + wait_ns);
	gice_error("api", "device %u: closed with its link held for %llu ms by a call that does not return (a "
		   "thread stuck in the fabric provider, which nothing can stop; %u of its threads still run): its "
		   "threads, endpoint and memory are left to the process's exit: %s",
		   d->gid, (unsigned long long)(held_ns / 1000000), left, gice_status_name(GICE_ERR_CT_STALLED));
	return GICE_ERR_CT_STALLED;
}

int gice_device_close(gice_device_t *d)
{
	uint64_t held_ns;

	if (!d)
		return GICE_ERR_INVALID;
	api_sym_device_closed(d);
	if (ct_engine_link_stuck(d->ct, &held_ns))
		return device_abandon(d, held_ns);
	smt_destroy(d->smt);
	device_unlist(d);
	device_stats_keep(d, 1);
	api_storage_quiesce(d); /* file operations end before the CTs stop */
	if (api_g.stats)
		api_print_peer_stats(d);
	ct_engine_destroy(d->ct);
	api_storage_destroy(d);
	d->smt = NULL;
	if (!api_left_keep(d->tm)) /* an abandoned device's link may still kick it */
		tm_region_destroy(d->tm);
	api_device_bury(d->ep, d->hbm);
	free(d->evs);
	free(d);
	return GICE_OK;
}

static void grave_release(struct api_grave *g)
{
	fab_close(g->ep);
	hbm_destroy(g->hbm);
}

void api_device_bury(fab_ep_t *ep, hbm_t *hbm)
{
	struct api_grave now = {ep, hbm}, *old = NULL;
	uint32_t n = 0;
	int others = 0;

	if (api_left_keep(ep)) { /* graves already kept stay in api_g.graves */
		api_left_keep(hbm);
		fab_shm_unlink_left(ep); /* never closed: its name goes (device_abandon) */
		return;
	}
	pthread_mutex_lock(&api_g.lock);
	/* only a provider that may touch a closed peer (shm) needs it; others close at once, as
	 * before (kept, tcp;ofi_rxm leaked its connections' state) */
	for (uint64_t i = 0; ep && ep->closed_peer_unsafe && api_g.devs && i < api_g.max_devices; i++)
		others |= api_g.devs[i] != NULL;
	if (others && !api_g.graves)
		api_g.graves = calloc(api_g.max_devices, sizeof(*api_g.graves));
	if (others && api_g.graves && api_g.n_graves < api_g.max_devices) {
		api_g.graves[api_g.n_graves++] = now; /* released with the last device */
		now.ep = NULL;
	} else {
		old = api_g.graves;
		n = api_g.n_graves;
		api_g.graves = NULL;
		api_g.n_graves = 0;
	}
	pthread_mutex_unlock(&api_g.lock);
	/* in the order the devices closed */
	for (uint32_t i = 0; i < n; i++)
		grave_release(&old[i]);
	free(old);
	if (now.ep)
		grave_release(&now);
}
