/* Description: how a device learns of link work while its kernels compute (ct_step.c, ct_link.c,
 * ct_link_xmit.c).
 * - leases: a kernel that issues requests holds its device's lease (GICE_CT_LEASE_US): a put that
 *   reaches the device meanwhile wakes no CT (kicks_leased), the kernel takes it in at its next
 *   request, and lands while the kernel still issues though CT 0 would not look for seconds;
 *   and a put that reaches a device whose kernel issued once and then computes lands when the
 *   lease lapses (the sender nudges: not sooner, and not at CT 0's next poll seconds later);
 * - counts: a sender counts its packets in the receiver's doorbell just before the provider
 *   takes them (ct_bundle_flush); a send refused (a rate cap, GICE_FAULTS rate=2MBps, refuses
 *   most of a burst of 64 puts of 4 KiB) takes its count back, so once all has landed each
 *   device's count equals the packets it took in (else it would poll for packets that never
 *   come, forever);
 * - corks: small puts that join a corked bundle look at nothing: a kernel puts once (sent at
 *   once), twice (corked: the first is unacknowledged), computes 20 ms while the first put's ACK
 *   arrives (the lease, a second, keeps CT 0 of its device asleep), then puts 62 more; all 62
 *   join the bundle, and none took the ACK in (the kernel reads no completion before its wait);
 *   every 24 joined the burst pushes the bundle on (2 pushes), and the wait's pass sends the
 *   rest.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h" /* a device's trigger memory and engine: its doorbell's count */
#include "api/gice.h"
#include "emu/ct_engine/ct_internal.h"
#include "tests/test_pair.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- leases */

struct issuer {
	_Atomic int stop;   /* the host's: the kernel may end */
	_Atomic int rc;
	_Atomic long puts;  /* requests the kernel issued */
	_Atomic long landed; /* the kernel saw the host's signal after this many requests */
	_Atomic int issued;  /* lapse: the kernel's request has returned (it looks no more) */
	gice_counter_t ctr; /* the counter its requests add to */
};

/* Issue requests (counter adds: they complete at once, on this device) until the host's put to
 * this device (dev[1]) has signalled sig[1], looking at the signal without waiting (no step:
 * only the requests' own look can take the put in). */
static void issue_kernel(gice_kctx_t *k, void *arg)
{
	struct issuer *s = *(struct issuer **)arg;
	gice_op_t op = {.type = GICE_OP_COUNTER_ADD, .signal = s->ctr, .value = 1, .completion = GICE_NO_COUNTER};
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < test_scaled(20000)) {
		int rc = gice_issue(k, &op);
		if (rc) {
			atomic_store(&s->rc, rc);
			return;
		}
		long n = atomic_fetch_add(&s->puts, 1) + 1;
		if (gice_signal_test(k, sig[1], GICE_CMP_GE, 1) == 1) {
			atomic_store(&s->landed, n);
			break;
		}
		for (uint64_t t = now_us(); now_us() - t < 20;) /* compute a little */
			;
	}
	while (!atomic_load(&s->stop) && now_ms() - t0 < test_scaled(20000))
		;
}

/* Leases: CT 0 of dev[1] polls every 10 s at most (GICE_CT_POLL_US) and no timer of its comes
 * sooner (GICE_RTO_MIN_US: its backstop sleeps a quarter of it), so only its kernel's lease, or
 * the end of it, moves packets to it. open_lease_pair waits out the watchdog's first look, which
 * finds a heartbeat due to each new peer and rings CT 0 to send it (the next is due in 15 s). */
static void open_lease_pair(const char *lease_us)
{
	setenv("GICE_CT_LEASE_US", lease_us, 1);
	setenv("GICE_CT_POLL_US", "10000000", 1);
	setenv("GICE_RTO_MIN_US", "10000000", 1);
	setenv("GICE_CT_SPIN_US", "0", 1);     /* CTs sleep as soon as they are idle */
	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of it */
	setenv("GICE_PLANE", "net", 1);        /* packets, kicked, not the NVLink plane */
	n_cts = 1;
	open_pair();
	usleep((useconds_t)test_scaled(300000)); /* the watchdog looks every 100 ms (slower sanitized) */
}

