/* Description: end-to-end behaviour of gice with four devices in one process: a 1000-lap
 * put_signal ring driven only by kernels, chained triggers across devices, get, contended remote
 * atomics, bit-exact sizes around the MTU up to 8 MiB, quiet/fence, arming order, more
 * rendezvous puts at once than the fabric has read slots, and the exact errors for a wrong key,
 * an out-of-bounds destination, an unregistered source and a timeout.
 * Runs once per provider in GICE_TEST_PROVIDERS (default "shm,tcp,net": net is the default
 * between hosts). A provider that libfabric
 * does not have here (GICE_ERR_NOT_FOUND) is skipped: its cases are counted in the binary's last
 * line, "skipped: N cases (...)", and the binary exits 77 when no case ran; a provider that is
 * here but whose device does not open is a failure. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_util.h"

#define NDEV 4
#define MIB (1024u * 1024u)

static gice_device_t *dev[NDEV];
static gice_stream_t *str[NDEV];
static uint8_t *buf[NDEV];   /* 16 MiB per device: [0, 8M) source, [8M, 16M) target */
static uint64_t key[NDEV];
static gice_conn_t conn[NDEV][NDEV]; /* conn[i][j]: from i to j */
#define BUF_BYTES (16u * MIB)
#define TGT (8u * MIB)

static void setup(void)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		gice_device_attr_t a = {.n_sms = 4, .n_cts = 2, .hbm_bytes = 64u * MIB};
		ck_assert_int_eq(gice_device_open(&a, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_stream_create(dev[i], &str[i]), GICE_OK);
		void *p;
		ck_assert_int_eq(gice_mem_alloc(dev[i], BUF_BYTES, &p), GICE_OK);
		buf[i] = p;
		memset(buf[i], 0, BUF_BYTES);
		ck_assert_int_eq(gice_mem_register(dev[i], buf[i], BUF_BYTES, &key[i]), GICE_OK);
	}
	for (int i = 0; i < NDEV; i++)
		for (int j = 0; j < NDEV; j++)
			ck_assert_int_eq(gice_conn_open(dev[i], gice_device_id(dev[j]), NULL, &conn[i][j]), GICE_OK);
}

/* The same devices, with large puts cut into packets instead of moving by rendezvous reads. */
static void setup_packets(void)
{
	setenv("GICE_CT_RNDV_BYTES", "0", 1);
	setup();
}

static void teardown_packets(void);
static void teardown(void);

/* The same devices with every byte through libfabric: no NVLink plane, large puts by fi_read. */
static void setup_net(void)
{
	setenv("GICE_PLANE", "net", 1);
	setup();
}

static void teardown_net(void)
{
	teardown();
	unsetenv("GICE_PLANE");
}

/* Over the network, with rendezvous from 16 KiB: many rendezvous messages fit the buffers. */
static void setup_net_16k(void)
{
	setenv("GICE_CT_RNDV_BYTES", "16k", 1);
	setup_net();
}

static void teardown_net_16k(void)
{
	teardown_net();
	unsetenv("GICE_CT_RNDV_BYTES");
}

static void teardown(void)
{
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_stream_destroy(str[i]), GICE_OK);
		ck_assert_int_eq(gice_mem_deregister(dev[i], key[i]), GICE_OK);
		ck_assert_int_eq(gice_mem_free(dev[i], buf[i]), GICE_OK);
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	}
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static void teardown_packets(void)
{
	teardown();
	unsetenv("GICE_CT_RNDV_BYTES");
}

