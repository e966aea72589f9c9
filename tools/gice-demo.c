/* gice-demo: what `make run` shows. Four emulated GPUs in one process pass a token and a 1 MiB
 * buffer around a ring: each device's kernel waits for its left neighbour's signal, checks the
 * buffer that arrived, and put_signals it to its right neighbour. The host launches the four
 * kernels and then only waits. At the end, per-stage timings of the hops (from the CTs' trace
 * rings and the signal counters' timestamps): kernel issues → CT picks up → first packet on the
 * wire → payload delivered and signal written at the target → sender's completion (ack) →
 * target kernel woke. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gice.h"

#define NDEV 4
#define LAPS 20
#define BYTES (1u << 20)

struct args {
	int me;
	gice_conn_t right;
	uint64_t right_key;
	gice_counter_t my_sig, right_sig;
	uint8_t *buf; /* [0, 1M) outgoing, [1M, 2M) incoming */
	uint64_t *delivered, *woke; /* per lap, host memory */
	int *errors;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t pattern(uint64_t lap, int from, size_t i) { return (uint8_t)(lap * 31 + (uint64_t)from * 7 + i); }

static void ring_kernel(gice_kctx_t *k, void *a_)
{
	struct args *a = a_;
	uint8_t *out = a->buf, *in = a->buf + BYTES;
	int left = (a->me + NDEV - 1) % NDEV;

	for (uint64_t lap = 1; lap <= LAPS; lap++) {
		if (a->me != 0 || lap > 1) {
			uint64_t want = a->me == 0 ? lap - 1 : lap;
			if (gice_wait_until(k, a->my_sig, GICE_CMP_GE, want, 0, NULL)) {
				(*a->errors)++;
				return;
			}
			gice_counter_state_t st;
			gice_counter_get(k->dev, a->my_sig, &st);
			a->woke[want - 1] = now_ns();
			a->delivered[want - 1] = st.ts_ns;
			for (size_t i = 0; i < BYTES; i += 4093) /* spot check; the tail below checks the end */
				if (in[i] != pattern(want, left, i))
					(*a->errors)++;
			if (in[BYTES - 1] != pattern(want, left, BYTES - 1))
				(*a->errors)++;
		}
		for (size_t i = 0; i < BYTES; i++)
			out[i] = pattern(lap, a->me, i);
		gice_put_signal(k, a->right, a->right_key, BYTES, out, BYTES, a->right_sig, 1, GICE_SIGNAL_ADD,
				GICE_NO_COUNTER);
		gice_quiet(k); /* out is rewritten next lap */
	}
	if (a->me == 0) {
		if (gice_wait_until(k, a->my_sig, GICE_CMP_GE, LAPS, 0, NULL))
			(*a->errors)++;
		gice_counter_state_t st;
		gice_counter_get(k->dev, a->my_sig, &st);
		a->woke[LAPS - 1] = now_ns();
		a->delivered[LAPS - 1] = st.ts_ns;
	}
}

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n ? v[n / 2] : 0;
}

