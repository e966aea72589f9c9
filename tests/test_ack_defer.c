/* Description: the ACKs a waiting kernel leaves for its device's next pass over the link
 * (ct_ack_in_defer, ct_step.c). An ACK riding on the answer a kernel waited for is processed by
 * the next pass, not the one that took the answer in; when the kernel's block ends right after,
 * its end processes it: the put's completion is in its counter when the stream's sync returns
 * (else CT 0 would find it at its next poll, 5 s later); when the kernel computes instead, CT 0
 * processes it within GICE_CT_POLL_US. When that ACK completes what the kernel waits for
 * (windows of 16 puts, each waited for, then the peer's answer, as gice-bench rate), the pass
 * ends there and the kernel returns: the ACK it owes for the answer rides on its next put (fewer
 * than one ACK packet in two windows from it; one per window otherwise), and its block's end
 * sends the last one. Every case runs in its own forked process (Check's default), so each sets
 * its environment before gice_init. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_pair.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- acks left for the next pass */

struct asker {
	gice_counter_t done; /* dev[0]'s: its put's completion */
	_Atomic int stop;    /* the host's: the kernel may end (compute: 1) */
	int compute;         /* after the answer: compute until stop, without a device call */
	_Atomic int rc;
};

/* dev[0]: put to dev[1] (completion done), wait for the answer, then end or compute. */
static void ask_kernel(gice_kctx_t *k, void *arg)
{
	struct asker *a = *(struct asker **)arg;
	int rc = gice_put_signal(k, conn[0], key[1], 64, buf[0], 8, sig[1], 1, GICE_SIGNAL_ADD, a->done);

	if (!rc)
		rc = gice_wait_until(k, sig[0], GICE_CMP_GE, 1, test_scaled(20000000), NULL);
	atomic_store(&a->rc, rc);
	for (uint64_t t0 = now_ms(); a->compute && !atomic_load(&a->stop) && now_ms() - t0 < test_scaled(20000);)
		;
}

/* dev[1]: wait for the put, answer it (the answer carries its ACK). */
static void answer_kernel(gice_kctx_t *k, void *arg)
{
	_Atomic int *rc = *(_Atomic int **)arg;
	int r = gice_wait_until(k, sig[1], GICE_CMP_GE, 1, test_scaled(20000000), NULL);

	if (!r)
		r = gice_put_signal(k, conn[1], key[0], 64, buf[1], 8, sig[0], 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER);
	atomic_store(rc, r);
}

/* One question and answer between kernels, CT 0 of dev[0] asleep for poll_us between its
 * looks, that of dev[1] stalled: the answerer's waiting kernel alone takes the question in, so
 * that the ACK it owes rides on its answer (a CT 0 woken by the question on a loaded machine
 * would send it alone). Returns whether the answer carried the question's ACK (else the case
 * says nothing); *ms: from the launch until the host saw the question complete (a host wait: no
 * stepping). */
