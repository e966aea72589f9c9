/* boot_pmix.c: the bootstrap under a launcher's PMIx server (mpirun, srun --mpi=pmix): rank
 * and size from PMIx, exchanges as a put, a fence and a get per rank, each non-blocking call
 * waited for with our own deadline. Built only with GICE_HAVE_PMIX (Debian libpmix-dev). */
#include "fabric/boot_internal.h"

#ifdef GICE_HAVE_PMIX
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/common/common.h"

/* Under mpirun or srun --mpi=pmix: PMIX_RANK is set and the launcher runs a PMIx server. */
static int pmix_init(boot_t *b)
{
	pmix_status_t rc = PMIx_Init(&b->me, NULL, 0);
	pmix_proc_t wild;
	pmix_value_t *val = NULL;

	if (rc != PMIX_SUCCESS) {
		gice_error("boot", "PMIX_RANK=%s is set but PMIx_Init failed: %s; %s", getenv("PMIX_RANK"),
			   PMIx_Error_string(rc), BOOT_HOW_TO_LAUNCH);
		return GICE_ERR_CONFIG;
	}
	b->pmix = 1;
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, b->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val) {
		gice_error("boot", "PMIx_Get(PMIX_JOB_SIZE) failed: %s", PMIx_Error_string(rc));
		return GICE_ERR_IO;
	}
	b->rank = b->me.rank;
	b->size = val->data.uint32;
	PMIX_VALUE_RELEASE(val);
	return GICE_OK;
}

/* One non-blocking PMIx call waited for with our own deadline, so that a server which ignores
 * PMIX_TIMEOUT cannot hang us. Shared by the waiter and PMIx's callback: whoever drops the last
 * reference frees it (a waiter that gave up leaves it to a late callback). */
struct pmix_call {
	_Atomic int refs;
	_Atomic int done;
	pmix_status_t status;
};

static pmix_call_t *pmix_call_new(void)
{
	pmix_call_t *c = calloc(1, sizeof(*c));

	if (c)
		atomic_init(&c->refs, 2); /* the waiter's and the callback's */
	return c;
}

static void pmix_call_put(pmix_call_t *c)
{
	if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		free(c);
}

/* The waiter is done with c: a call whose callback is still due is kept until PMIx_Finalize
 * (boot_fini), after which no callback comes, so that nothing is left allocated at exit. */
static void pmix_call_drop(boot_t *b, pmix_call_t *c)
{
	if (!atomic_load_explicit(&c->done, memory_order_acquire) && b->n_abandoned < PMIX_ABANDONED_MAX)
		b->abandoned[b->n_abandoned++] = c;
	else
		pmix_call_put(c);
}

static void pmix_call_done(pmix_call_t *c, pmix_status_t status)
{
	c->status = status;
	/* release: the waiter that sees done also sees status */
	atomic_store_explicit(&c->done, 1, memory_order_release);
	pmix_call_put(c);
}

static void pmix_fence_cb(pmix_status_t status, void *cbdata) { pmix_call_done(cbdata, status); }

static void pmix_get_cb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	(void)kv; /* PMIx releases it after we return; a probe needs only the status */
	pmix_call_done(cbdata, status);
}

/* Wait for every call of c[0..n) (NULL entries skipped) to be done, or until deadline; short
 * sleeps: set-up path only. The caller reads done/status, then drops its references. */
