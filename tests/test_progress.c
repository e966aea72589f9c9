/* Description: who makes a device's CT work progress (ct_step.c, ct_tile.c).
 * - waiters step: with every CT thread stalled for good (stall_ct), a ping-pong between two
 *   devices still completes because the waiting kernels run their devices' CT steps; with
 *   GICE_WAIT_PROGRESS=0 the same ping-pong does not move (the put never leaves), which proves
 *   the path under test; with GICE_CT_POLL_EVERY=0 the waiters poll the fabric only when the
 *   peer's kicks announced packets, and the ping-pong still completes (the counts are exact);
 * - a kernel's trigger write: with every CT thread stalled, the armed counter add it fires has
 *   happened when gice_trigger_add returns (the kernel stepped the watching CT: no doorbell, no
 *   futex wake-up of a sleeping CT thread); with GICE_WAIT_PROGRESS=0 it has not (the CT is rung,
 *   and stalled), which proves the path under test;
 * - backstop: an armed descriptor whose trigger the host writes fires and its put is delivered
 *   while a kernel computes on the device and never waits (the CT threads do it: host threads
 *   never step), and a host-posted put completes with no kernel at all;
 * - kicks: a device of the same process that sends rings the receiving device's CT 0 when no
 *   thread of it is awake, so 20 host-posted puts between two idle one-CT devices whose CT polls
 *   only every 5 s (GICE_CT_POLL_US) take milliseconds, not 20 polls; and a kernel that stopped
 *   waiting (it took in all that was sent, so it left without a last look: ct_step.c) is no
 *   longer counted awake: a put that reaches its device while it computes rings CT 0; and when
 *   one stopped waiting owing the sender an ack (the put it waited for), its CT 0 asleep for
 *   GICE_CT_POLL_US, the sender pokes that CT 0 once the ack is overdue, so the put completes
 *   in milliseconds (ct_poke_silent).
 * The ACKs a waiting kernel leaves for its next pass: tests/test_ack_defer.c.
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

#define ITERS 200

struct pp {
	int side;          /* 0 starts */
	uint64_t wait_us;  /* each wait's own timeout */
	_Atomic int rc;    /* first failure, else GICE_OK */
	_Atomic long done; /* iterations completed */
};

/* Ping-pong of 8-byte put_signals: side 0 puts i, side 1 answers once it has it. */
static void pp_kernel(gice_kctx_t *k, void *arg)
{
	struct pp *a = *(struct pp **)arg;
	int s = a->side;
	uint64_t *src = (uint64_t *)buf[s];

	for (long i = 0; i < ITERS; i++) {
		int rc;
		if (s == 1 && (rc = gice_wait_until(k, sig[s], GICE_CMP_GE, (uint64_t)i + 1, a->wait_us, NULL))) {
			atomic_store(&a->rc, rc);
			return;
		}
		*src = (uint64_t)i * 2 + (uint64_t)s;
		if ((rc = gice_put_signal(k, conn[s], key[1 - s], 64, src, 8, sig[1 - s], 1, GICE_SIGNAL_ADD,
					  GICE_NO_COUNTER))) {
			atomic_store(&a->rc, rc);
			return;
		}
		if (s == 0 && (rc = gice_wait_until(k, sig[s], GICE_CMP_GE, (uint64_t)i + 1, a->wait_us, NULL))) {
			atomic_store(&a->rc, rc);
			return;
		}
		atomic_store(&a->done, i + 1);
	}
}

/* Run the ping-pong with every CT thread of both devices stalled from the start. */
static void stalled_pingpong(const char *wait_progress, struct pp *a)
{
	setenv("GICE_FAULTS", "stall_ct=0@0+inf,stall_ct=1@0+inf", 1);
	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of it */
	setenv("GICE_WAIT_PROGRESS", wait_progress, 1);
	open_pair();
	for (int i = 0; i < 2; i++) {
		struct pp *p = &a[i];
		ck_assert_int_eq(gice_launch(strm[i], pp_kernel, 1, &p, sizeof(p)), GICE_OK);
	}
	for (int i = 0; i < 2; i++)
		gice_stream_sync(strm[i], test_scaled(30000)); /* the kernel's failure is in a->rc */
}

/* Both sides of a ping-pong completed every round and hold the other's last value. */
static void check_pingpong_done(struct pp *a)
{
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(atomic_load(&a[i].rc), GICE_OK);
		ck_assert_int_eq(atomic_load(&a[i].done), ITERS);
		ck_assert_uint_eq(gice_counter_read(dev[i], sig[i]), ITERS);
		/* the last value the other side put */
		ck_assert_uint_eq(*(uint64_t *)(buf[i] + 64), (uint64_t)(ITERS - 1) * 2 + (uint64_t)(1 - i));
	}
}