#define TRY(call)                                                                                     \
	do {                                                                                          \
		int rc_ = (call);                                                                     \
		if (rc_) {                                                                            \
			fprintf(stderr, "gice-demo: %s: %s\n", #call, gice_status_str(rc_));          \
			return 1;                                                                     \
		}                                                                                     \
	} while (0)

int main(void)
{
	gice_device_t *dev[NDEV];
	gice_stream_t *str[NDEV];
	uint8_t *buf[NDEV];
	uint64_t key[NDEV];
	gice_conn_t conn[NDEV];
	gice_counter_t sig[NDEV];
	uint64_t delivered[NDEV][LAPS], woke[NDEV][LAPS];
	int errors[NDEV] = {0};

	TRY(gice_init());
	for (int i = 0; i < NDEV; i++) {
		void *p;
		TRY(gice_device_open(NULL, &dev[i]));
		TRY(gice_stream_create(dev[i], &str[i]));
		TRY(gice_mem_alloc(dev[i], 2 * BYTES, &p));
		buf[i] = p;
		TRY(gice_mem_register(dev[i], buf[i], 2 * BYTES, &key[i]));
		TRY(gice_counter_alloc(dev[i], &sig[i]));
	}
	for (int i = 0; i < NDEV; i++)
		TRY(gice_conn_open(dev[i], gice_device_id(dev[(i + 1) % NDEV]), NULL, &conn[i]));
	printf("gice demo: %d devices, provider %s, a token and a %u KiB buffer around the ring %d times\n", NDEV,
	       gice_device_provider(dev[0]), BYTES / 1024, LAPS);

	uint64_t t0 = now_ns();
	for (int i = 0; i < NDEV; i++) {
		int r = (i + 1) % NDEV;
		struct args a = {.me = i, .right = conn[i], .right_key = key[r], .my_sig = sig[i], .right_sig = sig[r],
				 .buf = buf[i], .delivered = delivered[r == 0 ? 0 : r], .woke = woke[r],
				 .errors = &errors[i]};
		a.delivered = delivered[i];
		a.woke = woke[i];
		TRY(gice_launch(str[i], ring_kernel, 1, &a, sizeof(a)));
	}
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (int i = 0; i < NDEV; i++)
		TRY(gice_stream_sync(str[i], 60000));
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	uint64_t t1 = now_ns();

	int bad = 0;
	for (int i = 0; i < NDEV; i++)
		bad += errors[i];
	/* stages of every hop: sender i's trace entry for lap L, receiver (i+1)'s delivery/wake of L */
	double st[5][NDEV * LAPS];
	int n = 0;
	for (int i = 0; i < NDEV; i++) {
		gice_trace_t tr[LAPS];
		int r = (i + 1) % NDEV;
		uint32_t m = gice_device_trace(dev[i], tr, LAPS);
		for (uint32_t l = 0; l < m; l++, n++) {
			st[0][n] = (double)(tr[l].t_pickup - tr[l].t_issue) / 1000.0;
			st[1][n] = (double)(tr[l].t_first_tx - tr[l].t_pickup) / 1000.0;
			st[2][n] = (double)(delivered[r][l] - tr[l].t_first_tx) / 1000.0;
			st[3][n] = (double)(tr[l].t_complete - delivered[r][l]) / 1000.0;
			st[4][n] = (double)(woke[r][l] - delivered[r][l]) / 1000.0;
		}
	}
	double per_hop = (double)(t1 - t0) / 1000.0 / (NDEV * LAPS);
	printf("%d hops of %u KiB in %.1f ms: %.1f us per hop, %.0f MB/s per link\n", NDEV * LAPS, BYTES / 1024,
	       (double)(t1 - t0) / 1e6, per_hop, BYTES / per_hop);
	printf("per-stage medians over %d hops (us):\n", n);
	printf("  kernel issue    -> CT pickup        %9.2f\n", median(st[0], n));
	printf("  CT pickup       -> first packet out %9.2f\n", median(st[1], n));
	printf("  first packet    -> delivered+signal %9.2f  (1 MiB over the fabric)\n", median(st[2], n));
	printf("  delivered       -> completion (ack) %9.2f\n", median(st[3], n));
	printf("  delivered       -> target kernel woke %7.2f\n", median(st[4], n));
	printf("host CPU time while the ring ran: %.3f ms (the host only waited)\n",
	       (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6);
	printf("data check: %s\n", bad ? "FAILED" : "every buffer arrived intact");

	for (int i = 0; i < NDEV; i++) {
		TRY(gice_stream_destroy(str[i]));
		TRY(gice_mem_deregister(dev[i], key[i]));
		TRY(gice_mem_free(dev[i], buf[i]));
		TRY(gice_device_close(dev[i]));
	}
	gice_finalize();
	return bad ? 1 : 0;
}
