/* api_wait.c: a kernel's waits over sets of counters (all, any, some, as NVSHMEM's
 * wait_until_*) and its direct counter reads, tests and resets. */
#include "api/api_sym.h"

#include <string.h>

/* ---------------------------------------------------------------- single counters */

uint64_t gice_signal_fetch(gice_kctx_t *k, gice_counter_t c)
{
	return api_ctr_ok(k->dev, c) ? tm_counter_read(k->dev->tm, c) : 0;
}

int gice_signal_test(gice_kctx_t *k, gice_counter_t c, gice_cmp_t cmp, uint64_t v)
{
	tm_counter_state_t s;

	if (!api_ctr_ok(k->dev, c) || (unsigned)cmp > GICE_CMP_LE)
		return GICE_ERR_INVALID;
	tm_counter_get(k->dev->tm, c, &s);
	if (s.fail)
		return s.status;
	return tm_cmp_ok(s.value, (tm_cmp_t)cmp, v);
}

int gice_signal_reset(gice_kctx_t *k, gice_counter_t c)
{
	if (!api_ctr_ok(k->dev, c))
		return GICE_ERR_INVALID;
	tm_counter_reset(k->dev->tm, c);
	return GICE_OK;
}

/* ---------------------------------------------------------------- sets */

#define SLICE_US 200 /* any/some: how long one counter is slept on before the others are looked at */

static uint64_t target(const uint64_t *values, uint64_t value, size_t i) { return values ? values[i] : value; }

/* Counter i's state now: 1 satisfied, 0 not, < 0 its failure. sum accumulates values (progress). */
static int look(gice_kctx_t *k, gice_counter_t c, gice_cmp_t cmp, uint64_t v, uint64_t *sum)
{
	tm_counter_state_t s;

	tm_counter_get(k->dev->tm, c, &s);
	*sum += s.value + s.fail;
	return s.fail ? s.status : tm_cmp_ok(s.value, (tm_cmp_t)cmp, v);
}

static int check_set(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, gice_cmp_t cmp, const char *who)
{
	if ((n && !ctrs) || (unsigned)cmp > GICE_CMP_LE) {
		gice_error("api", "%s: %s", who, !ctrs ? "no counters" : "bad comparison");
		return GICE_ERR_INVALID;
	}
	for (size_t i = 0; i < n; i++)
		if (!api_ctr_ok(k->dev, ctrs[i]))
			return GICE_ERR_INVALID;
	return GICE_OK;
}

/* any (want_all 0, indices NULL), some (indices): until one included counter holds. */
static int wait_some(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
		     const uint64_t *values, uint64_t value, uint64_t timeout_us, size_t *indices, size_t *count,
		     size_t *idx, const char *who)
{
	uint64_t budget = timeout_us ? timeout_us * 1000ull : api_g.idle_ns, last_sum = 0;
	uint64_t since = gice_now_ns();
	size_t turn = 0, n_in = 0;
	int rc = check_set(k, ctrs, n, cmp, who), watched = 0;

	if (idx)
		*idx = SIZE_MAX;
	if (count)
		*count = 0;
	for (size_t i = 0; i < n; i++)
		n_in += !status || !status[i];
	if (!rc && !n_in)
		return GICE_ERR_NOT_FOUND; /* nothing to wait for: not a failure of the kernel */
	for (int first = 1; !rc; first = 0) {
		size_t found = 0;
		uint64_t sum = 0;
		for (size_t i = 0; i < n && !rc; i++) {
			if (status && status[i])
				continue;
			int s = look(k, ctrs[i], cmp, target(values, value, i), &sum);
			if (s < 0) {
				rc = s;
				if (idx)
					*idx = i;
			} else if (s) {
				if (!found && idx)
					*idx = i;
				if (indices)
					indices[found] = i;
				found++;
			}
		}
		if (rc || found) {
			if (count)
				*count = found;
			break;
		}
		uint64_t now = gice_now_ns();
		if (first || sum != last_sum) { /* progress: an explicit timeout bounds the duration only */
			last_sum = sum;
			if (!timeout_us)
				since = now;
		}
		if (now - since > budget && !timeout_us && !watched) {
			watched = 1; /* a stall: the watchdog's verdict first (api_watch_now), once */
			if (api_watch_now(k->dev)) {
				since = now;
				continue;
			}
		}
		if (now - since > budget) {
			gice_log(timeout_us ? GICE_LOG_DEBUG : GICE_LOG_ERROR, "api",
				 "%s on device %u: none of %zu counters reached its value: %s %llu ms", who, k->dev->gid,
				 n_in, timeout_us ? "waited" : "no progress for", (unsigned long long)(budget / 1000000));
			rc = GICE_ERR_TIMED_OUT;
			break;
		}
		/* sleep on the next included counter for a slice (it steps the CTs meanwhile) */
		while (status && status[turn % n])
			turn++;
		size_t i = turn++ % n;
		rc = gice_wait_until(k, ctrs[i], cmp, target(values, value, i), SLICE_US, NULL);
		if (rc == GICE_ERR_TIMED_OUT || rc == GICE_OK)
			rc = GICE_OK; /* look again at all of them */
		else if (idx)
			*idx = i; /* that counter failed (gice_wait_until failed the kernel) */
	}
	if (rc && !(rc == GICE_ERR_TIMED_OUT && timeout_us))
		api_kernel_failed(k, rc, "%s over %zu counters", who, n);
	return rc;
}

