/* api_faults.c: fault injection as the API runs it (GICE_FAULTS, GICE_FAULT_SCRIPT,
 * gice_faults_set; the language is emu/common/faults.h, docs/faults.md): a device's schedule of
 * stalls, hang and kill from the end of its open, faults added at run time, kills and hangs of
 * other ranks, and the faults aimed at a collective operation (@collN), which the collectives
 * report here as they start. Network faults themselves act in fabric/fab_fault*.c. */
#include "api/api_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/fab_fault.h"

/* Stalls, hang and kill of f for this rank, counting from now, on device d (hang: every
 * device of the process). */
static void faults_schedule(gice_device_t *d, const gice_faults_t *f, uint64_t now)
{
	for (uint32_t i = 0; i < f->n_stall; i++)
		if (f->stall[i].ranks == GICE_FAULTS_ANY ||
		    (api_g.rank <= GICE_FAULTS_MAX_RANK && ((f->stall[i].ranks >> api_g.rank) & 1)))
			ct_engine_fault_stall(d->ct, f->stall[i].ct, now + f->stall[i].at_ns, f->stall[i].dur_ns);
	uint64_t colls = atomic_load(&d->colls); /* @collN: the N-th collective from now */
	if (f->hang_rank == (int32_t)api_g.rank && f->hang_coll)
		atomic_store(&d->hang_coll, colls + f->hang_coll);
	else if (f->hang_rank == (int32_t)api_g.rank)
		ct_engine_fault_hang(d->ct, now + f->hang_at_ns);
	if (f->kill_rank == (int32_t)api_g.rank && f->kill_coll) {
		atomic_store(&d->kill_coll, colls + f->kill_coll);
	} else if (f->kill_rank == (int32_t)api_g.rank) {
		uint64_t at = now + GICE_MAX(f->kill_at_ns, 1ull), none = 0;
		atomic_compare_exchange_strong(&api_g.kill_at_ns, &none, at); /* the first device's open */
	}
}

void api_faults_hang_all(uint64_t at)
{
	pthread_mutex_lock(&api_g.lock);
	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live)
			ct_engine_fault_hang(api_g.devs[i]->ct, at);
	pthread_mutex_unlock(&api_g.lock);
}

void api_faults_coll(gice_device_t *d)
{
	uint64_t n = atomic_fetch_add_explicit(&d->colls, 1, memory_order_relaxed) + 1;

	/* before the collective queues a request: its packets see the new count (fab_fault.h) */
	fab_fault_coll(d->ep, n);
	if (n == atomic_load_explicit(&d->kill_coll, memory_order_relaxed)) {
		fprintf(stderr, "gice: rank %u: fault injection kill_rank=%u@coll: killing this process at the start of "
				"collective %llu of device %u\n", api_g.rank, api_g.rank, (unsigned long long)n, d->gid);
		raise(SIGKILL);
	}
	if (n == atomic_load_explicit(&d->hang_coll, memory_order_relaxed)) {
		fprintf(stderr, "gice: rank %u: fault injection hang_rank=%u@coll: every device of this process stops at "
				"the start of collective %llu of device %u\n", api_g.rank, api_g.rank, (unsigned long long)n,
			d->gid);
		api_faults_hang_all(gice_now_ns());
	}
}

void api_faults_start(gice_device_t *d)
{
	uint64_t now = gice_now_ns();

	fab_fault_start(d->ep);
	faults_schedule(d, &api_g.faults, now);
}

/* Where rank r is: 1 on this host (the same host identity, as the NVLink plane's, and pid
 * namespace; *pid its process), 0 on another one, a machine or an emulated host in another
 * network namespace (*gid its first device), or GICE_ERR_UNSUPPORTED when no device of it is
 * known yet (logged). */
static int rank_locate(uint32_t r, const char *spec, int32_t *pid, uint32_t *gid)
{
	int rc = GICE_ERR_UNSUPPORTED;

	pthread_mutex_lock(&api_g.lock);
	for (uint32_t i = 0; i < api_g.n_remote; i++)
		if (api_g.remote[i].gid % api_g.size == r) {
			rc = !strcmp(api_g.remote[i].pidns, api_g.pidns) && !strcmp(api_g.remote[i].host, api_g.host);
			*pid = (int32_t)api_g.remote[i].pid;
			*gid = api_g.remote[i].gid;
			break;
		}
	pthread_mutex_unlock(&api_g.lock);
	if (rc < 0)
		gice_error("fault", "gice_faults_set(\"%s\"): rank %u has no device open yet: it cannot be killed or hung "
				    "at run time; put it in GICE_FAULTS at start instead", spec, r);
	return rc;
}