static gice_counter_t ctr(int d)
{
	gice_counter_t c;
	ck_assert_int_eq(gice_counter_alloc(dev[d], &c), GICE_OK);
	return c;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* ---------------------------------------------------------------- ring */

#define LAPS 1000
struct ring_args {
	int me, right;
	gice_counter_t my_sig, right_sig;
	uint64_t right_key;
	gice_conn_t c;
	_Atomic int *errors;
	uint8_t *mine;
};

static void ring_kernel(gice_kctx_t *k, void *a_)
{
	struct ring_args *a = a_;
	uint64_t *in = (uint64_t *)(a->mine + TGT), *out = (uint64_t *)a->mine;

	for (uint64_t lap = 1; lap <= LAPS; lap++) {
		if (a->me != 0 || lap > 1) {
			uint64_t want = a->me == 0 ? lap - 1 : lap, found;
			if (gice_wait_until(k, a->my_sig, GICE_CMP_GE, want, 0, &found)) {
				atomic_fetch_add(a->errors, 1);
				return;
			}
			/* the signal lands after the payload: the token must be there */
			if (*(volatile uint64_t *)in != want * 100 + (uint64_t)(a->me == 0 ? NDEV - 1 : a->me - 1))
				atomic_fetch_add(a->errors, 1);
		}
		*out = lap * 100 + (uint64_t)a->me;
		if (gice_put_signal(k, a->c, a->right_key, TGT, out, sizeof(*out), a->right_sig, 1, GICE_SIGNAL_ADD,
				    GICE_NO_COUNTER))
			atomic_fetch_add(a->errors, 1);
		/* the source is reused next lap: wait for the ack (NCCL "local action") */
		if (gice_quiet(k))
			atomic_fetch_add(a->errors, 1);
	}
	if (a->me == 0 && gice_wait_until(k, a->my_sig, GICE_CMP_GE, LAPS, 0, NULL))
		atomic_fetch_add(a->errors, 1);
}

START_TEST(ring_of_four_devices_1000_laps_kernels_only)
{
	_Atomic int errors = 0;
	gice_counter_t sig[NDEV];

	for (int i = 0; i < NDEV; i++)
		sig[i] = ctr(i);
	for (int i = 0; i < NDEV; i++) {
		int r = (i + 1) % NDEV;
		struct ring_args a = {.me = i, .right = r, .my_sig = sig[i], .right_sig = sig[r], .right_key = key[r],
				      .c = conn[i][r], .errors = &errors, .mine = buf[i]};
		ck_assert_int_eq(gice_launch(str[i], ring_kernel, 1, &a, sizeof(a)), GICE_OK);
	}
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_sync(str[i], 60000), GICE_OK);
	ck_assert_int_eq(atomic_load(&errors), 0);
	for (int i = 0; i < NDEV; i++)
		ck_assert_uint_eq(gice_counter_read(dev[i], sig[i]), LAPS);
}
END_TEST

/* ---------------------------------------------------------------- chained triggers */

struct trig_args {
	gice_trigger_t t;
};

static void trigger_kernel(gice_kctx_t *k, void *a_)
{
	struct trig_args *a = a_;
	gice_trigger_add(k, a->t, 1);
}

START_TEST(chained_triggers_cross_three_devices_without_host)
{
	gice_trigger_t t0 = ctr(0);
	gice_counter_t s1 = ctr(1), s2 = ctr(2), s3 = ctr(3), c0 = ctr(0), c2 = ctr(2), s3b = ctr(3);
	gice_desc_t d;

	for (int i = 0; i < 3; i++)
		fill(buf[i], 100000, 7 + i);
	/* dev0: T0 >= 1 → put 100000 B to dev1, signal s1 */
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = 100000, .rkey = key[1],
			.roff = TGT, .value = 1, .signal = s1, .signal_flags = GICE_SIGNAL_ADD, .completion = c0};
	ck_assert_int_eq(gice_arm(dev[0], t0, 1, 0, &op, &d), GICE_OK);
	/* dev0: its completion c0 >= 1 → put to dev3, signal s3b (completion-triggered) */
	gice_op_t op0b = {.type = GICE_OP_PUT, .conn = conn[0][3], .local = buf[0], .bytes = 10, .rkey = key[3],
			  .roff = TGT + 200000, .value = 1, .signal = s3b, .completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[0], c0, 1, 0, &op0b, &d), GICE_OK);
	/* dev1: s1 >= 1 → put its own data to dev2, signal s2 */
	gice_op_t op1 = {.type = GICE_OP_PUT, .conn = conn[1][2], .local = buf[1], .bytes = 100000, .rkey = key[2],
			 .roff = TGT, .value = 1, .signal = s2, .completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[1], s1, 1, 0, &op1, &d), GICE_OK);
	/* dev2: s2 >= 1 → put to dev3, signal s3 */
	gice_op_t op2 = {.type = GICE_OP_PUT, .conn = conn[2][3], .local = buf[2], .bytes = 100000, .rkey = key[3],
			 .roff = TGT, .value = 1, .signal = s3, .completion = c2};
	ck_assert_int_eq(gice_arm(dev[2], s2, 1, 0, &op2, &d), GICE_OK);

	ck_assert_uint_eq(gice_counter_read(dev[3], s3), 0); /* nothing fired yet */
	struct trig_args a = {.t = t0};
	ck_assert_int_eq(gice_launch(str[0], trigger_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[3], s3, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[3], s3b, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[2], c2, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
	ck_assert_int_eq(memcmp(buf[1] + TGT, buf[0], 100000), 0);
	ck_assert_int_eq(memcmp(buf[2] + TGT, buf[1], 100000), 0);
	ck_assert_int_eq(memcmp(buf[3] + TGT, buf[2], 100000), 0);
	ck_assert_int_eq(memcmp(buf[3] + TGT + 200000, buf[0], 10), 0);
	/* one-shot descriptors fired once: a second trigger does nothing. A marker armed at 2 on the
	 * same trigger fires after any re-fire of the first (threshold order, same CT and connection)
	 * and its strong signal lands only after every earlier put from dev0 to dev1 has landed. */
	gice_counter_t mark = ctr(1);
	gice_op_t marker = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = 8, .rkey = key[1],
			    .roff = TGT + 300000, .value = 1, .signal = mark,
			    .signal_flags = GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, .completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[0], t0, 2, 0, &marker, &d), GICE_OK);
	ck_assert_int_eq(gice_counter_add(dev[0], t0, 1), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], mark, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], s1), 1);
}
END_TEST

