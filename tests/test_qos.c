/* Description: the MPG shares the link between QoS classes by weighted round robin
 * (GICE_QOS_WEIGHTS: packets of each class per turn; ct_link_tx.c), also when each class has one
 * message. Two devices of one process over shm (the network plane: every byte crosses the
 * provider), one CT each, packets only (no rendezvous), of 1 KiB (each goes alone). With the
 * first device's CT stalled, the host queues a put of 256 packets on a connection of class 3,
 * then one of 256 on a connection of class 0, to the second device; the stall ends, and the CT
 * takes both into the MPG in one step. On the second device a kernel, the only one to make
 * progress there (its CT stalled too), waits for class 0's put to land and counts how many of
 * class 3's packets have landed by then. The receiver takes packets in the order they were sent,
 * but many in one step (16 to a poll, and a step may poll more than once: with puts of 64
 * packets, 8 to 32 of class 3's had landed in 8 runs), so the count is the round robin's share,
 * give or take a few polls, whatever the machine's speed.
 * - Default weights (8,4,2,1): 8 packets of class 0 to 1 of class 3 per turn, so 32 of class
 *   3's packets go out with class 0's 256; with those of the last step: at most half of them.
 * - Equal weights (1,1,1,1): the classes alternate; 255 or 256 of class 3's have landed.
 * Before a class sent its weight of packets per turn, it sent one packet per message per turn:
 * with one message each, the classes shared the link 1:1 whatever the weights, and the first
 * case fails. An earlier form of this test had a kernel issue the two puts and compared when
 * they landed: under ThreadSanitizer class 3's put could leave whole before class 0's was
 * queued. Every byte of both puts lands either way. Every case runs in its own forked process
 * (Check's default), so each sets its environment before gice_init. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_dev.h"
#include "tests/test_util.h"

#define PKT 1024u                /* GICE_MTU: the packet size, header included */
#define PAYLOAD (PKT - 96u)      /* payload bytes per packet */
#define NPKT 256u                /* packets per put */
#define PUT_BYTES (NPKT * PAYLOAD)
#define BUF (2 * PUT_BYTES)      /* class 3's put, then class 0's */

static gice_device_t *dev[2];
static uint8_t *buf[2];
static uint64_t key[2];
static gice_conn_t conn[2]; /* dev[0] -> dev[1]: class 3, class 0 */

struct run {
	gice_counter_t sig[2]; /* dev[1]'s: class 3's put landed, class 0's */
	_Atomic uint32_t landed; /* class 3's packets landed when class 0's put had */
	_Atomic int rc;
};

static uint8_t pattern(uint32_t i) { return (uint8_t)(1 + i % 251); } /* never 0 */

static void open_pair(const char *weights)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 1, .hbm_bytes = 4 * BUF, .provider = "shm"};

	if (weights)
		setenv("GICE_QOS_WEIGHTS", weights, 1);
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_CT_RNDV_BYTES", "0", 1); /* packets only */
	setenv("GICE_MTU", "1024", 1);        /* each goes alone: no bundles, at most 16 to a poll */
	setenv("GICE_CT_CREDITS", "1024", 1); /* both puts in flight at once: no class waits for an ACK */
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

/* dev[1], which only this kernel steps: class 0's put landed, then how many of class 3's packets
 * had (each packet's last byte: pattern is never 0 and the buffer was zeroed), then class 3's. */
static void receiver(gice_kctx_t *k, void *arg)
{
	struct run *r = *(struct run **)arg;
	uint32_t landed = 0;
	int rc = gice_wait_until(k, r->sig[1], GICE_CMP_GE, 1, test_scaled(20000000), NULL);

	for (uint32_t i = 0; i < NPKT && !rc; i++)
		landed += buf[1][(i + 1) * PAYLOAD - 1] != 0;
	atomic_store(&r->landed, landed);
	if (!rc)
		rc = gice_wait_until(k, r->sig[0], GICE_CMP_GE, 1, test_scaled(20000000), NULL);
	atomic_store(&r->rc, rc);
}

