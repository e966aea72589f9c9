/* api_stream.c: streams, kernel launches (a kernel's blocks on the device's SM threads) and
 * stream waits and writes; GICE_MODE=host defers a kernel's operations to its end. */
#include "api/api_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- streams */

/* A launch record. A stream has one per position of its command queue, made at its creation
 * and reused (smt_launch_prep): a launch allocates nothing and initialises no lock. Arguments
 * up to LAUNCH_ARGS_INLINE bytes are copied into the record, larger ones into a buffer of the
 * record's own, grown when too small and kept. */
#define LAUNCH_ARGS_INLINE 128

struct launch {
	gice_kernel_t fn;
	gice_device_t *dev;
	gice_stream_t *stream;
	/* the kernel's first failure (gice_kernel_fail, a failed device wait): reported by its
	 * stream's next sync; read by launch_done, after every block ended */
	_Atomic int status;
	/* gice_grid_sync: arrivals of its blocks so far (a futex word: the last to arrive wakes) */
	_Atomic uint32_t grid_arrived;
	_Atomic uint64_t t_start; /* GICE_TRACE: when its first block started */
	uint32_t fail_block, nblocks;
	char fail_what[200];
	/* GICE_MODE=host: the operations its blocks issued, handed to the host proxy at its end
	 * (mu initialised at the record's first host-mode launch; ops kept, grown rarely) */
	pthread_mutex_t mu;
	int mu_ready;
	ct_req_t *ops;
	uint32_t n_ops, cap_ops;
	size_t size;
	void *args;              /* inline, or big */
	uint8_t *big;            /* arguments larger than inline */
	size_t big_cap;
	_Alignas(16) uint8_t inline_args[LAUNCH_ARGS_INLINE];
};
typedef struct launch launch_t;

static void run_block(void *arg, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	launch_t *l = arg;
	gice_kctx_t k = {.block = block, .nblocks = nblocks, .sm = sm, .dev = l->dev, .launch = l};

	if (l->stream->ks) { /* GICE_TRACE: the first block to start stamps the kernel */
		uint64_t none = 0;
		atomic_compare_exchange_strong_explicit(&l->t_start, &none, gice_now_ns(), memory_order_relaxed,
							memory_order_relaxed);
	}
	l->fn(&k, l->size ? l->args : NULL);
	if (api_kernel_steps(l->dev)) /* what its last wait left (ct_step.c) */
		ct_engine_block_end(l->dev->ct);
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
			rc = api_push_req(l->dev, &l->ops[i], 0, "host proxy");
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
		l->n_ops = 0; /* the list stays, for the record's next launch */
	}
	uint64_t t0 = atomic_load_explicit(&l->t_start, memory_order_relaxed);
	if (l->stream->ks && t0) { /* GICE_TRACE: the stream thread is the ring's one writer */
		l->stream->ks[l->stream->ks_n++ % API_KSLICES] = (api_kslice_t){
			.t_start = t0, .t_end = gice_now_ns(), .fn = (uintptr_t)l->fn, .nblocks = l->nblocks,
			.status = status};
	}
	if (status) {
		gice_error("api", "device %u stream %u: kernel failed in block %u of %u: %s: %s", l->dev->gid,
			   smt_stream_id(l->stream->s), l->fail_block, l->nblocks, l->fail_what,
			   gice_status_name(status));
		smt_stream_fail(l->stream->s, status);
	}
	/* the record is free for the queue position's next launch once we return */
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

/* GICE_STATS, GICE_TRACE: a wait or write the stream thread ran, into the device's stage ring. */
static void stream_traced(void *arg, const smt_cmd_trace_t *t)
{
	gice_stream_t *s = arg;
	api_ev_t *e;

	if (!t->write)
		api_ev_wait(s->dev, API_EV_WAIT_STREAM, t->counter, t->value, t->t_start, t->t_end, smt_stream_id(s->s),
			    t->status);
	else if ((e = api_ev_take(s->dev)))
		*e = (api_ev_t){.kind = API_EV_STREAM_WRITE, .counter = t->counter, .a = smt_stream_id(s->s),
				.value = t->value, .t = {t->t_start, t->t_end, t->t_end}};
}