START_TEST(equal_thresholds_fire_in_arming_order_and_disarm)
{
	gice_trigger_t t = ctr(0);
	gice_counter_t x = ctr(0), y = ctr(0);
	gice_desc_t d1, d2, d3, d4;
	gice_op_t set1 = {.type = GICE_OP_COUNTER_SET, .signal = x, .value = 1, .completion = GICE_NO_COUNTER};
	gice_op_t set2 = {.type = GICE_OP_COUNTER_SET, .signal = x, .value = 2, .completion = GICE_NO_COUNTER};
	gice_op_t addy = {.type = GICE_OP_COUNTER_ADD, .signal = y, .value = 1, .completion = GICE_NO_COUNTER};

	ck_assert_int_eq(gice_arm(dev[0], t, 5, 0, &set2, &d1), GICE_OK);
	ck_assert_int_eq(gice_arm(dev[0], t, 5, 0, &set1, &d2), GICE_OK);
	ck_assert_int_eq(gice_arm(dev[0], t, 6, 0, &addy, &d3), GICE_OK);
	ck_assert_int_eq(gice_arm(dev[0], t, 2, 1, &addy, &d4), GICE_OK); /* persistent, every step from 2 */
	ck_assert_int_eq(gice_disarm(dev[0], d3), GICE_OK);
	ck_assert_int_eq(gice_counter_set(dev[0], t, 5), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], y, GICE_CMP_GE, 4, 5000, NULL), GICE_OK); /* 2,3,4,5 */
	ck_assert_int_eq(gice_device_quiet(dev[0], 5000), GICE_OK);
	/* set2 armed first, set1 second: set1 wins */
	ck_assert_int_eq(gice_counter_wait(dev[0], x, GICE_CMP_EQ, 1, 5000, NULL), GICE_OK);
	ck_assert_int_eq(gice_disarm(dev[0], d1), GICE_ERR_NOT_FOUND); /* already fired */
	ck_assert_int_eq(gice_counter_add(dev[0], t, 2), GICE_OK);     /* 7: persistent fires for 6 and 7 */
	ck_assert_int_eq(gice_counter_wait(dev[0], y, GICE_CMP_GE, 6, 5000, NULL), GICE_OK);
	ck_assert_int_eq(gice_disarm(dev[0], d4), GICE_OK);
	ck_assert_int_eq(gice_counter_add(dev[0], t, 5), GICE_OK);
	ck_assert_int_eq(gice_device_quiet(dev[0], 5000), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[0], y), 6); /* disarmed d3 never fired, d4 stopped */
}
END_TEST

/* ---------------------------------------------------------------- get, atomics */

/* A triggered put keeps its place among the requests of its connection: a strong signal fired
 * by a trigger lands only after the put posted just before it on the same connection, whichever
 * CT the trigger counter belongs to. */