static void pmix_calls_wait(pmix_call_t **c, uint32_t n, uint64_t deadline)
{
	for (uint32_t i = 0; i < n; i++) {
		while (c[i] && !atomic_load_explicit(&c[i]->done, memory_order_acquire) && gice_now_ns() < deadline) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

/* PMIX_TIMEOUT is whole seconds: round up, at least 1. */
static int pmix_timeout_s(uint64_t ns) { return (int)GICE_MAX((ns + 999999999ull) / 1000000000ull, 1ull); }

#define PMIX_PROBE_S 1    /* PMIX_TIMEOUT of a probe for a rank's key (whole seconds) */
#define PMIX_PROBE_MS 500 /* how long we wait for the probes: a key that is there comes in ms */

/* After a failed exchange: which ranks did not put key? Ask for every rank's key at once, each
 * with a short timeout, and list the ranks whose key did not come into missing (as "1,3").
 * Returns how many there are (0: every key is there, or PMIx cannot tell). */
static uint32_t pmix_missing(boot_t *b, const char *key, char *missing, size_t len)
{
	pmix_call_t **c = calloc(b->size, sizeof(*c));
	pmix_info_t info;
	int tmo = PMIX_PROBE_S;
	uint32_t n = 0;
	size_t off = 0;

	missing[0] = '\0';
	if (!c)
		return 0;
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
	for (uint32_t r = 0; r < b->size; r++) {
		pmix_proc_t p;
		if (r == b->rank || !(c[r] = pmix_call_new()))
			continue;
		PMIX_LOAD_PROCID(&p, b->me.nspace, r);
		pmix_status_t rc = PMIx_Get_nb(&p, key, &info, 1, pmix_get_cb, c[r]);
		if (rc != PMIX_SUCCESS) { /* no callback will come */
			pmix_call_done(c[r], rc);
		}
	}
	PMIX_INFO_DESTRUCT(&info);
	pmix_calls_wait(c, b->size, gice_now_ns() + PMIX_PROBE_MS * 1000000ull);
	for (uint32_t r = 0; r < b->size; r++) {
		if (!c[r])
			continue;
		if (!atomic_load_explicit(&c[r]->done, memory_order_acquire) || c[r]->status != PMIX_SUCCESS) {
			n++;
			if (off + 16 < len)
				off += (size_t)snprintf(missing + off, len - off, "%s%u", off ? "," : "", r);
			else if (off + 4 < len && !strstr(missing, ",..."))
				off += (size_t)snprintf(missing + off, len - off, ",...");
		}
		pmix_call_drop(b, c[r]);
	}
	free(c);
	return n;
}

/* Put+commit our part under key, then a fence collecting everyone's, bounded by the bootstrap
 * timeout. On failure, name the ranks whose part is missing. */
static int pmix_exchange(boot_t *b, const char *key, const void *mine, size_t len)
{
	uint64_t start = gice_now_ns(), waited_ms;
	pmix_call_t *c = NULL;
	pmix_value_t v;
	pmix_info_t info[2];
	bool collect = true;
	int tmo = pmix_timeout_s(b->timeout_ns);
	pmix_status_t st;
	char missing[256];

	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)mine;
	v.data.bo.size = len;
	st = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	if (st != PMIX_SUCCESS) {
		gice_error("boot", "rank %u: PMIx_Put/Commit of %s failed: %s", b->rank, key, PMIx_Error_string(st));
		return GICE_ERR_IO;
	}
	if (!(c = pmix_call_new()))
		return GICE_ERR_NO_MEMORY;
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
	st = PMIx_Fence_nb(NULL, 0, info, 2, pmix_fence_cb, c);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	if (st != PMIX_SUCCESS)
		pmix_call_done(c, st); /* no callback will come */
	/* a little past our own deadline: a server honouring PMIX_TIMEOUT answers first */
	pmix_calls_wait(&c, 1, start + b->timeout_ns + 100000000ull);
	st = atomic_load_explicit(&c->done, memory_order_acquire) ? c->status : PMIX_ERR_TIMEOUT;
	pmix_call_drop(b, c);
	if (st == PMIX_SUCCESS)
		return GICE_OK;

	waited_ms = (gice_now_ns() - start) / 1000000;
	if (st == PMIX_ERR_LOST_CONNECTION || st == PMIX_ERR_UNREACH) {
		gice_error("boot", "rank %u: lost the PMIx server during exchange %s: %s", b->rank, key,
			   PMIx_Error_string(st));
		return GICE_ERR_IO;
	}
	uint32_t n = pmix_missing(b, key, missing, sizeof(missing));
	if (st == PMIX_ERR_TIMEOUT) {
		if (n)
			gice_error("boot", "rank %u: rank(s) %s of %u never arrived at PMIx exchange %s after %llu ms "
					   "(GICE_BOOTSTRAP_TIMEOUT_MS=%llu)",
				   b->rank, missing, b->size, key, (unsigned long long)waited_ms,
				   (unsigned long long)(b->timeout_ns / 1000000));
		else
			gice_error("boot", "rank %u: PMIx exchange %s timed out after %llu ms (GICE_BOOTSTRAP_TIMEOUT_MS=%llu); "
					   "every rank's part is there, the PMIx server did not complete the fence",
				   b->rank, key, (unsigned long long)waited_ms, (unsigned long long)(b->timeout_ns / 1000000));
		return GICE_ERR_TIMED_OUT;
	}
	/* PMIX_ERR_PARTIAL_SUCCESS, PMIX_ERR_PROC_TERM_WO_SYNC and the like: a rank is gone */
	if (n)
		gice_error("boot", "rank %u: rank(s) %s of %u died during PMIx exchange %s (%s, after %llu ms)", b->rank,
			   missing, b->size, key, PMIx_Error_string(st), (unsigned long long)waited_ms);
	else
		gice_error("boot", "rank %u: PMIx exchange %s failed after %llu ms: %s (PMIx does not say which rank)",
			   b->rank, key, (unsigned long long)waited_ms, PMIx_Error_string(st));
	return GICE_ERR_PEER_DEAD;
}

int boot_pmix_allgather(boot_t *b, const void *mine, size_t len, void *all)
{
	char key[PMIX_MAX_KEYLEN];
	pmix_info_t info;
	int tmo = pmix_timeout_s(b->timeout_ns), rc;

	snprintf(key, sizeof(key), "gice.ag.%u", b->round++);
	if ((rc = pmix_exchange(b, key, mine, len)))
		return rc;
	/* the fence collected every part: these gets are local; the timeout is a safety net */
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
	for (uint32_t r = 0; r < b->size && !rc; r++) {
		pmix_value_t *val = NULL;
		pmix_proc_t p;
		PMIX_LOAD_PROCID(&p, b->me.nspace, r);
		pmix_status_t st = PMIx_Get(&p, key, &info, 1, &val);
		if (st != PMIX_SUCCESS || !val || val->type != PMIX_BYTE_OBJECT || val->data.bo.size != len) {
			gice_error("boot", "rank %u: PMIx_Get of %s from rank %u failed: %s", b->rank, key, r,
				   st != PMIX_SUCCESS ? PMIx_Error_string(st) : "not a byte object of the right size");
			rc = st == PMIX_ERR_TIMEOUT ? GICE_ERR_TIMED_OUT : GICE_ERR_IO;
		} else {
			memcpy((uint8_t *)all + (size_t)r * len, val->data.bo.bytes, len);
		}
		if (val)
			PMIX_VALUE_RELEASE(val);
	}
	PMIX_INFO_DESTRUCT(&info);
	return rc;
}

int boot_pmix_open(uint64_t timeout_ns, boot_t **out)
{
	boot_t *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return GICE_ERR_NO_MEMORY;
	b->timeout_ns = timeout_ns;
	if ((rc = pmix_init(b)) || !(b->fds = malloc(sizeof(int) * b->size))) {
		boot_fini(b);
		return rc ? rc : GICE_ERR_NO_MEMORY;
	}
	for (uint32_t r = 0; r < b->size; r++)
		b->fds[r] = -1;
	/* the job secret is rank 0's random number */
	uint64_t mine = gice_random_u64(), *all = malloc(sizeof(uint64_t) * b->size);
	if (!all || (rc = boot_pmix_allgather(b, &mine, sizeof(mine), all))) {
		free(all);
		boot_fini(b);
		return rc ? rc : GICE_ERR_NO_MEMORY;
	}
	b->secret = all[0];
	free(all);
	boot_clock_pmix(b);
	gice_info("boot", "rank %u of %u (PMIx namespace %s)", b->rank, b->size, b->me.nspace);
	*out = b;
	return GICE_OK;
}

void boot_pmix_fini(boot_t *b)
{
	if (b->pmix)
		PMIx_Finalize(NULL, 0);
	/* no callback comes any more: a done call holds our reference only, the others both */
	for (uint32_t i = 0; i < b->n_abandoned; i++)
		if (atomic_load_explicit(&b->abandoned[i]->done, memory_order_acquire))
			pmix_call_put(b->abandoned[i]);
		else
			free(b->abandoned[i]);
}
#endif