static int wait_all(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
		    const uint64_t *values, uint64_t value, uint64_t timeout_us, const char *who)
{
	uint64_t t0 = gice_now_ns();
	int rc = check_set(k, ctrs, n, cmp, who);

	/* all must hold: waiting on each in turn is waiting for all (each keeps its own stall
	 * clock; an explicit timeout bounds the whole) */
	for (size_t i = 0; i < n && !rc; i++) {
		if (status && status[i])
			continue;
		uint64_t left = 0;
		if (timeout_us) {
			uint64_t spent = (gice_now_ns() - t0) / 1000;
			left = spent >= timeout_us ? 1 : timeout_us - spent;
		}
		rc = gice_wait_until(k, ctrs[i], cmp, target(values, value, i), left, NULL);
	}
	if (rc == GICE_ERR_INVALID)
		api_kernel_failed(k, rc, "%s over %zu counters", who, n);
	return rc;
}

int gice_wait_until_all(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			uint64_t value, uint64_t timeout_us)
{
	return wait_all(k, ctrs, n, status, cmp, NULL, value, timeout_us, "gice_wait_until_all");
}

int gice_wait_until_all_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
			       gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us)
{
	if (n && !values)
		return GICE_ERR_INVALID;
	return wait_all(k, ctrs, n, status, cmp, values, 0, timeout_us, "gice_wait_until_all_vector");
}

int gice_wait_until_any(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			uint64_t value, uint64_t timeout_us, size_t *idx)
{
	return wait_some(k, ctrs, n, status, cmp, NULL, value, timeout_us, NULL, NULL, idx, "gice_wait_until_any");
}

int gice_wait_until_any_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
			       gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us, size_t *idx)
{
	if (n && !values)
		return GICE_ERR_INVALID;
	return wait_some(k, ctrs, n, status, cmp, values, 0, timeout_us, NULL, NULL, idx,
			 "gice_wait_until_any_vector");
}

int gice_wait_until_some(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			 uint64_t value, uint64_t timeout_us, size_t *indices, size_t *count)
{
	return wait_some(k, ctrs, n, status, cmp, NULL, value, timeout_us, indices, count, NULL,
			 "gice_wait_until_some");
}

int gice_wait_until_some_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
				gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us, size_t *indices,
				size_t *count)
{
	if (n && !values)
		return GICE_ERR_INVALID;
	return wait_some(k, ctrs, n, status, cmp, values, 0, timeout_us, indices, count, NULL,
			 "gice_wait_until_some_vector");
}
