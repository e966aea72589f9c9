/* bench_rate.c: gice-bench rate, the message rate of one direction of a pair of devices, in the
 * manner of osu_mbw_mr. A kernel on the first device (the sender) issues --window put_signals of
 * S bytes, each into its own slot at the second device (the receiver) and each adding 1 to a
 * counter there, then waits until they have all completed (its completion counter reaches the
 * count) and until the receiver's acknowledgement of the window arrives; the receiver's kernel
 * waits for the window's W signals and answers with an 8-byte put_signal. Repeat. Messages/s is
 * the timed messages over the time from the first timed window to the last acknowledgement.
 * Afterwards the receiver checks every byte of its slots and both sides check that every
 * counter reads exactly what was sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

#define RATE_ACK_BYTES 8 /* the receiver's acknowledgement, like osu_mbw_mr's 4-byte reply */

struct rate_args {
	gice_conn_t c;
	uint64_t rkey;            /* sender: the receiver's slots; receiver: the sender's ack word */
	gice_counter_t sig;       /* sender: acks of windows; receiver: signals of the puts */
	gice_counter_t peer_sig;  /* the other side's sig */
	gice_counter_t done;      /* completions of this side's puts */
	const uint8_t *src;       /* sender: window slots of bytes each; receiver: the ack word */
	size_t bytes;
	uint32_t window;
	long windows, warm;       /* timed windows, and untimed ones before them */
	uint64_t *win_ns;         /* sender: the time of each timed window */
	uint64_t *t_start, *t_end; /* sender: first timed window's start, last ack's arrival */
	uint64_t *issue_ns;       /* sender: the time its kernel spent issuing, timed windows */
};

static void rate_sender(gice_kctx_t *k, void *a_)
{
	struct rate_args *a = a_;
	uint64_t W = a->window;

	for (long w = 0; w < a->warm + a->windows; w++) {
		uint64_t t0 = now_ns();
		if (w == a->warm)
			*a->t_start = t0;
		/* a failure to queue is recorded in done too: the wait below reports it */
		for (uint64_t j = 0; j < W; j++)
			gice_put_signal(k, a->c, a->rkey, j * a->bytes, a->src + j * a->bytes, a->bytes, a->peer_sig, 1,
					GICE_SIGNAL_ADD, a->done);
		if (w >= a->warm)
			*a->issue_ns += now_ns() - t0;
		if (gice_wait_until(k, a->done, GICE_CMP_GE, ((uint64_t)w + 1) * W, 0, NULL) ||
		    gice_wait_until(k, a->sig, GICE_CMP_GE, (uint64_t)w + 1, 0, NULL))
			return; /* the kernel has failed: the stream sync says why */
		if (w >= a->warm)
			a->win_ns[w - a->warm] = now_ns() - t0;
	}
	*a->t_end = now_ns();
}

static void rate_receiver(gice_kctx_t *k, void *a_)
{
	struct rate_args *a = a_;
	long total = a->warm + a->windows;

	for (long w = 0; w < total; w++) {
		if (gice_wait_until(k, a->sig, GICE_CMP_GE, ((uint64_t)w + 1) * a->window, 0, NULL))
			return;
		gice_put_signal(k, a->c, a->rkey, 0, a->src, RATE_ACK_BYTES, a->peer_sig, 1, GICE_SIGNAL_ADD, a->done);
	}
	gice_wait_until(k, a->done, GICE_CMP_GE, (uint64_t)total, 0, NULL);
}

/* Seed of slot j's contents for size number si: every size and slot differs. */
static uint64_t rate_seed(int si, uint32_t j) { return (uint64_t)(si + 1) << 32 | j; }

/* The receiver's slots hold what the sender's did: 0, else a line on stderr and 1. */
static int rate_verify(const struct bench_side *s, const uint8_t *slots, int si, size_t bytes, uint32_t W)
{
	uint8_t *expect = malloc(bytes ? bytes : 1);

	if (!expect)
		die("rate: malloc of the expected payload", GICE_ERR_NO_MEMORY);
	for (uint32_t j = 0; j < W; j++) {
		const uint8_t *got = slots + (size_t)j * bytes;
		bench_pattern(expect, bytes, rate_seed(si, j));
		if (!memcmp(expect, got, bytes))
			continue;
		size_t off = 0;
		while (expect[off] == got[off])
			off++;
		fprintf(stderr, "rate: device %u: FAILED: %zu B: slot %u: first bad byte at offset %zu: expected 0x%02x, "
				"found 0x%02x\n",
			s->gid, bytes, j, off, expect[off], got[off]);
		free(expect);
		return 1;
	}
	free(expect);
	return 0;
}

/* What each side publishes for the other. */
struct rate_pub {
	uint64_t slots_key; /* the receiver's target slots */
	uint64_t ack_key;   /* the sender's ack word */
	uint32_t sig, pad;  /* the counter the other side signals */
};