START_TEST(an_issuing_kernel_takes_in_what_arrives)
{
	struct issuer s = {0}, *sp = &s;

	open_lease_pair("60000000"); /* the kernel's lease lasts a minute */
	ck_assert_int_eq(gice_counter_alloc(dev[1], &s.ctr), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[1], issue_kernel, 1, &sp, sizeof(sp)), GICE_OK);
	while (atomic_load(&s.puts) < 100)
		usleep(1000); /* the kernel issues */
	buf[0][512] = 0x6b;
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0] + 512, .bytes = 1, .rkey = key[1],
			.roff = 512, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD,
			.completion = GICE_NO_COUNTER};
	gice_stats_t st0, st;
	ck_assert_int_eq(gice_device_stats(dev[0], &st0), GICE_OK);
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	/* the put's kick went to the lease: from then on, the kernel's next request takes it in */
	do
		ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	while (st.kicks_leased == st0.kicks_leased && now_ms() - t0 < test_scaled(5000));
	long kicked = atomic_load(&s.puts);
	/* CT 0 of dev[1] has nothing in flight: it would look in 10 s. Else only the watchdog looks
	 * sooner (it rings CT 0 when a request found the link in its hands), a lottery every 100 ms */
	int rc = gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 1, test_scaled(2000), NULL);
	uint64_t ms = now_ms() - t0;
	atomic_store(&s.stop, 1);
	ck_assert_int_eq(gice_stream_sync(strm[1], test_scaled(30000)), GICE_OK);
	ck_assert_msg(rc == GICE_OK, "the put to a device whose kernel issues did not land in %llu ms: %s",
		      (unsigned long long)ms, gice_status_name(rc));
	ck_assert_int_eq(atomic_load(&s.rc), GICE_OK);
	ck_assert_uint_eq(buf[1][512], 0x6b);
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_gt(st.kicks_leased, st0.kicks_leased);
	ck_assert_uint_eq(gice_counter_read(dev[1], s.ctr), (uint64_t)atomic_load(&s.puts));
	long after = atomic_load(&s.landed) - kicked;
	fprintf(stderr, "lease: a put landed in %llu ms while the kernel issued, %ld requests after its kick; dev 0: "
		"%llu kicks leased, %llu woke\n", (unsigned long long)ms, after,
		(unsigned long long)(st.kicks_leased - st0.kicks_leased), (unsigned long long)(st.kicks_woke - st0.kicks_woke));
	/* at 20 µs a request, 1000 are 20 ms of the host noticing the kick late */
	ck_assert_msg(atomic_load(&s.landed) > 0 && after <= 1000,
		      "the kernel issued %ld requests after the put's kick before it landed: they do not look at the link",
		      after);
	close_pair();
}
END_TEST

/* Add 1 to s->ctr (a request that completes at once, on this device), then compute. */
static void issue_once_kernel(gice_kctx_t *k, void *arg)
{
	struct issuer *s = *(struct issuer **)arg;
	gice_op_t op = {.type = GICE_OP_COUNTER_ADD, .signal = s->ctr, .value = 1, .completion = GICE_NO_COUNTER};
	uint64_t t0 = now_ms();

	atomic_store(&s->rc, gice_issue(k, &op));
	atomic_store(&s->issued, 1);
	while (!atomic_load(&s->stop) && now_ms() - t0 < test_scaled(20000))
		;
}

START_TEST(a_lapsed_lease_is_nudged)
{
	struct issuer s = {0}, *sp = &s;

	open_lease_pair("500000"); /* half a second */
	ck_assert_int_eq(gice_counter_alloc(dev[1], &s.ctr), GICE_OK);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 8, .rkey = key[1],
			.roff = 64, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD,
			.completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_launch(strm[1], issue_once_kernel, 1, &sp, sizeof(sp)), GICE_OK);
	/* not the counter: the request's own look, after its step, may still find the put */
	for (uint64_t w = now_ms(); !atomic_load(&s.issued) && now_ms() - w < test_scaled(5000);)
		usleep(100);
	ck_assert_int_eq(atomic_load(&s.issued), 1);
	ck_assert_uint_eq(gice_counter_read(dev[1], s.ctr), 1);
	gice_stats_t st0, st; /* what dev[0]'s kicks did before (the heartbeats at open woke CT 0) */
	ck_assert_int_eq(gice_device_stats(dev[0], &st0), GICE_OK);
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	int rc = gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 1, test_scaled(3000), NULL);
	uint64_t ms = now_ms() - t0;
	atomic_store(&s.stop, 1);
	ck_assert_int_eq(gice_stream_sync(strm[1], test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&s.rc), GICE_OK);
	/* unnudged, CT 0 of dev[1] would find it at its next poll: 10 s */
	ck_assert_msg(rc == GICE_OK, "a put to a device whose lease lapsed did not land in %llu ms: %s",
		      (unsigned long long)ms, gice_status_name(rc));
	/* the lease took the kick: nothing looked before it ended (half a second after the kernel's
	 * request, which the host saw complete before it posted) */
	ck_assert_msg(ms >= 250, "the put landed after %llu ms, before the lease lapsed", (unsigned long long)ms);
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_gt(st.kicks_leased, st0.kicks_leased); /* the put's kick */
	/* The nudge at the lease's end rings CT 0 of dev[1] only if no thread there is awake: one
	 * that is (whatever woke it) takes the put in itself, so kicks_woke may not grow
	 * (1 run of make test in 2026-12). That the put landed before CT 0's poll 10 s later is
	 * the nudge's doing: without it the wait above times out. */
	fprintf(stderr, "lease: a put to a device whose kernel computes landed in %llu ms (lease 500 ms); dev 0: "
		"%llu kicks leased, %llu woke\n", (unsigned long long)ms,
		(unsigned long long)(st.kicks_leased - st0.kicks_leased),
		(unsigned long long)(st.kicks_woke - st0.kicks_woke));
	close_pair();
}
END_TEST