static int ask_once(struct asker *a, const char *poll_us, uint64_t *ms)
{
	_Atomic int arc = GICE_OK, *ap = &arc;
	gice_stats_t st;

	setenv("GICE_CT_POLL_US", poll_us, 1);
	setenv("GICE_CT_SPIN_US", "0", 1);     /* CTs sleep as soon as they are idle */
	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of it */
	setenv("GICE_PLANE", "net", 1);        /* acked packets, not the NVLink plane */
	setenv("GICE_WAIT_SPIN_US", "1000000", 1); /* the question lands while the answerer steps */
	n_cts = 1;
	open_pair();
	ck_assert_int_eq(gice_faults_set(dev[1], "stall_ct=0@0+inf"), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a->done), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[1], answer_kernel, 1, &ap, sizeof(ap)), GICE_OK);
	usleep(2000); /* it waits, stepping its device: it takes the question in, its CT 0 asleep */
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_launch(strm[0], ask_kernel, 1, &a, sizeof(a)), GICE_OK);
	if (a->compute) {
		ck_assert_int_eq(gice_counter_wait(dev[0], a->done, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
		*ms = now_ms() - t0;
		ck_assert_int_eq(atomic_load(&a->stop), 0);
		atomic_store(&a->stop, 1);
	}
	ck_assert_int_eq(gice_stream_sync(strm[0], test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(strm[1], test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&a->rc), GICE_OK);
	ck_assert_int_eq(atomic_load(&arc), GICE_OK);
	ck_assert_int_eq(gice_device_stats(dev[1], &st), GICE_OK);
	return st.acks_piggybacked > 0;
}

START_TEST(an_ack_left_for_the_next_pass_is_processed_by_the_block_end)
{
	for (int round = 0; round < 5; round++) {
		struct asker a = {0};
		int rode = ask_once(&a, "5000000", NULL);
		/* no wait: the block's end processed the ACK before the block counted as done (else
		 * CT 0 of dev[0] would at its next poll, 5 s later) */
		uint64_t done = gice_counter_read(dev[0], a.done);
		fprintf(stderr, "acks: round %d: the answer %s the ACK; completion %llu at the sync\n", round,
			rode ? "carried" : "did not carry", (unsigned long long)done);
		close_pair();
		if (rode) {
			ck_assert_uint_eq(done, 1);
			return;
		}
	}
	ck_abort_msg("no answer carried its question's ACK in 5 rounds");
}
END_TEST

START_TEST(an_ack_left_for_the_next_pass_is_processed_while_the_kernel_computes)
{
	for (int round = 0; round < 5; round++) {
		struct asker a = {.compute = 1};
		uint64_t ms = 0;
		/* CT 0 of dev[0] looks every 200 ms at the latest: no kernel comes back to the link */
		int rode = ask_once(&a, "200000", &ms);
		fprintf(stderr, "acks: round %d: the answer %s the ACK; the question completed after %llu ms while "
			"its kernel computed\n", round, rode ? "carried" : "did not carry", (unsigned long long)ms);
		close_pair();
		if (rode)
			return; /* ask_once waited for it while the kernel computed (stop still 0) */
	}
	ck_abort_msg("no answer carried its question's ACK in 5 rounds");
}
END_TEST

/* ---------------------------------------------------------------- a window's waiter returns first */

#define WINDOWS 50
#define WINDOW 16

struct windows {
	gice_counter_t done[2]; /* each device's: completions of its puts */
	_Atomic int rc[2];
};

/* dev[0]: windows of puts to dev[1], each waited for (their completions, then dev[1]'s answer),
 * as gice-bench rate; dev[1]: answers each window with a put once its signals are in. */
static void window_kernel(gice_kctx_t *k, void *arg)
{
	struct windows *w = *(struct windows **)arg;
	int me = k->dev == dev[1], rc = GICE_OK;

	for (uint64_t i = 1; i <= WINDOWS && !rc; i++) {
		if (me == 0) {
			for (uint32_t j = 0; j < WINDOW && !rc; j++)
				rc = gice_put_signal(k, conn[0], key[1], 64 + 8 * j, buf[0], 8, sig[1], 1, GICE_SIGNAL_ADD,
						     w->done[0]);
			if (!rc)
				rc = gice_wait_until(k, w->done[0], GICE_CMP_GE, i * WINDOW, test_scaled(20000000), NULL);
			if (!rc)
				rc = gice_wait_until(k, sig[0], GICE_CMP_GE, i, test_scaled(20000000), NULL);
		} else {
			rc = gice_wait_until(k, sig[1], GICE_CMP_GE, i * WINDOW, test_scaled(20000000), NULL);
			if (!rc)
				rc = gice_put_signal(k, conn[1], key[0], 64, buf[1], 8, sig[0], 1, GICE_SIGNAL_ADD, w->done[1]);
		}
	}
	if (!rc && me == 1) /* every answer acknowledged: the last by dev[0]'s block end */
		rc = gice_wait_until(k, w->done[1], GICE_CMP_GE, WINDOWS, test_scaled(20000000), NULL);
	atomic_store(&w->rc[me], rc);
}

/* The answer carries the ACK of the window's last puts (the riding ACK, left for the next pass);
 * the pass that processes it completes the window, and ends there: the kernel returns, and the
 * ACK it owes for the answer rides on its next window's first put instead of a packet of its own
 * sent before it returns. The CT threads are stalled, so that the kernels' passes are the only
 * ones: a CT thread that takes the answer in (one woken by it on a loaded machine) owes its ACK
 * with no put of its own to carry it, and sends it alone. */
START_TEST(a_waiter_returns_when_a_window_completes_and_its_next_put_carries_the_ack)
{
	struct windows w = {0}, *wp = &w;
	gice_stats_t st;

	setenv("GICE_PLANE", "net", 1);       /* acked packets, not the NVLink plane */
	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of it */
	setenv("GICE_WAIT_SPIN_US", "1000000", 1); /* the answers land while the kernels step */
	setenv("GICE_FAULTS", "stall_ct=0@0+inf", 1);
	n_cts = 1;
	open_pair();
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_counter_alloc(dev[i], &w.done[i]), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[1], window_kernel, 1, &wp, sizeof(wp)), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[0], window_kernel, 1, &wp, sizeof(wp)), GICE_OK);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_stream_sync(strm[i], test_scaled(30000)), GICE_OK);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(atomic_load(&w.rc[i]), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), WINDOWS * WINDOW);
	ck_assert_uint_eq(gice_counter_read(dev[0], sig[0]), WINDOWS);
	ck_assert_uint_eq(gice_counter_read(dev[0], w.done[0]), WINDOWS * WINDOW);
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	fprintf(stderr, "windows: %d windows: dev[0] sent %llu ACKs of their own, %llu riding on its puts\n", WINDOWS,
		(unsigned long long)st.acks_sent, (unsigned long long)st.acks_piggybacked);
	/* one ACK packet per window when the pass that completed it went on to send what it owed */
	ck_assert_uint_lt(st.acks_sent, WINDOWS / 2);
	ck_assert_uint_ge(st.acks_piggybacked, WINDOWS / 2);
	close_pair();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ack_defer");
	TCase *tc = tcase_create("ack_defer");

	SRunner *sr = srunner_create(s);
	int rc;

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, an_ack_left_for_the_next_pass_is_processed_by_the_block_end);
	tcase_add_test(tc, an_ack_left_for_the_next_pass_is_processed_while_the_kernel_computes);
	tcase_add_test(tc, a_waiter_returns_when_a_window_completes_and_its_next_put_carries_the_ack);
	suite_add_tcase(s, tc);
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