START_TEST(triggered_put_is_ordered_with_posted_puts_of_its_connection)
{
	gice_conn_t c2;
	const size_t n = 2 * MIB;

	/* a second connection to dev1: its requests go to the other CT than conn[0][1]'s */
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &c2), GICE_OK);
	for (int round = 0; round < 10; round++) {
		gice_counter_t sig = ctr(1), t = ctr(0), t2;
		/* a trigger on the CT the connection does not use */
		while (t % 2 == c2 % 2) {
			ck_assert_int_eq(gice_counter_alloc(dev[0], &t2), GICE_OK);
			t = t2;
		}
		fill(buf[0], n, 100 + round);
		memset(buf[1] + TGT, 0, n);
		gice_op_t b = {.type = GICE_OP_PUT, .conn = c2, .local = buf[0] + n, .bytes = 8, .rkey = key[1],
			       .roff = TGT + n, .value = 1, .signal = sig, .signal_flags = GICE_SIGNAL_STRONG,
			       .completion = GICE_NO_COUNTER};
		gice_desc_t d;
		ck_assert_int_eq(gice_arm(dev[0], t, 1, 0, &b, &d), GICE_OK);
		gice_counter_t a_done = ctr(0);
		gice_op_t a = {.type = GICE_OP_PUT, .conn = c2, .local = buf[0], .bytes = n, .rkey = key[1],
			       .roff = TGT, .signal = GICE_NO_COUNTER, .completion = a_done};
		ck_assert_int_eq(gice_post(dev[0], &a), GICE_OK);
		ck_assert_int_eq(gice_counter_add(dev[0], t, 1), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[1], sig, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
		ck_assert_msg(memcmp(buf[1] + TGT, buf[0], n) == 0, "round %d: the strong signal beat the put before it",
			      round);
		/* the source is rewritten next round: only after the put's own completion */
		ck_assert_int_eq(gice_counter_wait(dev[0], a_done, GICE_CMP_GE, 1, 10000, NULL), GICE_OK);
	}
}
END_TEST

START_TEST(peer_pointers_load_and_store_on_the_nvlink_plane)
{
	uint64_t off;

	ck_assert_int_eq(gice_mem_offset(dev[2], buf[2] + 4096, &off), GICE_OK);
	uint64_t *p = gice_peer_ptr(dev[0], gice_device_id(dev[2]), off, 64);
	ck_assert_ptr_eq(p, buf[2] + 4096); /* one process: the peer's own memory */
	p[0] = 0x1122334455667788ull;
	ck_assert_uint_eq(((uint64_t *)(buf[2] + 4096))[0], 0x1122334455667788ull);
	ck_assert_ptr_null(gice_peer_ptr(dev[0], gice_device_id(dev[2]), 64u * MIB - 8, 64)); /* past the end */
	ck_assert_ptr_null(gice_peer_ptr(dev[0], 999, 0, 8));                                 /* no such device */
	static uint8_t host_mem[8];
	ck_assert_int_eq(gice_mem_offset(dev[2], host_mem, &off), GICE_ERR_INVALID);
	/* a peer's trigger word written directly */
	gice_counter_t c = ctr(2);
	gice_kctx_t k = {.dev = dev[0]};
	ck_assert_int_eq(gice_peer_trigger_add(&k, gice_device_id(dev[2]), c, 5), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[2], c), 5);
	ck_assert_int_eq(gice_peer_trigger_add(&k, gice_device_id(dev[2]), 0, 1), GICE_ERR_INVALID); /* reserved */
	ck_assert_int_eq(gice_peer_trigger_add(&k, 999, c, 1), GICE_ERR_UNSUPPORTED);
}
END_TEST

START_TEST(get_reads_remote_memory_bit_exact)
{
	gice_completion_t c = ctr(1);
	size_t n = 3 * MIB + 17;

	fill(buf[2] + 1000, n, 99);
	gice_op_t op = {.type = GICE_OP_GET, .conn = conn[1][2], .local = buf[1] + TGT, .bytes = n, .rkey = key[2],
			.roff = 1000, .signal = GICE_NO_COUNTER, .completion = c};
	ck_assert_int_eq(gice_post(dev[1], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], c, GICE_CMP_GE, 1, 20000, NULL), GICE_OK);
	ck_assert_int_eq(memcmp(buf[1] + TGT, buf[2] + 1000, n), 0);
}
END_TEST

#define AMO_PER_BLOCK 500
struct amo_args {
	gice_conn_t c;
	uint64_t rkey;
	gice_completion_t done;
	uint64_t *results; /* device memory of the issuing device */
	int cswap;
};