/* The ping-pong of stalled CTs, the waiters polling the fabric only when packets were announced
 * (GICE_CT_POLL_EVERY=0): it completes only if the kicks count every packet, as nothing else
 * polls (a wait times out after 10 s when they do not). */
START_TEST(waiters_poll_only_what_was_announced)
{
	struct pp a[2] = {{.side = 0, .wait_us = test_scaled(10000000)}, {.side = 1, .wait_us = test_scaled(10000000)}};

	setenv("GICE_CT_POLL_EVERY", "0", 1);
	setenv("GICE_PLANE", "net", 1); /* through the fabric, not the NVLink plane */
	stalled_pingpong("1", a);
	check_pingpong_done(a);
	close_pair();
}
END_TEST

START_TEST(waiters_step_stalled_cts)
{
	struct pp a[2] = {{.side = 0, .wait_us = test_scaled(10000000)}, {.side = 1, .wait_us = test_scaled(10000000)}};

	stalled_pingpong("1", a);
	check_pingpong_done(a);
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_eq(st.ops_done, ITERS);
	ck_assert_uint_eq(st.ct_stalls, 0);
	close_pair();
}
END_TEST

START_TEST(no_progress_without_waiters_stepping)
{
	struct pp a[2] = {{.side = 0, .wait_us = 300000}, {.side = 1, .wait_us = 300000}};

	stalled_pingpong("0", a);
	/* nothing left device 0: its waiter timed out at its own timeout, device 1 heard nothing */
	ck_assert_int_eq(atomic_load(&a[0].rc), GICE_ERR_TIMED_OUT);
	ck_assert_int_eq(atomic_load(&a[1].rc), GICE_ERR_TIMED_OUT);
	ck_assert_int_eq(atomic_load(&a[0].done), 0);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), 0);
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_eq(st.tx_pkts, 0);
	close_pair();
}
END_TEST

/* ---------------------------------------------------------------- a kernel's trigger writes */

struct trig {
	gice_trigger_t trig;
	gice_counter_t fired;   /* the armed descriptor adds 1 to it */
	_Atomic uint64_t after; /* 1 + fired's value when gice_trigger_add had returned (0: not run) */
};

static void trigger_kernel(gice_kctx_t *k, void *arg)
{
	struct trig *t = *(struct trig **)arg;

	gice_trigger_add(k, t->trig, 1);
	atomic_store(&t->after, 1 + gice_signal_fetch(k, t->fired));
}

/* A kernel writes a trigger armed to add 1 to a counter, every CT thread stalled for good once
 * the arming has taken effect (a CT takes it from its queue). */
static void trigger_with_stalled_cts(const char *wait_progress, struct trig *t)
{
	struct trig *tp = t;
	gice_desc_t desc;

	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of it */
	setenv("GICE_WAIT_PROGRESS", wait_progress, 1);
	open_pair();
	ck_assert_int_eq(gice_counter_alloc(dev[0], &t->trig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &t->fired), GICE_OK);
	gice_op_t op = {.type = GICE_OP_COUNTER_ADD, .signal = t->fired, .value = 1, .completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[0], t->trig, 1, 0, &op, &desc), GICE_OK);
	_Atomic int *state = &dev[0]->ct->descs[desc & 0xfffff].state; /* its slot (ct_armed.c) */
	for (uint64_t t0 = now_ms(); atomic_load(state) != DS_ARMED && now_ms() - t0 < test_scaled(5000);)
		usleep(100);
	ck_assert_int_eq(atomic_load(state), DS_ARMED);
	ck_assert_int_eq(gice_faults_set(dev[0], "stall_ct=0@0+inf,stall_ct=1@0+inf"), GICE_OK);
	usleep(20000); /* the CT threads are in their stalls */
	ck_assert_int_eq(gice_launch(strm[0], trigger_kernel, 1, &tp, sizeof(tp)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(strm[0], test_scaled(20000)), GICE_OK);
}

START_TEST(a_kernels_trigger_write_fires_on_its_thread)
{
	struct trig t = {0};

	trigger_with_stalled_cts("1", &t);
	ck_assert_uint_eq(atomic_load(&t.after), 2); /* fired before gice_trigger_add returned */
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_eq(st.fired, 1);
	close_pair();
}
END_TEST

START_TEST(a_kernels_trigger_write_rings_the_cts_when_kernels_do_not_step)
{
	struct trig t = {0};

	trigger_with_stalled_cts("0", &t);
	ck_assert_uint_eq(atomic_load(&t.after), 1); /* the kernel ran; nothing fired */
	ck_assert_uint_eq(gice_counter_read(dev[0], t.fired), 0);
	close_pair();
}
END_TEST

/* ---------------------------------------------------------------- the CT threads as backstop */

