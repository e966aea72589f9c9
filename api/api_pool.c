/* api_pool.c: device memory pools — the compute pool (gice_mem_alloc) and the communication
 * pool of GICE_COMM_POOL_BYTES at the top of each device's memory, each with its own quota — and
 * their usage (gice_pool_usage, the pool_* counters of gice_device_stats). */
#include "api/api_internal.h"

const gice_param_t api_pool_params[] = {
	{"GICE_COMM_POOL_BYTES", "0",
	 "device memory reserved per device for communication buffers (gice_pool_alloc of the communication pool), "
	 "rounded up to 64 KiB; gice_mem_alloc (the compute pool) gets the rest; 0: one pool for both",
	 GICE_PARAM_SIZE, 0, 64ull << 30},
	{NULL, NULL, NULL, 0, 0, 0},
};

int api_pool_setup(gice_device_t *d)
{
	uint64_t q;
	int rc = gice_param_u64(&api_pool_params[0], &q);

	if (rc)
		return rc;
	q = GICE_ALIGN_UP(q, HBM_PAGE_SIZE);
	if (q >= d->size) {
		gice_error("config", "GICE_COMM_POOL_BYTES=%llu leaves no compute pool in %llu bytes of device memory",
			   (unsigned long long)q, (unsigned long long)d->size);
		return GICE_ERR_CONFIG;
	}
	d->comm_off = q ? d->size - q : d->size;
	return GICE_OK;
}

/* Bounds of pool p on d: GICE_ERR_INVALID for an unknown pool. */
static int pool_range(const gice_device_t *d, gice_pool_t p, uint64_t *lo, uint64_t *hi, const char **name)
{
	int split = d->comm_off < d->size;

	if (p == GICE_POOL_COMPUTE) {
		*lo = 0;
		*hi = d->comm_off;
		*name = split ? "compute" : NULL; /* one pool: the message of a full arena */
	} else if (p == GICE_POOL_COMM) {
		*lo = split ? d->comm_off : 0;
		*hi = d->size;
		*name = split ? "communication" : NULL;
	} else {
		gice_error("api", "device %u: unknown pool %d (0: compute, 1: communication)", d->gid, (int)p);
		return GICE_ERR_INVALID;
	}
	return GICE_OK;
}

int gice_pool_alloc(gice_device_t *d, gice_pool_t pool, size_t size, void **ptr)
{
	uint64_t lo, hi, off;
	const char *name;
	int rc;

	if (!d || !ptr)
		return GICE_ERR_INVALID;
	if ((rc = pool_range(d, pool, &lo, &hi, &name)))
		return rc;
	if ((rc = hbm_alloc_in(d->hbm, lo, hi, name, size, 0, &off)))
		return rc;
	*ptr = d->base + off;
	return GICE_OK;
}

int gice_pool_usage(gice_device_t *d, gice_pool_t pool, gice_pool_usage_t *u)
{
	uint64_t lo, hi;
	const char *name;
	hbm_usage_t h;
	int rc;

	if (!d || !u)
		return GICE_ERR_INVALID;
	if ((rc = pool_range(d, pool, &lo, &hi, &name)))
		return rc;
	hbm_usage(d->hbm, lo, hi, &h);
	*u = (gice_pool_usage_t){.bytes = hi - lo, .used = hi - lo - h.free, .free = h.free,
				 .largest_free = h.largest_free, .free_blocks = h.free_blocks};
	return GICE_OK;
}

void api_pool_stats(gice_device_t *d, api_pool_stats_t *st)
{
	gice_pool_usage_t c = {0}, m = {0};

	gice_pool_usage(d, GICE_POOL_COMPUTE, &c);
	if (d->comm_off < d->size) /* one pool: the communication counters stay 0 */
		gice_pool_usage(d, GICE_POOL_COMM, &m);
	*st = (api_pool_stats_t){.pool_comm_used = m.used, .pool_comm_free = m.free,
				 .pool_comm_largest = m.largest_free, .pool_comp_used = c.used,
				 .pool_comp_free = c.free, .pool_comp_largest = c.largest_free};
}
