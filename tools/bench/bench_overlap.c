/* bench_overlap.c: gice-bench overlap — how much of a chunked gradient exchange hides behind
 * compute (seed 5.2), in device mode against host mode.
 *
 * Per gradient size (--sizes, default 1 MiB, in 8 pieces), with the training-step loop of
 * bench_step.c: the exchange alone (no compute), then a compute sized to last as long as that
 * exchange (the case where overlap matters most; the same work in both modes), then the compute
 * alone, then compute and exchange. Rows: comm, compute, overlap (p50/p99 of one iteration on
 * the device; MBps: the gradient over the p50), then
 *   # overlap MODE B: compute-only P us, compute+comm Q us, comm-only R us: efficiency E
 * with E = compute-only / (compute+comm) (1: the exchange is hidden; 0.5 here: not at all). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/bench/bench.h"

#define OVL_PIECES 8u

static uint64_t ovl_work[32]; /* per size: compute elements per piece, set by the first mode */

static int overlap_mode(const char *mode)
{
	long iters = opt.iters ? opt.iters : 100, warm = iters / 10 + 2, n = iters + warm;
	uint64_t *t = calloc((size_t)n, sizeof(*t));
	double ns_per = bench_step_ns_per_work();
	int rc = 0;

	if (!t)
		die("overlap: calloc", GICE_ERR_NO_MEMORY);
	for (int si = 0; si < opt.nsizes && !rc; si++) {
		size_t bytes = opt.sizes[si] / OVL_PIECES * OVL_PIECES;
		struct bench_step st;
		char transport[64];
		double comm, comp, both, p99[3];

		bench_step_open(&st, bytes);
		int me = st.p.active && st.p.sd[0].local;
		snprintf(transport, sizeof(transport), "%s/%s", gice_device_provider(st.p.sd[st.p.role].d), mode);
		rc |= bench_step_run(&st, OVL_PIECES, 1, 0, n, t);
		comm = me ? pct(t + warm, iters, 0.5) : 0;
		p99[0] = me ? pct(t + warm, iters, 0.99) : 0;
		if (!ovl_work[si] && me) { /* compute as long as the exchange, in elements per piece */
			uint64_t w = (uint64_t)(comm * 1000.0 / OVL_PIECES / ns_per) + 1;
			/* the rate measured here, then on the device's SM (rescaled once) */
			rc |= bench_step_run(&st, OVL_PIECES, 0, w, warm + 10, t);
			ovl_work[si] = (uint64_t)((double)w * comm / pct(t + warm, 10, 0.5)) + 1;
		} else if (st.p.world > 1) {
			rc |= bench_step_run(&st, OVL_PIECES, 0, 1, warm + 10, t); /* side 1 meets the barrier */
		}
		rc |= bench_step_run(&st, OVL_PIECES, 0, ovl_work[si], n, t);
		comp = me ? pct(t + warm, iters, 0.5) : 0;
		p99[1] = me ? pct(t + warm, iters, 0.99) : 0;
		rc |= bench_step_run(&st, OVL_PIECES, 1, ovl_work[si], n, t);
		both = me ? pct(t + warm, iters, 0.5) : 0;
		p99[2] = me ? pct(t + warm, iters, 0.99) : 0;
		if (me) {
			int ranks = (int)st.p.world;
			row("comm", transport, ranks, bytes, iters, comm, p99[0], (double)bytes / comm, (double)bytes / comm);
			row("compute", transport, ranks, bytes, iters, comp, p99[1], 0, 0);
			row("overlap", transport, ranks, bytes, iters, both, p99[2], (double)bytes / both,
			    (double)bytes / both);
			fprintf(opt.csv ? stderr : stdout,
				"# overlap %s %zu B: compute-only %.1f us, compute+comm %.1f us, comm-only %.1f us: "
				"efficiency %.2f\n",
				mode, bytes, comp, both, comm, comp / both);
			fflush(stdout);
		}
		bench_step_close(&st);
	}
	free(t);
	return rc;
}

int bench_overlap(void)
{
	if (!opt.nsizes_set)
		opt.sizes[0] = 1u << 20, opt.nsizes = 1;
	return bench_modes(overlap_mode);
}