int gice_stream_create(gice_device_t *d, gice_stream_t **out)
{
	gice_stream_t *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return GICE_ERR_NO_MEMORY;
	s->dev = d;
	if (api_g.trace_path[0] && !(s->ks = calloc(API_KSLICES, sizeof(*s->ks)))) {
		rc = GICE_ERR_NO_MEMORY;
		goto err_free;
	}
	if ((rc = smt_stream_create(d->smt, &s->s)))
		goto err_free;
	if (d->evs)
		smt_stream_set_trace(s->s, stream_traced, s);
	/* one record per queue position; calloc: the pages of positions never used stay untouched */
	s->n_launches = smt_stream_depth(s->s);
	s->launches = calloc(s->n_launches, sizeof(*s->launches));
	if (!s->launches) {
		gice_error("api", "device %u: no memory for %u launch records of a stream", d->gid, s->n_launches);
		rc = GICE_ERR_NO_MEMORY;
		goto err_destroy;
	}
	*out = s;
	return GICE_OK;

err_destroy:
	smt_stream_destroy(s->s, UINT64_MAX);
err_free:
	free(s->ks);
	free(s);
	return rc;
}

int gice_stream_destroy(gice_stream_t *s)
{
	uint32_t sid = smt_stream_id(s->s);
	int rc = smt_stream_destroy(s->s, api_g.timeout_ns);

	if (rc != GICE_OK)
		return rc;
	for (uint32_t i = 0; i < s->n_launches; i++) {
		launch_t *l = &s->launches[i];
		if (l->mu_ready)
			pthread_mutex_destroy(&l->mu);
		free(l->ops);
		free(l->big);
	}
	free(s->launches);
	if (s->ks)
		api_obs_collect_kernels(s, sid);
	free(s->ks);
	free(s);
	return GICE_OK;
}

struct launch_req {
	gice_stream_t *s;
	gice_kernel_t fn;
	uint32_t nblocks;
	const void *args;
	size_t size;
};

/* smt_prep_fn: fill the record of queue position index (free: its last launch is done). Only
 * the first use of a record in host mode, or arguments larger than it held, allocate. */
static int launch_prep(void *ctx, uint32_t index, void **arg)
{
	const struct launch_req *q = ctx;
	launch_t *l = &q->s->launches[index];

	if (q->size > LAUNCH_ARGS_INLINE && q->size > l->big_cap) {
		uint8_t *big = malloc(q->size);
		if (!big) {
			gice_error("api", "device %u: no memory for %zu bytes of kernel arguments", q->s->dev->gid,
				   q->size);
			return GICE_ERR_NO_MEMORY;
		}
		free(l->big);
		l->big = big;
		l->big_cap = q->size;
	}
	if (q->s->dev->host_mode && !l->ops) { /* room for the kernel's operations, once per record */
		if (!(l->ops = malloc(64 * sizeof(*l->ops)))) {
			gice_error("api", "device %u: no memory for a kernel's operation list (host mode)",
				   q->s->dev->gid);
			return GICE_ERR_NO_MEMORY;
		}
		l->cap_ops = 64;
	}
	if (q->s->dev->host_mode && !l->mu_ready) {
		if (pthread_mutex_init(&l->mu, NULL))
			return GICE_ERR_NO_MEMORY;
		l->mu_ready = 1;
	}
	l->fn = q->fn;
	l->dev = q->s->dev;
	l->stream = q->s;
	atomic_store_explicit(&l->status, GICE_OK, memory_order_relaxed);
	atomic_store_explicit(&l->grid_arrived, 0, memory_order_relaxed);
	atomic_store_explicit(&l->t_start, 0, memory_order_relaxed);
	l->fail_block = 0;
	l->nblocks = q->nblocks;
	l->n_ops = 0;
	l->size = q->size;
	l->args = q->size > LAUNCH_ARGS_INLINE ? (void *)l->big : (void *)l->inline_args;
	if (q->size)
		memcpy(l->args, q->args, q->size);
	*arg = l;
	return GICE_OK;
}