struct burst {
	gice_counter_t done;
	_Atomic int rc;
};

/* 64 puts of 4 KiB from dev[0] to dev[1], then a wait for their completions. */
static void burst_kernel(gice_kctx_t *k, void *arg)
{
	struct burst *b = *(struct burst **)arg;
	int rc = GICE_OK;

	for (uint32_t j = 0; j < 64 && !rc; j++)
		rc = gice_put_signal(k, conn[0], key[1], (uint64_t)j * 4096, buf[0] + j * 4096, 4096, sig[1], 1,
				     GICE_SIGNAL_ADD, b->done);
	if (!rc)
		rc = gice_wait_until(k, b->done, GICE_CMP_GE, 64, test_scaled(20000000), NULL);
	atomic_store(&b->rc, rc);
}

/* 64 puts of bytes each from dev[0] to dev[1] by kern (its argument: &arg), which reports in
 * *rc and counts their completions in *done (allocated here): all land, bytes intact; dev[0]'s
 * stats after them in *st. */
static void run_64_puts(void (*kern)(gice_kctx_t *, void *), void *arg, gice_counter_t *done, _Atomic int *rc,
			uint32_t bytes, uint8_t seed, gice_stats_t *st)
{
	for (uint32_t i = 0; i < 64 * bytes; i++)
		buf[0][i] = (uint8_t)(i * 7 + seed);
	ck_assert_int_eq(gice_counter_alloc(dev[0], done), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[0], kern, 1, &arg, sizeof(arg)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(strm[0], test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(atomic_load(rc), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), 64);
	ck_assert_int_eq(memcmp(buf[0], buf[1], 64 * bytes), 0);
	ck_assert_int_eq(gice_device_stats(dev[0], st), GICE_OK);
}

/* Packets counted in d's doorbell that d has not taken in (0: nothing announced is missing). */
static int32_t uncounted(gice_device_t *d)
{
	return (int32_t)(tm_doorbell_sent(d->tm, 0) - atomic_load_explicit(&d->ct->rx_local, memory_order_acquire));
}

START_TEST(a_refused_send_takes_its_count_back)
{
	struct burst b = {0};
	gice_stats_t st;

	/* a bucket of 32 KiB: most of 256 KiB is refused, unless the burst is slower than the cap
	 * (under TSan 10 MB/s refused nothing in 2 runs of 6; 2 MB/s lets the burst take 128 ms) */
	setenv("GICE_FAULTS", "rate=2MBps", 1);
	setenv("GICE_PLANE", "net", 1);          /* through the fabric, not the NVLink plane */
	open_pair();
	run_64_puts(burst_kernel, &b, &b.done, &b.rc, 4096, 3, &st);
	ck_assert_uint_gt(st.fault_paced, 0); /* sends were refused */
	/* a heartbeat may be on its way: the counts settle within a pass or two */
	int32_t left[2];
	uint64_t t0 = now_ms();
	do {
		for (int i = 0; i < 2; i++)
			left[i] = uncounted(dev[i]);
	} while ((left[0] || left[1]) && now_ms() - t0 < test_scaled(3000) && !usleep(1000));
	fprintf(stderr, "counts: %llu sends paced; packets counted and not taken in: %d to dev 0, %d to dev 1\n",
		(unsigned long long)st.fault_paced, left[0], left[1]);
	ck_assert_msg(!left[0] && !left[1], "packets counted and never taken in: %d to dev 0, %d to dev 1", left[0],
		      left[1]);
	close_pair();
}
END_TEST

struct corked {
	gice_counter_t done;   /* dev[0]'s: the puts' completions */
	_Atomic int rc;
	_Atomic int64_t seen1; /* completions after the second put, -1: not yet */
	_Atomic int64_t seenc; /* after the computing, before the third put */
	_Atomic int64_t seen2; /* completions after the 64th, before any wait */
};

/* A put that goes at once (dev[1] had nothing unacknowledged), a second one that waits for its
 * ACK in a corked bundle, computing meanwhile (the ACK arrives, announced), then 62 more, which
 * join the bundle; the completions are read without a wait before and after them. */
static void cork_kernel(gice_kctx_t *k, void *arg)
{
	struct corked *c = *(struct corked **)arg;
	int rc = GICE_OK;

	for (uint32_t j = 0; j < 64 && !rc; j++) {
		rc = gice_put_signal(k, conn[0], key[1], (uint64_t)j * 8, buf[0] + j * 8, 8, sig[1], 1, GICE_SIGNAL_ADD,
				     c->done);
		if (j == 1) {
			atomic_store(&c->seen1, (int64_t)gice_signal_fetch(k, c->done));
			/* compute: the ACK arrives meanwhile (within ms; a lower bound: not scaled), and
			 * the watchdog's next look (every 100 ms) would ring CT 0 about it */
			for (uint64_t t = now_ms(); now_ms() - t < 20;)
				;
			atomic_store(&c->seenc, (int64_t)gice_signal_fetch(k, c->done));
		}
	}
	atomic_store(&c->seen2, (int64_t)gice_signal_fetch(k, c->done));
	if (!rc)
		rc = gice_wait_until(k, c->done, GICE_CMP_GE, 64, test_scaled(20000000), NULL);
	atomic_store(&c->rc, rc);
}

START_TEST(puts_that_join_a_corked_bundle_look_at_nothing)
{
	struct corked c;
	gice_stats_t st;

	/* the second put is corked only if the first one's ACK was not taken in before it, and
	 * stays so only if no pass took it in while the kernel computed (CT 0 of dev[0], which the
	 * watchdog may wake to send a heartbeat: once under ASan); and the burst joins the bundle
	 * to its end only if no such pass came in the middle (under TSan: 19 joins, then a pass of
	 * CT 0 took the ACK in and sent the bundle; or 0, one came at the third put). Such a round
	 * says nothing: run another. A put that looks spoils every round, and the last one fails
	 * the checks below. */
	for (int round = 0; round < 12; round++) {
		c = (struct corked){.seen1 = -1, .seenc = -1, .seen2 = -1};
		open_lease_pair("1000000"); /* a second: the ACK's kick wakes no CT of dev[0] */
		run_64_puts(cork_kernel, &c, &c.done, &c.rc, 8, (uint8_t)(1 + round), &st);
		fprintf(stderr,
			"cork: round %d: completions seen after the 2nd put %lld, after computing %lld, after the "
			"64th %lld; %llu joins, %llu pushes, %llu fabric sends\n",
			round, (long long)atomic_load(&c.seen1), (long long)atomic_load(&c.seenc),
			(long long)atomic_load(&c.seen2),
			(unsigned long long)st.bundle_joins, (unsigned long long)st.bundle_pushes,
			(unsigned long long)st.fab_sends);
		close_pair();
		if (atomic_load(&c.seen1) == 0 && atomic_load(&c.seenc) == 0 && atomic_load(&c.seen2) == 0 &&
		    st.bundle_joins == 62)
			break;
	}
	ck_assert_int_eq(atomic_load(&c.seen1), 0);
	ck_assert_int_eq(atomic_load(&c.seenc), 0);
	/* The first put's ACK arrived while the kernel computed; the 62 puts after it joined the
	 * bundle without taking it in (a look would have: its completion counted, and the bundle
	 * sent in pieces): the kernel's wait took it in, and sent the bundle. */
	ck_assert_msg(atomic_load(&c.seen2) == 0, "a put that joined the corked bundle took in %lld completions",
		      (long long)atomic_load(&c.seen2));
	ck_assert_uint_eq(st.bundle_joins, 62);
	/* Every 24 puts joined (CT_PUSH_PUTS) the burst sends the bundle on (without a look:
	 * seen2 above): the 2nd to 26th puts, then the 27th to 50th, the cork kept. Two pushes,
	 * unless CT 0 held the link at one (it sent them then). */
	ck_assert_msg(st.bundle_pushes >= 1 && st.bundle_pushes <= 2, "%llu pushes in a burst of 64 puts of 8 B",
		      (unsigned long long)st.bundle_pushes);
	/* the first put, the pushes, the wait's pass for the last 14, and what the device sent
	 * since its open (a heartbeat); with one round-robin turn per pass and no pushes, the
	 * wait's passes sent the 63 in bundles of 8 (10 sends in all) */
	ck_assert_msg(st.fab_sends <= 6, "%llu fabric sends for 64 puts", (unsigned long long)st.fab_sends);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("leases");
	TCase *tc = tcase_create("leases");

	SRunner *sr = srunner_create(s);
	int rc;

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, an_issuing_kernel_takes_in_what_arrives);
	tcase_add_test(tc, a_lapsed_lease_is_nudged);
	tcase_add_test(tc, a_refused_send_takes_its_count_back);
	tcase_add_test(tc, puts_that_join_a_corked_bundle_look_at_nothing);
	suite_add_tcase(s, tc);
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