struct busy {
	_Atomic int started;
	_Atomic int seen; /* the host saw the put land */
	_Atomic int landed_while_busy;
};

/* Compute (spin) until the host says the armed put landed, without a device call: only the CT
 * threads can fire the descriptor whose trigger the host writes meanwhile. */
static void busy_kernel(gice_kctx_t *k, void *arg)
{
	struct busy *b = *(struct busy **)arg;
	uint64_t t0 = now_ms();

	(void)k;
	atomic_store(&b->started, 1);
	while (!atomic_load(&b->seen) && now_ms() - t0 < test_scaled(10000))
		;
	atomic_store(&b->landed_while_busy, atomic_load(&b->seen));
}

START_TEST(armed_descriptor_fires_while_the_kernel_computes)
{
	struct busy b = {0}, *bp = &b;
	gice_trigger_t trig;
	gice_desc_t desc;

	open_pair();
	ck_assert_int_eq(gice_counter_alloc(dev[0], &trig), GICE_OK);
	buf[0][0] = 0x5a;
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 1, .rkey = key[1],
			.roff = 128, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD,
			.completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[0], trig, 1, 0, &op, &desc), GICE_OK);
	ck_assert_int_eq(gice_launch(strm[0], busy_kernel, 1, &bp, sizeof(bp)), GICE_OK);
	while (!atomic_load(&b.started))
		usleep(100);
	ck_assert_int_eq(gice_counter_add(dev[0], trig, 1), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	atomic_store(&b.seen, 1);
	ck_assert_int_eq(gice_stream_sync(strm[0], test_scaled(20000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&b.landed_while_busy), 1);
	ck_assert_uint_eq(buf[1][128], 0x5a);
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	ck_assert_uint_eq(st.fired, 1);
	close_pair();
}
END_TEST

START_TEST(host_posts_complete_without_kernels)
{
	gice_counter_t done;

	open_pair();
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	for (int i = 0; i < 64; i++)
		buf[0][i] = (uint8_t)(i + 1);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 64, .rkey = key[1],
			.roff = 256, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD, .completion = done};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(memcmp(buf[0], buf[1] + 256, 64), 0);
	close_pair();
}
END_TEST

START_TEST(an_idle_device_of_the_same_process_is_kicked)
{
	gice_counter_t done;
	const int n = 20;

	setenv("GICE_CT_POLL_US", "5000000", 1); /* an unkicked CT 0 finds a packet within 5 s */
	setenv("GICE_CT_SPIN_US", "0", 1);       /* CTs sleep as soon as they are idle */
	setenv("GICE_TIMEOUT_MS", "60000", 1);   /* the watchdog stays out of it */
	n_cts = 1;                               /* CT 0 alone: no other CT comes round */
	open_pair();
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 64, .rkey = key[1],
			.roff = 512, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD, .completion = done};
	uint64_t t0 = now_ms();
	for (int i = 0; i < n; i++) {
		usleep(2000); /* both devices idle again: their CTs asleep */
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, (uint64_t)i + 1, test_scaled(20000), NULL),
				 GICE_OK);
	}
	uint64_t ms = now_ms() - t0;
	fprintf(stderr, "kicks: %d puts to an idle device of this process in %llu ms\n", n, (unsigned long long)ms);
	/* unkicked, each put would wait for the receiver's next poll (up to 5 s: about 50 s in all) */
	ck_assert_msg(ms < test_scaled(10000), "%d puts took %llu ms: the receiving CT 0 was not kicked", n,
		      (unsigned long long)ms);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), (uint64_t)n);
	close_pair();
}
END_TEST

struct leaver {
	_Atomic int round; /* the host's: the kernel may wait for round's first put */
	_Atomic int rc;
	uint64_t puts;     /* per round */
};

#define LEAVE_ROUNDS 10

/* Per round: wait for the round's first put (stepping the device), then compute, without a
 * device call, until the host says the round is over (it has seen what it waits for). */
static void leave_kernel(gice_kctx_t *k, void *arg)
{
	struct leaver *l = *(struct leaver **)arg;

	for (int r = 0; r < LEAVE_ROUNDS; r++) {
		int rc = gice_wait_until(k, sig[1], GICE_CMP_GE, l->puts * (uint64_t)r + 1, test_scaled(20000000), NULL);
		if (rc) {
			atomic_store(&l->rc, rc);
			return;
		}
		uint64_t t0 = now_ms();
		while (atomic_load(&l->round) == r && now_ms() - t0 < test_scaled(20000))
			;
	}
}