static void amo_kernel(gice_kctx_t *k, void *a_)
{
	struct amo_args *a = a_;

	for (int i = 0; i < AMO_PER_BLOCK; i++) {
		uint64_t *res = &a->results[gice_block_idx(k) * AMO_PER_BLOCK + i];
		if (a->cswap)
			gice_atomic_cswap(k, a->c, a->rkey, 64, 0, 1000 + gice_block_idx(k), res, a->done);
		else
			gice_atomic_fetch_add(k, a->c, a->rkey, 0, 1, res, a->done);
	}
}

START_TEST(remote_atomics_from_four_devices_under_contention_are_exact)
{
	gice_completion_t done[NDEV];
	uint64_t *word = (uint64_t *)(buf[0] + 0);

	*word = 0;
	for (int i = 0; i < NDEV; i++) {
		done[i] = ctr(i);
		struct amo_args a = {.c = conn[i][0], .rkey = key[0], .done = done[i],
				     .results = (uint64_t *)(buf[i] + TGT)};
		ck_assert_int_eq(gice_launch(str[i], amo_kernel, 4, &a, sizeof(a)), GICE_OK);
	}
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_counter_wait(dev[i], done[i], GICE_CMP_GE, 4 * AMO_PER_BLOCK, 30000, NULL),
				 GICE_OK);
	ck_assert_uint_eq(*word, (uint64_t)NDEV * 4 * AMO_PER_BLOCK);
	/* every old value 0..N-1 was returned exactly once */
	size_t n = (size_t)NDEV * 4 * AMO_PER_BLOCK;
	uint8_t *seen = calloc(n, 1);
	for (int i = 0; i < NDEV; i++)
		for (int j = 0; j < 4 * AMO_PER_BLOCK; j++) {
			uint64_t v = ((uint64_t *)(buf[i] + TGT))[j];
			ck_assert_uint_lt(v, n);
			ck_assert_int_eq(seen[v]++, 0);
		}
	free(seen);

	/* compare-swap 0 → id: exactly one winner sees 0 */
	uint64_t *cw = (uint64_t *)(buf[0] + 64);
	*cw = 0;
	gice_completion_t cd = ctr(1);
	struct amo_args a = {.c = conn[1][0], .rkey = key[0], .done = cd, .results = (uint64_t *)(buf[1] + TGT),
			     .cswap = 1};
	ck_assert_int_eq(gice_launch(str[1], amo_kernel, 4, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], cd, GICE_CMP_GE, 4 * AMO_PER_BLOCK, 30000, NULL), GICE_OK);
	int zeros = 0;
	for (int j = 0; j < 4 * AMO_PER_BLOCK; j++)
		zeros += ((uint64_t *)(buf[1] + TGT))[j] == 0;
	ck_assert_int_eq(zeros, 1);
	ck_assert_uint_ge(*cw, 1000);
	ck_assert_uint_lt(*cw, 1004);
}
END_TEST

/* ---------------------------------------------------------------- sizes, quiet */

START_TEST(sizes_around_the_mtu_and_8mib_arrive_bit_exact)
{
	/* GICE_MTU (16384) is the packet size; a packet carries 16384 - 96 payload bytes */
	const size_t mtu = 16384, pay = 16384 - 96;
	size_t sizes[] = {0, 1, pay - 1, pay, pay + 1, mtu - 1, mtu, mtu + 1, 8 * MIB};
	gice_completion_t c = ctr(0);
	gice_counter_t s = ctr(3);

	fill(buf[0], 8 * MIB, 1234);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(buf[3] + TGT, 0xee, 8 * MIB);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][3], .local = buf[0], .bytes = sizes[i],
				.rkey = key[3], .roff = TGT, .value = i + 1, .signal = s, .completion = c};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(dev[3], s, GICE_CMP_EQ, i + 1, 20000, NULL), GICE_OK);
		ck_assert_msg(memcmp(buf[3] + TGT, buf[0], sizes[i]) == 0, "size %zu differs", sizes[i]);
		if (sizes[i] < 8 * MIB)
			ck_assert_uint_eq(buf[3][TGT + sizes[i]], 0xee); /* nothing past the end */
		ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, i + 1, 20000, NULL), GICE_OK);
	}
}
END_TEST

struct zq_args {
	gice_conn_t c;
	uint64_t rkey;
	gice_counter_t sig;
	int *rc; /* device memory: the kernel's quiet status */
};