int bench_rate(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct bench_pair p;
	struct bench_side *sd = p.sd;
	struct rate_pub pub[2];
	uint8_t *slots[2] = {NULL, NULL}, *ack[2] = {NULL, NULL};
	gice_counter_t done[2] = {0, 0};
	uint32_t W = opt.window;
	size_t maxb = 1, need;
	int failed = 0;

	memset(pub, 0, sizeof(pub));
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] > maxb)
			maxb = opt.sizes[i];
	need = (size_t)W * maxb + (1u << 20);
	if (need > (64u << 20))
		attr.hbm_bytes = need + (16u << 20);
	bench_pair_open(&p, &attr);
	for (int i = 0; i < 2; i++) {
		void *m;
		if (!sd[i].local)
			continue;
		CHECK(gice_mem_alloc(sd[i].d, (size_t)W * maxb, &m));
		slots[i] = m;
		CHECK(gice_mem_register(sd[i].d, slots[i], (size_t)W * maxb, &pub[i].slots_key));
		CHECK(gice_mem_alloc(sd[i].d, 256, &m));
		ack[i] = m; /* the acks' bytes: not looked at */
		CHECK(gice_mem_register(sd[i].d, ack[i], 256, &pub[i].ack_key));
	}
	bench_pair_connect(&p);
	const char *transport = gice_device_provider(sd[p.role].d);

	for (int si = 0; si < opt.nsizes; si++) {
		size_t bytes = opt.sizes[si];
		long windows = (bench_default_iters(bytes) + W - 1) / W, warm = windows / 10 + 1;
		long msgs = windows * (long)W, total = warm + windows;
		uint64_t *win_ns = calloc((size_t)windows, sizeof(*win_ns)), t_start = 0, t_end = 0, issue_ns = 0;
		struct rate_args a[2];

		if (!win_ns)
			die("rate: calloc of the window times", GICE_ERR_NO_MEMORY);
		for (int i = 0; i < 2; i++) {
			if (!sd[i].local)
				continue;
			CHECK(gice_counter_alloc(sd[i].d, &pub[i].sig));
			CHECK(gice_counter_alloc(sd[i].d, &done[i]));
			/* The receiver's slots are not cleared: what an earlier size left there cannot
			 * match this size's contents. (A host write there would race, as far as a
			 * sanitizer can tell, with the CT's writes that another process causes.) */
			if (i == 0)
				for (uint32_t j = 0; j < W; j++)
					bench_pattern(slots[0] + (size_t)j * bytes, bytes, rate_seed(si, j));
		}
		bench_pair_exchange(&p, pub, sizeof(pub[0]));
		for (int i = 0; i < 2 && p.active; i++) {
			if (!sd[i].local)
				continue;
			a[i] = (struct rate_args){.c = sd[i].c, .rkey = i == 0 ? pub[1].slots_key : pub[0].ack_key,
						  .sig = pub[i].sig, .peer_sig = pub[1 - i].sig, .done = done[i],
						  .src = i == 0 ? slots[0] : ack[1], .bytes = bytes, .window = W,
						  .windows = windows, .warm = warm, .win_ns = win_ns, .t_start = &t_start,
						  .t_end = &t_end, .issue_ns = &issue_ns};
		}
		for (int i = 1; i >= 0 && p.active; i--)
			if (sd[i].local)
				CHECK(gice_launch(sd[i].s, i ? rate_receiver : rate_sender, 1, &a[i], sizeof(a[i])));
		for (int i = 0; i < 2 && p.active; i++)
			if (sd[i].local)
				CHECK(gice_stream_sync(sd[i].s, 0));

		/* every message and every ack exactly once; the receiver's slots hold the sender's bytes */
		for (int i = 0; i < 2 && p.active; i++) {
			if (!sd[i].local)
				continue;
			if (i == 0) {
				failed |= bench_counter_exact("rate", &sd[0], done[0], (uint64_t)(total * W),
							      "completions of the puts");
				failed |= bench_counter_exact("rate", &sd[0], pub[0].sig, (uint64_t)total,
							      "acknowledgements of the windows");
			} else {
				failed |= bench_counter_exact("rate", &sd[1], pub[1].sig, (uint64_t)(total * W),
							      "signals of the puts");
				failed |= bench_counter_exact("rate", &sd[1], done[1], (uint64_t)total,
							      "completions of the acknowledgements");
				failed |= rate_verify(&sd[1], slots[1], si, bytes, W);
			}
		}
		/* the sender's rank prints the row only when both sides found everything intact */
		int bad[2] = {failed, failed};
		bench_pair_exchange(&p, bad, sizeof(bad[0]));
		if (p.active && sd[0].local && !bad[0] && !bad[1]) {
			double us = (double)(t_end - t_start) / 1000.0, per_msg[2], windows_ns = 0;
			for (long w = 0; w < windows; w++) {
				windows_ns += (double)win_ns[w];
				win_ns[w] /= W; /* per message of the window */
			}
			per_msg[0] = pct(win_ns, windows, 0.5);
			per_msg[1] = pct(win_ns, windows, 0.99);
			double mbps = (double)bytes * (double)msgs / us;
			row("rate", transport, (int)p.world, bytes, msgs, per_msg[0], per_msg[1], mbps, mbps * p.pairs);
			printf("# rate %zu B window %u: %.0f msgs/s\n", bytes, W, (double)msgs / us * 1e6);
			/* where a window's time went: the sender's kernel issuing, then waiting */
			printf("# issue %zu B window %u: %.0f ns a put to issue, %.0f ns a put waiting\n", bytes, W,
			       (double)issue_ns / (double)msgs, (windows_ns - (double)issue_ns) / (double)msgs);
			fflush(stdout);
		}
		if (p.world > 1)
			CHECK(gice_barrier()); /* every pair done before counters are recycled */
		for (int i = 0; i < 2; i++) {
			if (!sd[i].local)
				continue;
			CHECK(gice_counter_free(sd[i].d, pub[i].sig));
			CHECK(gice_counter_free(sd[i].d, done[i]));
		}
		free(win_ns);
	}
	bench_pair_close(&p);
	return failed;
}
