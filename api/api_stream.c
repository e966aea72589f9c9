/* api_stream.c: streams, kernel launches (a kernel's blocks on the device's SM threads) and
 * stream waits and writes; GICE_MODE=host defers a kernel's operations to its end. */
#include "api/api_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- streams */

typedef struct {
	gice_kernel_t fn;
	gice_device_t *dev;
	gice_stream_t *stream;
	/* the kernel's first failure (gice_kernel_fail, a failed device wait): reported by its
	 * stream's next sync; read by launch_done, after every block ended */
	_Atomic int status;
	uint32_t fail_block, nblocks;
	char fail_what[200];
	/* GICE_MODE=host: the operations its blocks issued, handed to the host proxy at its end */
	pthread_mutex_t mu;
	ct_req_t *ops;
	uint32_t n_ops, cap_ops;
	size_t size;
	uint8_t args[];
} launch_t;

static void run_block(void *arg, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	launch_t *l = arg;
	gice_kctx_t k = {.block = block, .nblocks = nblocks, .sm = sm, .dev = l->dev, .launch = l};

	l->fn(&k, l->size ? l->args : NULL);
}

/* Host mode: hand the kernel's operations so far to the host proxy (CT 0's queue, in issue
 * order). Called at the kernel's end, and before a wait inside it (a wait ends the batch, as a
 * CPU-driven stack splits kernels at communication). */
static int launch_flush(launch_t *l)
{
	int rc = GICE_OK;

	pthread_mutex_lock(&l->mu);
	for (uint32_t i = 0; i < l->n_ops; i++)
		if (!rc) /* it fails the completion itself */
			rc = api_push_req(l->dev, &l->ops[i], "host proxy");
		else /* not issued after a failure: its waiter learns why */
			api_op_fail_now(l->dev, l->ops[i].counter, rc);
	l->n_ops = 0;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

void api_kernel_failed(gice_kctx_t *k, int status, const char *fmt, ...)
{
	launch_t *l = k->launch;
	int ok = GICE_OK;
	va_list ap;

	if (!l || status == GICE_OK)
		return;
	if (!atomic_compare_exchange_strong_explicit(&l->status, &ok, status, memory_order_relaxed,
						     memory_order_relaxed))
		return; /* the first failure is the one reported */
	l->fail_block = k->block;
	va_start(ap, fmt);
	vsnprintf(l->fail_what, sizeof(l->fail_what), fmt, ap);
	va_end(ap);
}

void gice_kernel_fail(gice_kctx_t *k, int status, const char *what)
{
	api_kernel_failed(k, status < 0 ? status : GICE_ERR_INVALID, "gice_kernel_fail(%s)", what ? what : "");
}

/* On the stream thread after the kernel's last block (or in its place when the stream skips
 * it): a failure becomes the stream's error, which gice_stream_sync returns. */
static void launch_done(void *arg)
{
	launch_t *l = arg;
	int status = atomic_load_explicit(&l->status, memory_order_relaxed);

	if (l->dev->host_mode) {
		int rc = launch_flush(l);
		if (rc && !status) {
			status = rc;
			snprintf(l->fail_what, sizeof(l->fail_what), "handing its operations to the host proxy");
		}
		free(l->ops);
	}
	if (status) {
		gice_error("api", "device %u stream %u: kernel failed in block %u of %u: %s: %s", l->dev->gid,
			   smt_stream_id(l->stream->s), l->fail_block, l->nblocks, l->fail_what,
			   gice_status_name(status));
		smt_stream_fail(l->stream->s, status);
	}
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* Host mode: record a kernel's operation for the host proxy. t_issue stays the kernel's call. */
static int launch_defer(launch_t *l, ct_req_t *r)
{
	pthread_mutex_lock(&l->mu);
	if (l->n_ops == l->cap_ops) { /* a kernel issuing many: grow rarely (doubling) */
		uint32_t cap = l->cap_ops ? 2 * l->cap_ops : 64;
		ct_req_t *ops = realloc(l->ops, cap * sizeof(*ops));
		if (!ops) {
			pthread_mutex_unlock(&l->mu);
			return GICE_ERR_NO_MEMORY;
		}
		l->ops = ops;
		l->cap_ops = cap;
	}
	r->t_issue = gice_now_ns();
	l->ops[l->n_ops++] = *r;
	pthread_mutex_unlock(&l->mu);
	return GICE_OK;
}

int api_launch_defer(gice_kctx_t *k, ct_req_t *r) { return launch_defer(k->launch, r); }

int api_launch_flush(gice_kctx_t *k)
{
	return k->dev->host_mode && k->launch ? launch_flush(k->launch) : GICE_OK;
}

int gice_stream_create(gice_device_t *d, gice_stream_t **out)
{
	gice_stream_t *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return GICE_ERR_NO_MEMORY;
	s->dev = d;
	if ((rc = smt_stream_create(d->smt, &s->s))) {
		free(s);
		return rc;
	}
	*out = s;
	return GICE_OK;
}

int gice_stream_destroy(gice_stream_t *s)
{
	int rc = smt_stream_destroy(s->s, api_g.timeout_ns);

	if (rc == GICE_OK)
		free(s);
	return rc;
}

int gice_launch(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args, size_t args_size)
{
	launch_t *l;
	int rc;

	if (!kernel || !nblocks)
		return GICE_ERR_INVALID;
	l = malloc(sizeof(*l) + args_size);
	if (!l)
		return GICE_ERR_NO_MEMORY;
	l->fn = kernel;
	l->dev = s->dev;
	l->stream = s;
	atomic_init(&l->status, GICE_OK);
	l->fail_block = 0;
	l->nblocks = nblocks;
	l->ops = NULL;
	l->n_ops = l->cap_ops = 0;
	if (s->dev->host_mode) { /* room for the kernel's operations, at launch rather than per op */
		l->ops = malloc(64 * sizeof(*l->ops));
		if (!l->ops) {
			free(l);
			return GICE_ERR_NO_MEMORY;
		}
		l->cap_ops = 64;
	}
	pthread_mutex_init(&l->mu, NULL);
	l->size = args_size;
	if (args_size)
		memcpy(l->args, args, args_size);
	if ((rc = smt_launch(s->s, run_block, l, nblocks, launch_done))) {
		pthread_mutex_destroy(&l->mu);
		free(l->ops);
		free(l);
	}
	return rc;
}

int gice_stream_wait_value(gice_stream_t *s, gice_counter_t c, gice_cmp_t cmp, uint64_t value, uint64_t timeout_ms)
{
	if (!api_ctr_ok(s->dev, c) || (unsigned)cmp > GICE_CMP_LE)
		return GICE_ERR_INVALID;
	return timeout_ms ? smt_wait_value(s->s, c, (tm_cmp_t)cmp, value, timeout_ms * 1000000ull)
			  : smt_wait_value_idle(s->s, c, (tm_cmp_t)cmp, value, api_g.idle_ns);
}

int gice_stream_write_value(gice_stream_t *s, gice_counter_t c, uint64_t value, int add)
{
	if (!api_ctr_ok(s->dev, c))
		return GICE_ERR_INVALID;
	return smt_write_value(s->s, c, value, add);
}

/* Default timeouts (0) measure stalls, explicit ones durations. */
int gice_stream_sync(gice_stream_t *s, uint64_t timeout_ms)
{
	return timeout_ms ? smt_stream_sync(s->s, timeout_ms * 1000000ull) : smt_stream_sync_idle(s->s, api_g.idle_ns);
}