static int launch(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args, size_t args_size,
		  uint32_t flags)
{
	struct launch_req q = {.s = s, .fn = kernel, .nblocks = nblocks, .args = args, .size = args_size};

	return smt_launch_prep(s->s, run_block, nblocks, flags, launch_done, launch_prep, &q);
}

int gice_launch(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args, size_t args_size)
{
	if (!s || !kernel || !nblocks || (args_size && !args))
		return GICE_ERR_INVALID;
	return launch(s, kernel, nblocks, args, args_size, 0);
}

int gice_launch_cooperative(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args,
			    size_t args_size)
{
	uint32_t n_sms;

	if (!s || !kernel || !nblocks || (args_size && !args))
		return GICE_ERR_INVALID;
	n_sms = smt_num_sms(s->dev->smt);
	if (nblocks > n_sms) { /* its blocks could never all run at once: it would hang */
		gice_error("api",
			   "device %u stream %u: cooperative launch of %u blocks, the device has %u SMs "
			   "(GICE_SMS): at most one block per SM",
			   s->dev->gid, smt_stream_id(s->s), nblocks, n_sms);
		return GICE_ERR_INVALID;
	}
	return launch(s, kernel, nblocks, args, args_size, SMT_LAUNCH_COOP);
}

int gice_device_sms(const gice_device_t *dev, uint32_t *n_sms)
{
	if (!dev || !n_sms)
		return GICE_ERR_INVALID;
	*n_sms = smt_num_sms(dev->smt);
	return GICE_OK;
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


/* ---------------------------------------------------------------- grid barrier */

int gice_grid_sync(gice_kctx_t *k)
{
	launch_t *l = k->launch;
	uint64_t idle = api_g.idle_ns, spin = api_g.spin_ns, since, t0;
	int rc;

	if (!l) {
		gice_error("api", "gice_grid_sync outside a kernel launch");
		return GICE_ERR_INVALID;
	}
	/* the target wraps with the 32-bit word: compared by the sign of the difference */
	uint32_t want = (uint32_t)(++k->grid_syncs * (uint64_t)k->nblocks);
	/* acq_rel: the block's writes before the barrier are seen by every block after it */
	uint32_t v = atomic_fetch_add_explicit(&l->grid_arrived, 1, memory_order_acq_rel) + 1;
	if (v == want) {
		gice_futex_wake(&l->grid_arrived, INT32_MAX);
		return GICE_OK;
	}
	since = t0 = gice_now_ns();
	for (uint32_t last = v;;) {
		if ((int32_t)(v - want) >= 0)
			return GICE_OK;
		if ((rc = tm_region_status(k->dev->tm)))
			break;
		uint64_t now = gice_now_ns();
		if (v != last) { /* a block arrived: progress */
			last = v;
			since = now;
		}
		if (now - since > idle) {
			gice_error("api", "gice_grid_sync on device %u: block %u of %u waited %llu ms without a block arriving: "
					  "%u of %u arrivals (a grid larger than the SMs? launch it with "
					  "gice_launch_cooperative; a block that returned early?)",
				   k->dev->gid, k->block, k->nblocks, (unsigned long long)(idle / 1000000),
				   v - (want - k->nblocks), k->nblocks);
			rc = GICE_ERR_TIMED_OUT;
			break;
		}
		if (now - t0 < spin)
			gice_cpu_relax();
		else
			gice_futex_wait(&l->grid_arrived, v, 1000000); /* 1 ms: the stall clock above */
		v = atomic_load_explicit(&l->grid_arrived, memory_order_acquire);
	}
	api_kernel_failed(k, rc, "gice_grid_sync (block %u of %u)", k->block, k->nblocks);
	return rc;
}