/* Each round the host puts twice: the second put lands while the kernel computes. */
START_TEST(a_kernel_that_stopped_waiting_is_not_awake)
{
	struct leaver l = {.puts = 2}, *lp = &l;

	setenv("GICE_CT_POLL_US", "5000000", 1); /* an unkicked CT 0 finds a packet within 5 s */
	setenv("GICE_CT_SPIN_US", "0", 1);       /* CTs sleep as soon as they are idle */
	setenv("GICE_TIMEOUT_MS", "60000", 1);   /* the watchdog stays out of it */
	n_cts = 1;
	open_pair();
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 8, .rkey = key[1],
			.roff = 64, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD,
			.completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_launch(strm[1], leave_kernel, 1, &lp, sizeof(lp)), GICE_OK);
	for (int r = 0; r < LEAVE_ROUNDS; r++) {
		usleep(2000); /* the kernel waits, stepping its device */
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 2 * (uint64_t)r + 1, test_scaled(20000),
						   NULL), GICE_OK);
		usleep(5000); /* it has left its wait and computes */
		uint64_t t0 = now_ms();
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[1], sig[1], GICE_CMP_GE, 2 * (uint64_t)r + 2, test_scaled(20000),
						   NULL), GICE_OK);
		uint64_t ms = now_ms() - t0;
		/* were it still counted awake, no one would ring CT 0: up to 5 s */
		ck_assert_msg(ms < test_scaled(1000), "round %d: a put to a device whose kernel computes took %llu ms", r,
			      (unsigned long long)ms);
		atomic_store(&l.round, r + 1);
	}
	ck_assert_int_eq(gice_stream_sync(strm[1], test_scaled(20000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&l.rc), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), 2 * LEAVE_ROUNDS);
	close_pair();
}
END_TEST

/* Each round the host puts once and waits for its completion: the kernel that waited for the
 * put owes its ack, and computes. */
START_TEST(an_ack_owed_by_a_kernel_that_computes_is_poked_out)
{
	struct leaver l = {.puts = 1}, *lp = &l;
	gice_counter_t done;

	setenv("GICE_CT_POLL_US", "5000000", 1); /* CT 0 asleep comes round every 5 s */
	setenv("GICE_CT_SPIN_US", "0", 1);       /* CTs sleep as soon as they are idle */
	setenv("GICE_TIMEOUT_MS", "60000", 1);   /* the watchdog stays out of it */
	setenv("GICE_PLANE", "net", 1);          /* acked packets, not the NVLink plane */
	setenv("GICE_WAIT_SPIN_US", "1000000", 1); /* the put lands while the kernel steps */
	n_cts = 1;
	open_pair();
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0], .local = buf[0], .bytes = 8, .rkey = key[1],
			.roff = 64, .value = 1, .signal = sig[1], .signal_flags = GICE_SIGNAL_ADD, .completion = done};
	ck_assert_int_eq(gice_launch(strm[1], leave_kernel, 1, &lp, sizeof(lp)), GICE_OK);
	for (int r = 0; r < LEAVE_ROUNDS; r++) {
		usleep(2000); /* the kernel waits, stepping its device; its CT 0 sleeps */
		uint64_t t0 = now_ms();
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, (uint64_t)r + 1, test_scaled(20000), NULL),
				 GICE_OK);
		uint64_t ms = now_ms() - t0;
		/* unpoked, the ack would wait for CT 0's next look: up to 5 s */
		ck_assert_msg(ms < test_scaled(1000), "round %d: a put to a kernel that then computes took %llu ms to complete",
			      r, (unsigned long long)ms);
		atomic_store(&l.round, r + 1);
	}
	ck_assert_int_eq(gice_stream_sync(strm[1], test_scaled(20000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&l.rc), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], sig[1]), LEAVE_ROUNDS);
	close_pair();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("progress");
	TCase *tc = tcase_create("progress");

	SRunner *sr = srunner_create(s);
	int rc;

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, waiters_step_stalled_cts);
	tcase_add_test(tc, waiters_poll_only_what_was_announced);
	tcase_add_test(tc, no_progress_without_waiters_stepping);
	tcase_add_test(tc, a_kernels_trigger_write_fires_on_its_thread);
	tcase_add_test(tc, a_kernels_trigger_write_rings_the_cts_when_kernels_do_not_step);
	tcase_add_test(tc, armed_descriptor_fires_while_the_kernel_computes);
	tcase_add_test(tc, host_posts_complete_without_kernels);
	tcase_add_test(tc, an_idle_device_of_the_same_process_is_kicked);
	tcase_add_test(tc, a_kernel_that_stopped_waiting_is_not_awake);
	tcase_add_test(tc, an_ack_owed_by_a_kernel_that_computes_is_poked_out);
	suite_add_tcase(s, tc);
	srunner_run_all(sr, CK_NORMAL);
	rc = test_exit(sr);
	srunner_free(sr);
	return rc;
}
