/* api_watchdog.c: the watchdog thread of the process (engine checks, heartbeats, the fault
 * schedule's kills and gice_faults_set's signals to other ranks, when due) and the error
 * callback. Fault injection itself: api_faults.c. */
#include "api/api_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- error state */

/* Keep info as *dst unless one is kept already (the first error explains the rest). */
static void error_keep(gice_error_info_t *dst, char *text, size_t len, const gice_error_info_t *info)
{
	if (dst->status != GICE_OK)
		return;
	*dst = *info;
	snprintf(text, len, "%s", info->message ? info->message : "");
	dst->message = text;
	if (!dst->ts_ns)
		dst->ts_ns = gice_now_ns();
}

static void error_record(gice_device_t *d, const gice_error_info_t *info)
{
	pthread_mutex_lock(&api_g.err_lock);
	if (d)
		error_keep(&d->err, d->err_text, sizeof(d->err_text), info);
	error_keep(&api_g.job_err, api_g.job_err_text, sizeof(api_g.job_err_text), info);
	pthread_mutex_unlock(&api_g.err_lock);
}

void api_device_abort(gice_device_t *d, int status, const gice_error_info_t *info, int wake_later)
{
	/* the record first: a waiter that sees the abort finds the reason; the line is out before
	 * a waiter wakes (it may exit the process at once) */
	error_record(d, info);
	if (tm_region_set_status(d->tm, status) != GICE_OK)
		return; /* aborted already */
	gice_error("api", "device %u aborted (%s): every wait on it ends, nothing new starts; cause: %s", d->gid,
		   gice_status_name(status), info && info->message ? info->message : "");
	if (!wake_later)
		tm_region_abort(d->tm, status);
	smt_abort(d->smt);
}

const char *api_error_text(gice_device_t *d)
{
	const char *t;

	pthread_mutex_lock(&api_g.err_lock);
	t = d->err.status ? d->err_text : "";
	pthread_mutex_unlock(&api_g.err_lock);
	return t; /* set once, never rewritten while d is open */
}

static int error_get(const gice_error_info_t *src, gice_error_info_t *info)
{
	if (!info)
		return GICE_ERR_INVALID;
	pthread_mutex_lock(&api_g.err_lock);
	*info = *src;
	if (!info->message)
		info->message = "";
	pthread_mutex_unlock(&api_g.err_lock);
	return GICE_OK;
}

int gice_device_error(gice_device_t *d, gice_error_info_t *info) { return d ? error_get(&d->err, info) : GICE_ERR_INVALID; }
int gice_job_error(gice_error_info_t *info) { return error_get(&api_g.job_err, info); }

int gice_device_abort(gice_device_t *d)
{
	gice_error_info_t info = {.status = GICE_ERR_ABORTED, .reason = "aborted by the application",
				  .peer = UINT32_MAX, .peer_rank = UINT32_MAX, .ct = UINT32_MAX, .trigger = UINT32_MAX,
				  .counter = UINT32_MAX};
	char text[96];

	if (!d)
		return GICE_ERR_INVALID;
	info.device = d->gid;
	snprintf(text, sizeof(text), "device %u aborted by gice_device_abort", d->gid);
	info.message = text;
	api_device_abort(d, GICE_ERR_ABORTED, &info, 0);
	return GICE_OK;
}

/* ---------------------------------------------------------------- watchdog */

struct wd_events {
	ct_event_t ev[16];
	uint32_t n;
};

static void wd_collect(const ct_event_t *ev, void *arg)
{
	struct wd_events *w = arg;

	if (w->n < GICE_ARRAY_SIZE(w->ev))
		w->ev[w->n++] = *ev;
}

static gice_error_info_t event_info(const ct_event_t *e)
{
	gice_error_info_t info = {.status = e->status, .reason = e->reason, .device = e->device_gid,
				  .peer = e->peer_gid, .ct = e->ct, .n_ops = e->n_ops, .waited_ns = e->waited_ns,
				  .psn_acked = e->psn_acked, .psn_next = e->psn_next, .retransmits = e->retransmits,
				  .op = e->op_name, .bytes = e->bytes, .msg_id = e->msg_id, .trigger = e->trigger,
				  .threshold = e->threshold, .counter = e->counter, .counter_value = e->counter_value,
				  .fallback = e->fallback, .message = e->text, .ts_ns = gice_now_ns()};

	info.peer_rank = e->peer_gid == UINT32_MAX ? UINT32_MAX : e->peer_gid % gice_world_size();
	return info;
}

static int peer_lost(const ct_event_t *e)
{
	return e->status == GICE_ERR_PEER_DEAD || e->status == GICE_ERR_PEER_HUNG;
}

void api_peer_lost(void *arg, const ct_event_t *e)
{
	gice_device_t *seen_by = arg;
	gice_error_info_t info = event_info(e);

	/* on the watchdog thread, inside ct_engine_watch, api_g.lock held: before the engine
	 * fails anything, so every waiter that wakes finds the error and the abort in place. The
	 * engine wakes seen_by's remaining waiters once its operations have failed (theirs wake
	 * with their own failure recorded). */
	error_record(seen_by, &info);
	if (api_g.tolerate_dead)
		return;
	/* a lost peer ends every wait of the job here, as an NCCL communicator abort */
	for (uint64_t i = 0; api_g.devs && i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live)
			api_device_abort(api_g.devs[i], e->status, &info, api_g.devs[i] == seen_by);
}

