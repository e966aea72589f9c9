/* Description: the MPG shares the link between QoS classes by weighted round robin
 * (GICE_QOS_WEIGHTS: packets of each class per turn; ct_link_tx.c), also when each class has one
 * message. Two devices of one process over shm (the network plane: every byte crosses the
 * provider), packets only (no rendezvous), of 1 KiB (each goes alone). A kernel on the first
 * device puts 64 packets on a connection of class 3, then 64 on one of class 0, to the second
 * device, each put signalling its own counter there; the counters' stamps tell which put landed
 * last (the receiver takes packets in the order they were sent).
 * - Default weights (8,4,2,1): 8 packets of class 0 to 1 of class 3 per turn, so class 0's put
 *   lands first though issued second (class 3's goes on alone after it: ~1 ms later here).
 * - Equal weights (1,1,1,1): the classes alternate, and class 3's put, issued first, lands first
 *   (or with class 0's last packet, in the same poll: the same stamp).
 * Before a class sent its weight of packets per turn, it sent one packet per message per turn:
 * with one message each, the classes shared the link 1:1 whatever the weights (the first case
 * failed: class 3's put landed 70 us before class 0's). Every byte of both puts lands either
 * way. Every case runs in its own forked process (Check's default), so each sets its
 * environment before gice_init. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gice.h"
#include "tests/test_dev.h"
#include "tests/test_util.h"

#define PKT 1024u                /* GICE_MTU: the packet size, header included */
#define PAYLOAD (PKT - 96u)      /* payload bytes per packet */
#define NPKT 64u                 /* packets per put */
#define PUT_BYTES (NPKT * PAYLOAD)
#define BUF (2 * PUT_BYTES)      /* class 3's put, then class 0's */

static gice_device_t *dev[2];
static uint8_t *buf[2];
static uint64_t key[2];
static gice_conn_t conn[2]; /* dev[0] -> dev[1]: class 3, class 0 */

struct run {
	gice_counter_t done;   /* dev[0]'s: completions of the two puts */
	gice_counter_t sig[2]; /* dev[1]'s: class 3's put landed, class 0's */
	_Atomic int rc;
};

static uint8_t pattern(uint32_t i) { return (uint8_t)(1 + i % 251); } /* never 0 */

static void open_pair(const char *weights)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 2, .hbm_bytes = 4 * BUF, .provider = "shm"};

	if (weights)
		setenv("GICE_QOS_WEIGHTS", weights, 1);
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_CT_RNDV_BYTES", "0", 1); /* packets only */
	setenv("GICE_MTU", "1024", 1);        /* each goes alone: no bundles, at most 16 to a poll */
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < 2; i++)
		test_dev_open(&at, BUF, &dev[i], &buf[i], &key[i]);
	for (int c = 0; c < 2; c++) {
		gice_conn_attr_t ca = {.qos = c ? 0 : 3};
		ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), &ca, &conn[c]), GICE_OK);
	}
}

static void close_pair(void)
{
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

/* dev[0]: the class-3 put, then the class-0 put, then their completions. */
static void sender(gice_kctx_t *k, void *arg)
{
	struct run *r = *(struct run **)arg;
	int rc = GICE_OK;

	for (int c = 0; c < 2 && !rc; c++)
		rc = gice_put_signal(k, conn[c], key[1], (uint64_t)c * PUT_BYTES, buf[0] + c * PUT_BYTES, PUT_BYTES,
				     r->sig[c], 1, GICE_SIGNAL_ADD, r->done);
	if (!rc)
		rc = gice_wait_until(k, r->done, GICE_CMP_GE, 2, test_scaled(20000000), NULL);
	atomic_store(&r->rc, rc);
}

/* One run; returns how much later class 3's put landed than class 0's (ns; the stamps of their
 * signals: when the last packet of each was applied). */
static int64_t run_classes(const char *weights)
{
	struct run r = {0}, *rp = &r;
	gice_counter_state_t cs[2];
	gice_stream_t *s;

	open_pair(weights);
	for (uint32_t i = 0; i < BUF; i++)
		buf[0][i] = pattern(i);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &r.done), GICE_OK);
	for (int c = 0; c < 2; c++)
		ck_assert_int_eq(gice_counter_alloc(dev[1], &r.sig[c]), GICE_OK);
	/* both connections up first (a first send waits for its set-up), with bytes overwritten
	 * by the puts under test */
	for (int c = 0; c < 2; c++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[c], .local = buf[0] + c * PUT_BYTES, .bytes = 8,
				.rkey = key[1], .roff = (uint64_t)c * PUT_BYTES + PAYLOAD, .signal = GICE_NO_COUNTER,
				.completion = r.done};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(dev[0], r.done, GICE_CMP_GE, 2, (int)test_scaled(20000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_reset(dev[0], r.done), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[0], &s), GICE_OK);
	ck_assert_int_eq(gice_launch(s, sender, 1, &rp, sizeof(rp)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(s, test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_int_eq(atomic_load(&r.rc), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[0], r.done), 2);
	for (int c = 0; c < 2; c++) { /* completed: acknowledged, so applied */
		ck_assert_int_eq(gice_counter_get(dev[1], r.sig[c], &cs[c]), GICE_OK);
		ck_assert_uint_eq(cs[c].value, 1);
	}
	ck_assert_int_eq(memcmp(buf[0], buf[1], BUF), 0);
	int64_t later = (int64_t)(cs[0].ts_ns - cs[1].ts_ns);
	fprintf(stderr, "qos: weights %s: class 3's put landed %lld ns after class 0's\n",
		weights ? weights : "8,4,2,1 (default)", (long long)later);
	close_pair();
	return later;
}

START_TEST(default_weights_favour_class_0)
{
	ck_assert_msg(run_classes(NULL) > 0, "class 3's put landed no later than class 0's (8:1 weights)");
}
END_TEST

START_TEST(equal_weights_share_the_link)
{
	ck_assert_msg(run_classes("1,1,1,1") <= 0, "class 3's put, issued first, landed after class 0's (1:1 weights)");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("qos");
	TCase *tc = tcase_create("qos");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, default_weights_favour_class_0);
	tcase_add_test(tc, equal_weights_share_the_link);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
