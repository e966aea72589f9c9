/* api_watchdog.c: the watchdog thread of the process (engine checks, heartbeats, the fault
 * schedule's kill), the error callback, and fault injection at run time. */
#include "api/api_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/fab_fault.h"

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

/* Stalls, hang and kill of f for this rank, counting from now, on device d (hang: every
 * device of the process). */
static void faults_schedule(gice_device_t *d, const gice_faults_t *f, uint64_t now)
{
	for (uint32_t i = 0; i < f->n_stall; i++)
		if (f->stall[i].ranks == GICE_FAULTS_ANY ||
		    (api_g.rank <= GICE_FAULTS_MAX_RANK && ((f->stall[i].ranks >> api_g.rank) & 1)))
			ct_engine_fault_stall(d->ct, f->stall[i].ct, now + f->stall[i].at_ns, f->stall[i].dur_ns);
	if (f->hang_rank == (int32_t)api_g.rank)
		ct_engine_fault_hang(d->ct, now + f->hang_at_ns);
	if (f->kill_rank == (int32_t)api_g.rank) {
		uint64_t at = now + GICE_MAX(f->kill_at_ns, 1ull), none = 0;
		atomic_compare_exchange_strong(&api_g.kill_at_ns, &none, at); /* the first device's open */
	}
}

void api_faults_start(gice_device_t *d)
{
	uint64_t now = gice_now_ns();

	fab_fault_start(d->ep);
	faults_schedule(d, &api_g.faults, now);
}

/* The process of rank r, when it is on this machine (same pid namespace): 0 and *pid, else
 * GICE_ERR_UNSUPPORTED (logged). */
static int rank_pid(uint32_t r, const char *what, int32_t *pid)
{
	int rc = GICE_ERR_UNSUPPORTED;

	pthread_mutex_lock(&api_g.lock);
	for (uint32_t i = 0; i < api_g.n_remote; i++)
		if (api_g.remote[i].gid % api_g.size == r) {
			if (!strcmp(api_g.remote[i].pidns, api_g.pidns)) {
				*pid = (int32_t)api_g.remote[i].pid;
				rc = GICE_OK;
			}
			break;
		}
	pthread_mutex_unlock(&api_g.lock);
	if (rc)
		gice_error("fault", "gice_faults_set(\"%s\"): rank %u is not on this machine (or has no device open yet): "
				    "only ranks of this machine can be killed or hung at run time; put it in GICE_FAULTS "
				    "at start instead", what, r);
	return rc;
}

/* kill_rank / hang_rank of another rank: its process gets SIGKILL / SIGSTOP at at_ns. */
static int signal_rank(uint32_t r, int sig, uint64_t at_ns, const char *spec)
{
	int32_t pid;
	int rc;

	if ((rc = rank_pid(r, spec, &pid)))
		return rc;
	if (at_ns <= gice_now_ns()) { /* due now (@0): at once, not at the watchdog's next look */
		fprintf(stderr, "gice: rank %u: fault injection %s_rank=%u: %s process %d\n", api_g.rank,
			sig == SIGKILL ? "kill" : "hang", r, sig == SIGKILL ? "killing" : "stopping", pid);
		if (kill(pid, sig)) {
			gice_error("fault", "gice_faults_set(\"%s\"): kill(%d, %s): %m", spec, pid,
				   sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
			return GICE_ERR_UNSUPPORTED;
		}
		return GICE_OK;
	}
	for (size_t i = 0; i < GICE_ARRAY_SIZE(api_g.fault_sig); i++) {
		struct api_fault_signal *fs = &api_g.fault_sig[i];
		uint64_t none = 0;

		fs->pid = pid;
		fs->sig = sig;
		fs->rank = r;
		if (atomic_compare_exchange_strong(&fs->at_ns, &none, GICE_MAX(at_ns, 1ull)))
			return GICE_OK;
	}
	gice_error("fault", "gice_faults_set(\"%s\"): %zu kills or hangs of other ranks are pending already", spec,
		   GICE_ARRAY_SIZE(api_g.fault_sig));
	return GICE_ERR_OVERFLOW;
}

int gice_faults_set(gice_device_t *d, const char *spec)
{
	uint64_t now = gice_now_ns();
	gice_faults_t f;
	int rc;

	if (!d)
		return GICE_ERR_INVALID;
	if ((rc = gice_faults_parse(spec, &f)))
		return rc;
	for (uint32_t i = 0; i < f.n_stall; i++)
		if (f.stall[i].ct >= d->n_cts) {
			gice_error("fault", "gice_faults_set(\"%s\"): device %u has CTs 0..%u", spec, d->gid, d->n_cts - 1);
			return GICE_ERR_INVALID;
		}
	for (int k = 0; k < 2; k++) {
		int32_t r = k ? f.kill_rank : f.hang_rank;
		if (r >= 0 && (uint32_t)r >= api_g.size) {
			gice_error("fault", "gice_faults_set(\"%s\"): rank %d is not in the job (ranks 0..%u)", spec, r,
				   api_g.size - 1);
			return GICE_ERR_INVALID;
		}
	}
	/* another rank's kill or hang: refused (before anything is changed) unless it is here */
	int32_t pid;
	if ((f.kill_rank >= 0 && f.kill_rank != (int32_t)api_g.rank && (rc = rank_pid((uint32_t)f.kill_rank, spec, &pid))) ||
	    (f.hang_rank >= 0 && f.hang_rank != (int32_t)api_g.rank && (rc = rank_pid((uint32_t)f.hang_rank, spec, &pid))))
		return rc;
	/* network faults add to those in force; an empty spec clears them */
	if (!spec || !*spec)
		rc = fab_fault_set(d->ep, NULL);
	else if (f.n_rules)
		rc = fab_fault_add(d->ep, &f);
	if (rc)
		return rc;
	if (gice_faults_any_net(&f)) /* never requires checksums from the peers, which did not change */
		ct_engine_fault_on(d->ct, gice_faults_corrupts(&f));
	/* times count from now */
	faults_schedule(d, &f, now);
	if (f.hang_rank == (int32_t)api_g.rank) {
		pthread_mutex_lock(&api_g.lock);
		for (uint64_t i = 0; i < api_g.max_devices; i++)
			if (api_g.devs[i] && api_g.devs[i]->live && api_g.devs[i] != d)
				ct_engine_fault_hang(api_g.devs[i]->ct, now + f.hang_at_ns);
		pthread_mutex_unlock(&api_g.lock);
	}
	if (f.kill_rank == (int32_t)api_g.rank)
		atomic_store(&api_g.kill_at_ns, now + GICE_MAX(f.kill_at_ns, 1ull));
	if (f.kill_rank >= 0 && f.kill_rank != (int32_t)api_g.rank &&
	    (rc = signal_rank((uint32_t)f.kill_rank, SIGKILL, now + f.kill_at_ns, spec)))
		return rc;
	if (f.hang_rank >= 0 && f.hang_rank != (int32_t)api_g.rank &&
	    (rc = signal_rank((uint32_t)f.hang_rank, SIGSTOP, now + f.hang_at_ns, spec)))
		return rc;
	if (f.n_stall || f.hang_rank >= 0 || f.kill_rank >= 0 || gice_faults_any_net(&f)) {
		char text[512];
		gice_faults_format(&f, text, sizeof(text));
		gice_warn("fault", "device %u: injecting faults from now: %s", d->gid, text);
	}
	return GICE_OK;
}