static void zero_put_quiet_kernel(gice_kctx_t *k, void *a_)
{
	struct zq_args *a = a_;

	for (int i = 0; i < 100; i++)
		gice_put(k, a->c, a->rkey, TGT, NULL, 0, GICE_NO_COUNTER);
	gice_put_signal(k, a->c, a->rkey, TGT, NULL, 0, a->sig, 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER);
	*a->rc = gice_quiet(k);
}

START_TEST(zero_byte_put_does_not_stall_quiet)
{
	int *rc = (int *)(buf[0] + TGT);
	gice_counter_t s = ctr(1);
	struct zq_args a = {.c = conn[0][1], .rkey = key[1], .sig = s, .rc = rc};

	*rc = 12345;
	ck_assert_int_eq(gice_launch(str[0], zero_put_quiet_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 10000), GICE_OK);
	ck_assert_int_eq(*rc, GICE_OK);
	/* quiet returned after the zero-byte put_signal landed */
	ck_assert_uint_eq(gice_counter_read(dev[1], s), 1);
}
END_TEST

/* ---------------------------------------------------------------- errors */

START_TEST(wrong_key_fails_with_bad_key_and_writes_nothing)
{
	gice_completion_t c = ctr(0);
	gice_counter_state_t st;
	gice_counter_t s = ctr(1);

	memset(buf[1] + TGT, 0x5a, 3 * 4096);
	fill(buf[0], 3 * 4096, 5);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = 3 * 4096,
			.rkey = key[1] ^ 0x1, .roff = TGT, .value = 1, .signal = s, .completion = c};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(gice_counter_get(dev[0], c, &st), GICE_OK);
	ck_assert_uint_eq(st.fail, 1);
	ck_assert_uint_eq(st.value, 0);
	ck_assert_int_eq(st.status, GICE_ERR_BAD_KEY);
	for (size_t i = 0; i < 3 * 4096; i++)
		ck_assert_uint_eq(buf[1][TGT + i], 0x5a);
	ck_assert_uint_eq(gice_counter_read(dev[1], s), 0); /* no signal either */
}
END_TEST

START_TEST(out_of_bounds_destination_fails_and_writes_nothing)
{
	gice_completion_t c = ctr(0);
	gice_counter_state_t st;
	/* last 100 bytes fit, the other 4000 would not: nothing may land */
	memset(buf[1] + BUF_BYTES - 4096, 0x5a, 4096);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = 4100, .rkey = key[1],
			.roff = BUF_BYTES - 100, .signal = GICE_NO_COUNTER, .completion = c};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(gice_counter_get(dev[0], c, &st), GICE_OK);
	ck_assert_int_eq(st.status, GICE_ERR_OUT_OF_BOUNDS);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(buf[1][BUF_BYTES - 4096 + i], 0x5a);
	/* a get past the end fails the same way */
	gice_completion_t c2 = ctr(0);
	gice_op_t g = {.type = GICE_OP_GET, .conn = conn[0][1], .local = buf[0], .bytes = 200, .rkey = key[1],
		       .roff = BUF_BYTES - 100, .signal = GICE_NO_COUNTER, .completion = c2};
	ck_assert_int_eq(gice_post(dev[0], &g), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c2, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_OUT_OF_BOUNDS);
}
END_TEST

START_TEST(put_signal_to_a_bad_signal_counter_fails_and_writes_nothing)
{
	gice_completion_t c = ctr(0);

	memset(buf[1] + TGT, 0x5a, 4096);
	fill(buf[0], 4096, 3);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = 4096, .rkey = key[1],
			.roff = TGT, .value = 1, .signal = 0 /* reserved: not a signal */, .completion = c};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_INVALID);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(buf[1][TGT + i], 0x5a);
}
END_TEST

START_TEST(large_put_with_bad_key_or_bounds_fails_and_writes_nothing)
{
	const size_t n = 256 * 1024; /* above GICE_CT_RNDV_BYTES: a rendezvous read, or packets */
	gice_completion_t c = ctr(0);
	gice_counter_t s = ctr(1);

	memset(buf[1] + TGT, 0x5a, n);
	fill(buf[0], n, 8);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0], .bytes = n, .rkey = key[1] + 1,
			.roff = TGT, .value = 1, .signal = s, .completion = c};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_BAD_KEY);
	gice_counter_reset(dev[0], c);
	op.rkey = key[1];
	op.roff = BUF_BYTES - n + 1;
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_OUT_OF_BOUNDS);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(buf[1][TGT + i], 0x5a);
	ck_assert_uint_eq(gice_counter_read(dev[1], s), 0);
	/* and a good one lands whole */
	gice_counter_reset(dev[0], c);
	op.roff = TGT;
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], s), 1);
	ck_assert_int_eq(memcmp(buf[1] + TGT, buf[0], n), 0);
}
END_TEST