static void wd_report(const ct_event_t *e)
{
	gice_error_info_t info = event_info(e);
	gice_error_cb_t cb;
	void *arg;

	pthread_mutex_lock(&api_g.lock);
	cb = api_g.err_cb;
	arg = api_g.err_arg;
	for (uint64_t i = 0; !peer_lost(e) && api_g.devs && i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->gid == e->device_gid)
			error_record(api_g.devs[i], &info);
	pthread_mutex_unlock(&api_g.lock);
	if (cb)
		cb(&info, arg);
	if (api_g.on_timeout == CT_ON_TIMEOUT_ABORT) {
		fprintf(stderr, "gice: rank %u: GICE_ON_TIMEOUT=abort: %s\n", api_g.rank, e->text);
		signal(SIGABRT, SIG_DFL); /* libfabric's psm providers trap SIGABRT and exit(1) */
		abort();
	}
}

/* gice_faults_set's kill or hang of another rank of this machine, when due. */
static void fault_signals(uint64_t now)
{
	for (size_t i = 0; i < GICE_ARRAY_SIZE(api_g.fault_sig); i++) {
		struct api_fault_signal *fs = &api_g.fault_sig[i];
		uint64_t at = atomic_load(&fs->at_ns);

		if (!at || now < at)
			continue;
		atomic_store(&fs->at_ns, 0);
		fprintf(stderr, "gice: rank %u: fault injection %s_rank=%u: %s process %d\n", api_g.rank,
			fs->sig == SIGKILL ? "kill" : "hang", fs->rank, fs->sig == SIGKILL ? "killing" : "stopping", fs->pid);
		if (kill(fs->pid, fs->sig))
			gice_error("fault", "%s_rank=%u: kill(%d, %s): %m", fs->sig == SIGKILL ? "kill" : "hang", fs->rank,
				   fs->pid, fs->sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
	}
}

/* One thread per process: every period, each device's engine checks its CTs and peers (and
 * sends heartbeats); the fault schedule kills this rank when told to. */
static uint64_t watch_period_ns(void) { return GICE_MAX(GICE_MIN(api_g.timeout_ns / 10, 100000000ull), 1000000ull); }

void *api_watchdog_main(void *arg)
{
	uint64_t period = watch_period_ns();
	struct wd_events w;

	(void)arg;
	pthread_setname_np(pthread_self(), "gice-watchdog");
	while (!atomic_load(&api_g.watchdog_stop)) {
		gice_futex_wait(&api_g.watchdog_stop, 0, period);
		if (atomic_load(&api_g.watchdog_stop))
			break;
		uint64_t now = gice_now_ns();
		uint64_t kill_at = atomic_load(&api_g.kill_at_ns);
		if (kill_at && now >= kill_at) {
			fprintf(stderr, "gice: rank %u: fault injection kill_rank=%u: killing this process %llu ms after "
				"gice_init\n", api_g.rank, api_g.rank, (unsigned long long)((now - api_g.t0_ns) / 1000000));
			raise(SIGKILL);
		}
		uint64_t hang_at = atomic_load(&api_g.hang_at_ns);
		if (hang_at && now >= hang_at) { /* asked by a rank of another machine */
			atomic_store(&api_g.hang_at_ns, 0);
			fprintf(stderr, "gice: rank %u: fault injection hang_rank=%u: every device of this process stops\n",
				api_g.rank, api_g.rank);
			api_faults_hang_all(now);
		}
		fault_signals(now);
		w.n = 0;
		pthread_mutex_lock(&api_g.lock);
		for (uint64_t i = 0; api_g.devs && i < api_g.max_devices; i++)
			if (api_g.devs[i] && api_g.devs[i]->live)
				ct_engine_watch(api_g.devs[i]->ct, api_g.on_timeout, wd_collect, &w);
		atomic_store_explicit(&api_g.watch_at_ns, gice_now_ns(), memory_order_relaxed);
		pthread_mutex_unlock(&api_g.lock);
		for (uint32_t i = 0; i < w.n; i++)
			wd_report(&w.ev[i]);
	}
	return NULL;
}

/* A wait that went its whole budget without progress takes the watchdog's look at its device
 * itself, now, before it ends with a bare timeout: its budget is longer than the watchdog's
 * verdict on a silent peer takes, but on a loaded machine the watchdog thread may not have run
 * since. Returns the events found (a lost peer, a stalled CT: what the wait waited on may have
 * failed with them). Not on any fast path: the caller has waited GICE_TIMEOUT_MS already. */
int api_watch_now(gice_device_t *d)
{
	struct wd_events w = {.n = 0};

	pthread_mutex_lock(&api_g.lock); /* as the watchdog: api_peer_lost runs under it */
	if (d->live)
		ct_engine_watch(d->ct, api_g.on_timeout, wd_collect, &w);
	/* as a look of the watchdog's: timed-out polls of a late watchdog take one per two periods */
	atomic_store_explicit(&api_g.watch_at_ns, gice_now_ns(), memory_order_relaxed);
	pthread_mutex_unlock(&api_g.lock);
	for (uint32_t i = 0; i < w.n; i++)
		wd_report(&w.ev[i]);
	return (int)w.n;
}

int api_watch_if_late(gice_device_t *d)
{
	uint64_t at = atomic_load_explicit(&api_g.watch_at_ns, memory_order_relaxed), now = gice_now_ns();

	return at && now > at && now - at > 2 * watch_period_ns() ? api_watch_now(d) : 0;
}

int gice_set_error_callback(gice_error_cb_t cb, void *arg)
{
	pthread_mutex_lock(&api_g.lock);
	api_g.err_cb = cb;
	api_g.err_arg = arg;
	pthread_mutex_unlock(&api_g.lock);
	return GICE_OK;
}