void api_fault_request(void *arg, uint32_t src_gid, int kill, uint64_t delay_ns)
{
	_Atomic uint64_t *when = kill ? &api_g.kill_at_ns : &api_g.hang_at_ns;
	uint64_t at = gice_now_ns() + GICE_MAX(delay_ns, 1ull), cur = atomic_load(when);

	(void)arg;
	(void)src_gid;
	while ((!cur || at < cur) && !atomic_compare_exchange_weak(when, &cur, at)) /* the earliest wins */
		;
	if (!delay_ns) /* the watchdog acts at once, not at its next look */
		gice_futex_wake(&api_g.watchdog_stop, 1);
}

/* kill_rank / hang_rank of rank r on another machine: a FAULT request from d to its device gid
 * (authenticated by the job's MAC), which its rank obeys delay_ns after it arrives. */
static int request_rank(gice_device_t *d, uint32_t r, uint32_t gid, int kill, uint64_t delay_ns, const char *spec)
{
	int rc = ct_engine_fault_request(d->ct, gid, kill, delay_ns);

	if (rc)
		gice_error("fault", "gice_faults_set(\"%s\"): rank %u is on another host, and the request to its device "
				    "%u failed: %s", spec, r, gid, gice_status_name(rc));
	else
		fprintf(stderr, "gice: rank %u: fault injection %s_rank=%u: asked rank %u (device %u, on another host) "
				"to %s itself in %llu ms\n", api_g.rank, kill ? "kill" : "hang", r, r, gid, kill ? "kill" : "hang",
			(unsigned long long)(delay_ns / 1000000));
	return rc;
}

/* kill_rank / hang_rank of another rank: its process gets SIGKILL / SIGSTOP at at_ns. */
static int signal_rank(uint32_t r, int32_t pid, int sig, uint64_t at_ns, const char *spec)
{
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
	/* another rank's kill or hang: refused (before anything is changed) unless it is here and
	 * at a time (a rank counts its own collectives) */
	for (int k = 0; k < 2; k++) {
		int32_t r = k ? f.kill_rank : f.hang_rank;
		if (r >= 0 && r != (int32_t)api_g.rank && (k ? f.kill_coll : f.hang_coll)) {
			gice_error("fault", "gice_faults_set(\"%s\"): %s_rank=%d@coll%llu: only this rank's own collectives "
					    "can be counted here; put it in GICE_FAULTS at start (every rank counts its own)",
				   spec, k ? "kill" : "hang", r, (unsigned long long)(k ? f.kill_coll : f.hang_coll));
			return GICE_ERR_UNSUPPORTED;
		}
	}
	/* where the other ranks are: here a signal reaches them, elsewhere a request asks them (which
	 * needs the job's MAC); a rank with no device known yet is refused */
	int here[2] = {0, 0};
	int32_t pid[2] = {0, 0};
	uint32_t gid[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		int32_t r = k ? f.kill_rank : f.hang_rank;
		if (r < 0 || r == (int32_t)api_g.rank)
			continue;
		if ((here[k] = rank_locate((uint32_t)r, spec, &pid[k], &gid[k])) < 0)
			return here[k];
		if (!here[k] && !ct_engine_auth(d->ct)) {
			gice_error("fault", "gice_faults_set(\"%s\"): rank %d is on another host: asking it needs "
					    "GICE_CT_AUTH=1 (without the job's MAC its receiver could not trust the request)",
				   spec, r);
			return GICE_ERR_UNSUPPORTED;
		}
	}
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
	if (f.hang_rank == (int32_t)api_g.rank && !f.hang_coll)
		api_faults_hang_all(now + f.hang_at_ns);
	if (f.kill_rank == (int32_t)api_g.rank && !f.kill_coll)
		atomic_store(&api_g.kill_at_ns, now + GICE_MAX(f.kill_at_ns, 1ull));
	for (int k = 1; k >= 0; k--) { /* the kill, then the hang */
		int32_t r = k ? f.kill_rank : f.hang_rank;
		uint64_t at = k ? f.kill_at_ns : f.hang_at_ns;
		if (r < 0 || r == (int32_t)api_g.rank)
			continue;
		rc = here[k] ? signal_rank((uint32_t)r, pid[k], k ? SIGKILL : SIGSTOP, now + at, spec)
			     : request_rank(d, (uint32_t)r, gid[k], k, at, spec);
		if (rc)
			return rc;
	}
	if (f.n_stall || f.hang_rank >= 0 || f.kill_rank >= 0 || gice_faults_any_net(&f)) {
		char text[512];
		gice_faults_format(&f, text, sizeof(text));
		gice_warn("fault", "device %u: injecting faults from now: %s", d->gid, text);
	}
	return GICE_OK;
}