/* More rendezvous puts in flight than the fabric has read slots (64): the target queues the
 * reads, none fails. */
#define MANY_PUTS 300
START_TEST(more_rendezvous_puts_than_read_slots_all_land)
{
	const size_t n = 16 * 1024;
	gice_completion_t c = ctr(0);
	gice_stats_t before, after;

	fill(buf[0], MANY_PUTS * n, 21);
	memset(buf[1] + TGT, 0, MANY_PUTS * n);
	gice_device_stats(dev[0], &before);
	for (int i = 0; i < MANY_PUTS; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = buf[0] + (size_t)i * n, .bytes = n,
				.rkey = key[1], .roff = TGT + (uint64_t)(MANY_PUTS - 1 - i) * n, .signal = GICE_NO_COUNTER,
				.completion = c};
		ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, MANY_PUTS, test_scaled(30000), NULL), GICE_OK);
	for (int i = 0; i < MANY_PUTS; i++)
		ck_assert_msg(!memcmp(buf[1] + TGT + (size_t)(MANY_PUTS - 1 - i) * n, buf[0] + (size_t)i * n, n),
			      "put %d differs", i);
	gice_device_stats(dev[0], &after);
	ck_assert_uint_eq(after.ops_failed, before.ops_failed);
}
END_TEST

START_TEST(unregistered_source_fails_before_sending)
{
	void *p;
	gice_completion_t c = ctr(0);
	gice_stats_t before, after;

	ck_assert_int_eq(gice_mem_alloc(dev[0], 8192, &p), GICE_OK); /* allocated, never registered */
	memset(buf[1] + TGT, 0x5a, 8192);
	gice_device_stats(dev[0], &before);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn[0][1], .local = p, .bytes = 8192, .rkey = key[1],
			.roff = TGT, .signal = GICE_NO_COUNTER, .completion = c};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 1, 5000, NULL), GICE_ERR_UNREGISTERED);
	gice_device_stats(dev[0], &after);
	ck_assert_uint_eq(after.tx_bytes, before.tx_bytes);
	for (size_t i = 0; i < 8192; i++)
		ck_assert_uint_eq(buf[1][TGT + i], 0x5a);
	/* a buffer outside device memory is refused at once */
	static uint8_t host[64];
	op.local = host;
	op.bytes = sizeof(host);
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(gice_mem_free(dev[0], p), GICE_OK);
}
END_TEST

struct wait_args {
	gice_counter_t c;
	int *rc;
	uint64_t *found;
};

static void wait_kernel(gice_kctx_t *k, void *a_)
{
	struct wait_args *a = a_;
	*a->rc = gice_wait_until(k, a->c, GICE_CMP_GE, 5, 50000 /* 50 ms */, a->found);
}

START_TEST(device_wait_times_out_with_timeout_status)
{
	gice_counter_t c = ctr(0);
	int *rc = (int *)(buf[0] + TGT);
	uint64_t *found = (uint64_t *)(buf[0] + TGT + 64);

	*rc = 1;
	*found = 99;
	ck_assert_int_eq(gice_counter_set(dev[0], c, 3), GICE_OK);
	struct wait_args a = {.c = c, .rc = rc, .found = found};
	ck_assert_int_eq(gice_launch(str[0], wait_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 10000), GICE_OK);
	ck_assert_int_eq(*rc, GICE_ERR_TIMED_OUT);
	ck_assert_uint_eq(*found, 3);
	ck_assert_int_eq(gice_counter_wait(dev[0], c, GICE_CMP_GE, 4, 20, NULL), GICE_ERR_TIMED_OUT);
	/* a stream wait that times out fails the stream */
	ck_assert_int_eq(gice_stream_wait_value(str[0], c, GICE_CMP_GE, 4, 20), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 10000), GICE_ERR_TIMED_OUT);
}
END_TEST