static void put_op(gice_op_t *op, int c, gice_counter_t sig, gice_counter_t done, size_t bytes, uint64_t roff)
{
	*op = (gice_op_t){.type = GICE_OP_PUT, .conn = conn[c], .local = buf[0] + c * PUT_BYTES, .bytes = bytes,
			  .rkey = key[1], .roff = roff, .value = 1, .signal = sig, .signal_flags = GICE_SIGNAL_ADD,
			  .completion = done};
}

/* One run; returns how many of class 3's packets had landed when class 0's put had. */
static uint32_t run_classes(const char *weights)
{
	struct run r = {0}, *rp = &r;
	gice_counter_t done;
	gice_stream_t *s;
	gice_op_t op;

	open_pair(weights);
	for (uint32_t i = 0; i < BUF; i++)
		buf[0][i] = pattern(i);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &done), GICE_OK);
	for (int c = 0; c < 2; c++)
		ck_assert_int_eq(gice_counter_alloc(dev[1], &r.sig[c]), GICE_OK);
	/* both connections up first (a first send waits for its set-up) */
	for (int c = 0; c < 2; c++) {
		put_op(&op, c, GICE_NO_COUNTER, done, 8, (uint64_t)c * PUT_BYTES);
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, 2, (int)test_scaled(20000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_reset(dev[0], done), GICE_OK);
	memset(buf[1], 0, BUF); /* acknowledged: nothing more lands there */

	/* dev[1]: its kernel alone takes packets in */
	ck_assert_int_eq(gice_faults_set(dev[1], "stall_ct=0@0+inf"), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[1], &s), GICE_OK);
	ck_assert_int_eq(gice_launch(s, receiver, 1, &rp, sizeof(rp)), GICE_OK);
	/* dev[0]: both puts queued before its CT takes either (host posts never step) */
	ck_assert_int_eq(gice_faults_set(dev[0], "stall_ct=0@0+inf"), GICE_OK);
	for (int c = 0; c < 2; c++) {
		put_op(&op, c, r.sig[c], done, PUT_BYTES, (uint64_t)c * PUT_BYTES);
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	}
	usleep(10000); /* the stall holds: no packet of either put has left */
	for (uint32_t i = 0; i < 2 * NPKT; i++)
		ck_assert_msg(buf[1][(i + 1) * PAYLOAD - 1] == 0, "packet %u of the puts landed while the CT was stalled",
			      i);
	ck_assert_int_eq(gice_faults_set(dev[0], "stall_ct=0@0+1ns"), GICE_OK);

	ck_assert_int_eq(gice_stream_sync(s, test_scaled(30000)), GICE_OK);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_int_eq(atomic_load(&r.rc), GICE_OK);
	ck_assert_int_eq(gice_faults_set(dev[1], "stall_ct=0@0+1ns"), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], done, GICE_CMP_GE, 2, (int)test_scaled(20000), NULL), GICE_OK);
	for (int c = 0; c < 2; c++) /* completed: acknowledged, so applied */
		ck_assert_uint_eq(gice_counter_read(dev[1], r.sig[c]), 1);
	ck_assert_int_eq(memcmp(buf[0], buf[1], BUF), 0);
	uint32_t landed = atomic_load(&r.landed);
	fprintf(stderr, "qos: weights %s: %u of class 3's %u packets had landed with class 0's put\n",
		weights ? weights : "8,4,2,1 (default)", landed, NPKT);
	close_pair();
	return landed;
}

START_TEST(default_weights_favour_class_0)
{
	uint32_t landed = run_classes(NULL);

	ck_assert_msg(landed <= NPKT / 2, "%u of class 3's %u packets landed with class 0's put (8:1 weights: %u, "
		      "and those of the last step: at most %u)", landed, NPKT, NPKT / 8, NPKT / 2);
}
END_TEST

START_TEST(equal_weights_share_the_link)
{
	uint32_t landed = run_classes("1,1,1,1");

	ck_assert_msg(landed >= NPKT - 2, "only %u of class 3's %u packets landed with class 0's put (1:1 weights: "
		      "%u or more)", landed, NPKT, NPKT - 2);
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
