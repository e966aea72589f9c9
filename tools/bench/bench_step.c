/* bench_step.c: the training-step loop of gice-bench overlap and cpu-noise (bench.h).
 *
 * Side 0 of a pair (bench_pair.c) runs, per iteration, one kernel of one block: for each of
 * `chunks` pieces of its gradient buffer it computes (a sqrt loop of `work` elements over the
 * piece), then, with comm on, hands that piece to the network as a put_signal to side 1's
 * buffer (completion counted on side 0). The next iteration's kernel is bound to the
 * completion of every piece (a stream wait): the loop is compute -> chunked exchange -> next
 * step, enqueued once by the host, which then only waits. In device mode (GICE_MODE=device)
 * the piece leaves while the next one is computed; in host mode the host proxy issues them
 * after the kernel ends (no overlap). Side 1 only receives: on two cores, a second computing
 * side would leave no core for the engines that move the bytes.
 *
 * Each kernel stamps its start (CLOCK_MONOTONIC); a last empty kernel stamps the end: iteration
 * i lasts stamp[i + 1] - stamp[i], as the device saw it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

struct step_args {
	gice_conn_t c;
	uint64_t rkey;
	gice_counter_t sig, sent;
	uint8_t *src;
	size_t bytes;
	uint32_t chunks;
	int comm;
	uint64_t work; /* compute: elements per chunk */
	uint64_t *stamp;
	double *sink;
};

/* The compute: n elements of sqrt over a chunk of len bytes (cyclically). */
static double compute(const uint8_t *p, size_t len, uint64_t n)
{
	double acc = 0;

	for (uint64_t j = 0, i = 0; j < n; j++, i = i + 1 == len ? 0 : i + 1)
		acc += sqrt((double)p[i] + (double)j);
	return acc;
}

double bench_step_ns_per_work(void)
{
	static uint8_t buf[4096];
	uint64_t n = 1u << 20, t0 = now_ns();
	volatile double sink = compute(buf, sizeof(buf), n);

	(void)sink;
	return (double)(now_ns() - t0) / (double)n;
}

static void step_kernel(gice_kctx_t *k, void *a_)
{
	struct step_args *a = a_;
	size_t per = a->bytes / a->chunks;
	double acc = 0;

	*a->stamp = now_ns();
	for (uint32_t c = 0; c < a->chunks; c++) {
		uint8_t *piece = a->src + c * per;
		if (a->work && per)
			acc += compute(piece, per, a->work);
		if (per)
			piece[0] = (uint8_t)acc; /* the gradient depends on the compute */
		if (a->comm)
			gice_put_signal(k, a->c, a->rkey, c * per, piece, per, a->sig, 1, GICE_SIGNAL_ADD, a->sent);
	}
	*a->sink = acc;
}

static void stamp_kernel(gice_kctx_t *k, void *a_)
{
	(void)k;
	**(uint64_t **)a_ = now_ns();
}

struct step_pub {
	uint64_t key; /* side 1's buffer */
	uint32_t sig, pad;
};

void bench_step_open(struct bench_step *st, size_t bytes)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct step_pub pub[2];
	void *m;

	memset(st, 0, sizeof(*st));
	memset(pub, 0, sizeof(pub));
	st->bytes = bytes;
	if (bytes + (8u << 20) > (64u << 20))
		attr.hbm_bytes = bytes + (16u << 20);
	bench_pair_open(&st->p, &attr);
	for (int i = 0; i < 2; i++) {
		if (!st->p.sd[i].local)
			continue;
		CHECK(gice_mem_alloc(st->p.sd[i].d, bytes ? bytes : 1, &m));
		st->buf[i] = m;
		memset(m, i + 1, bytes);
		CHECK(gice_mem_register(st->p.sd[i].d, st->buf[i], bytes ? bytes : 1, &pub[i].key));
		CHECK(gice_counter_alloc(st->p.sd[i].d, &pub[i].sig));
		CHECK(gice_counter_alloc(st->p.sd[i].d, &st->sent[i]));
	}
	bench_pair_exchange(&st->p, pub, sizeof(pub[0]));
	bench_pair_connect(&st->p);
	st->rkey = pub[1].key;
	st->sig = pub[1].sig;
}

int bench_step_run(struct bench_step *st, uint32_t chunks, int comm, uint64_t work, long iters, uint64_t *iter_ns)
{
	struct bench_side *a = &st->p.sd[0];
	uint64_t *stamp = calloc((size_t)iters + 1, sizeof(*stamp));
	double sink = 0;
	int rc = 0;

	if (!stamp)
		die("bench_step_run: calloc", GICE_ERR_NO_MEMORY);
	if (st->p.active && a->local) {
		for (long i = 0; i < iters; i++) {
			struct step_args k = {.c = a->c, .rkey = st->rkey, .sig = st->sig, .sent = st->sent[0],
					      .src = st->buf[0], .bytes = st->bytes, .chunks = chunks, .comm = comm,
					      .work = work, .stamp = &stamp[i], .sink = &sink};
			CHECK(gice_launch(a->s, step_kernel, 1, &k, sizeof(k)));
			if (comm) /* the next step starts once every piece of this one has completed */
				CHECK(gice_stream_wait_value(a->s, st->sent[0], GICE_CMP_GE, st->pieces + (i + 1) * chunks,
							     0));
		}
		uint64_t *last = &stamp[iters];
		CHECK(gice_launch(a->s, stamp_kernel, 1, &last, sizeof(last)));
		CHECK(gice_stream_sync(a->s, 0));
		if (comm)
			st->pieces += (uint64_t)iters * chunks;
		rc = bench_counter_exact("gice-bench", a, st->sent[0], st->pieces, "pieces sent");
		for (long i = 0; i < iters; i++)
			iter_ns[i] = stamp[i + 1] - stamp[i];
	}
	free(stamp);
	if (st->p.world > 1) /* side 1's rank keeps its device open until side 0 is done */
		CHECK(gice_barrier());
	return rc;
}

void bench_step_close(struct bench_step *st) { bench_pair_close(&st->p); }

int bench_modes(int (*fn)(const char *mode))
{
	const char *env = getenv("GICE_MODE");
	int rc = 0;

	if (env || gice_world_size() > 1)
		return fn(env ? env : "device");
	/* one process and no mode asked: both, each in a fresh library (the mode is read at init) */
	for (int m = 0; m < 2; m++) {
		const char *mode = m ? "host" : "device";
		gice_finalize();
		setenv("GICE_MODE", mode, 1);
		CHECK(gice_init());
		rc |= fn(mode);
	}
	unsetenv("GICE_MODE");
	return rc;
}