static int ncases; /* the cases suite() adds: what a provider that is not here leaves out */
#define ADD(tc, t)                        \
	do {                              \
		tcase_add_test((tc), t); \
		ncases++;                 \
	} while (0)

static Suite *suite(void)
{
	Suite *s = suite_create("gice");
	TCase *tc = tcase_create("e2e");

	ncases = 0;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	ADD(tc, ring_of_four_devices_1000_laps_kernels_only);
	ADD(tc, chained_triggers_cross_three_devices_without_host);
	ADD(tc, equal_thresholds_fire_in_arming_order_and_disarm);
	ADD(tc, get_reads_remote_memory_bit_exact);
	ADD(tc, peer_pointers_load_and_store_on_the_nvlink_plane);
	ADD(tc, triggered_put_is_ordered_with_posted_puts_of_its_connection);
	ADD(tc, remote_atomics_from_four_devices_under_contention_are_exact);
	ADD(tc, sizes_around_the_mtu_and_8mib_arrive_bit_exact);
	ADD(tc, zero_byte_put_does_not_stall_quiet);
	ADD(tc, wrong_key_fails_with_bad_key_and_writes_nothing);
	ADD(tc, out_of_bounds_destination_fails_and_writes_nothing);
	ADD(tc, unregistered_source_fails_before_sending);
	ADD(tc, put_signal_to_a_bad_signal_counter_fails_and_writes_nothing);
	ADD(tc, device_wait_times_out_with_timeout_status);
	ADD(tc, large_put_with_bad_key_or_bounds_fails_and_writes_nothing);
	suite_add_tcase(s, tc);

	/* large messages as MTU packets (rendezvous off) */
	TCase *tp = tcase_create("packets");
	tcase_add_checked_fixture(tp, setup_packets, teardown_packets);
	tcase_set_timeout(tp, 120);
	ADD(tp, sizes_around_the_mtu_and_8mib_arrive_bit_exact);
	ADD(tp, large_put_with_bad_key_or_bounds_fails_and_writes_nothing);
	ADD(tp, ring_of_four_devices_1000_laps_kernels_only);
	ADD(tp, triggered_put_is_ordered_with_posted_puts_of_its_connection);
	suite_add_tcase(s, tp);

	/* no NVLink plane: large puts by the provider's remote reads */
	TCase *tn = tcase_create("net");
	tcase_add_checked_fixture(tn, setup_net, teardown_net);
	tcase_set_timeout(tn, 120);
	ADD(tn, sizes_around_the_mtu_and_8mib_arrive_bit_exact);
	ADD(tn, large_put_with_bad_key_or_bounds_fails_and_writes_nothing);
	ADD(tn, triggered_put_is_ordered_with_posted_puts_of_its_connection);
	ADD(tn, chained_triggers_cross_three_devices_without_host);
	suite_add_tcase(s, tn);

	TCase *tr = tcase_create("net_16k");
	tcase_add_checked_fixture(tr, setup_net_16k, teardown_net_16k);
	tcase_set_timeout(tr, 120);
	ADD(tr, more_rendezvous_puts_than_read_slots_all_land);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	const char *list = getenv("GICE_TEST_PROVIDERS");
	char provs[256];
	int failed = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	srunner_free(srunner_create(suite())); /* counts ncases */
	snprintf(provs, sizeof(provs), "%s", list && *list ? list : "shm,tcp,net");
	for (char *save, *p = strtok_r(provs, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		setenv("GICE_FI_PROVIDER", p, 1);
		gice_device_t *probe;
		gice_init();
		int rc = gice_device_open(NULL, &probe);
		if (rc == GICE_ERR_NOT_FOUND) {
			test_skip_cases(ncases, "provider %s: fi_getinfo finds no such provider here", p);
			gice_finalize();
			continue;
		}
		if (rc) { /* it is here but does not work: that is a failure, not a skip */
			printf("provider %s: gice_device_open failed: %s\n", p, gice_status_name(rc));
			gice_finalize();
			failed++;
			continue;
		}
		gice_device_close(probe);
		gice_finalize();
		printf("provider %s\n", p);
		SRunner *sr = srunner_create(suite());
		srunner_run_all(sr, CK_NORMAL);
		failed += srunner_ntests_failed(sr);
		ran += srunner_ntests_run(sr);
		srunner_free(sr);
	}
	return test_exit_counts(failed, ran);
}
