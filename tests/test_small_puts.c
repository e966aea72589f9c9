/* Description: small puts share a packet (PUTS, ct_link_puts.c; GICE_CT_SMALL_PUTS). Two
 * devices of one process on the network plane (every byte crosses the provider); a kernel on the
 * first issues bursts of 64 put_signals of 0 to 1024 bytes to the second, each adding its index +
 * 1 to a counter there, and waits for their completions.
 * - By default, most of them travel as entries of PUTS packets (tx_small_puts), fewer packets
 *   than puts leave, and each put lands whole at its offset with its signal, over shm and tcp.
 * - Signals to two counters, adds and a set, mixed in one burst: each counter ends at what the
 *   puts' order gives, though the receiver sums runs of adds within a packet.
 * - One put of a burst with a bad key fails alone: its completion records GICE_ERR_BAD_KEY, its
 *   bytes and signal never land, the 63 others do; the receiver sent one NACK.
 * - With packets dropped (GICE_FAULTS drop=0.3, small puts asked for explicitly), lost PUTS packets
 *   are sent again, their entries built again from the puts: every put lands once.
 * - GICE_CT_SMALL_PUTS=0 sends every put its own packet; so does auto while GICE_FAULTS injects
 *   network faults (the injector sees one packet per put, as before).
 * - A value above 65535 (an entry's length field) or not a size fails the open with
 *   GICE_ERR_CONFIG.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_dev.h"
#include "tests/test_util.h"

#define PUTS 64u
#define SLOT 1024u /* bytes of room per put */
#define BUF (PUTS * SLOT)
#define BAD_PUT 17u

static gice_device_t *dev[2];
static uint8_t *buf[2];
static uint64_t key[2];
static gice_conn_t conn; /* dev[0] -> dev[1] */

struct burst {
	gice_counter_t done, bad; /* dev[0]'s: completions; that of the put with a bad key */
	gice_counter_t sig;       /* dev[1]'s: the signals */
	uint32_t round, with_bad;
	_Atomic int rc;
};

static uint32_t put_len(uint32_t j) { return (j * 37u) % (SLOT + 1); }
static uint8_t pattern(uint32_t round, uint32_t j, uint32_t i) { return (uint8_t)(round * 29u + j * 7u + i + 1); }

static void open_pair(const char *provider)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 2, .hbm_bytes = 4 * BUF, .provider = provider};

	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("GICE_PLANE", "net", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < 2; i++)
		test_dev_open(&at, BUF, &dev[i], &buf[i], &key[i]);
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &conn), GICE_OK);
}

static void close_pair(void)
{
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static void burst_kernel(gice_kctx_t *k, void *arg)
{
	struct burst *b = *(struct burst **)arg;
	uint32_t good = 0;

	for (uint32_t j = 0; j < PUTS; j++) {
		int bad = b->with_bad && j == BAD_PUT;
		int r = gice_put_signal(k, conn, bad ? key[1] ^ 0x5a5a0000ull : key[1], (uint64_t)j * SLOT,
					buf[0] + j * SLOT, put_len(j), b->sig, j + 1, GICE_SIGNAL_ADD, bad ? b->bad : b->done);
		if (r) {
			atomic_store(&b->rc, r);
			return;
		}
		good += !bad;
	}
	/* done counts this device's good puts of every burst so far */
	int r = gice_wait_until(k, b->done, GICE_CMP_GE, (uint64_t)b->round * good, 0, NULL);
	if (r)
		atomic_store(&b->rc, r);
}

/* rounds bursts of 64 puts, each waited for; every byte and signal checked after each. Returns
 * the sender's stats. */
static gice_stats_t run_bursts(uint32_t rounds, int with_bad)
{
	struct burst b = {.with_bad = (uint32_t)with_bad}, *bp = &b;
	gice_stream_t *s;
	gice_stats_t st;
	uint64_t sigsum = 0;

	ck_assert_int_eq(gice_counter_alloc(dev[0], &b.done), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &b.bad), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[1], &b.sig), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[0], &s), GICE_OK);
	for (b.round = 1; b.round <= rounds; b.round++) {
		for (uint32_t j = 0; j < PUTS; j++)
			for (uint32_t i = 0; i < SLOT; i++)
				buf[0][j * SLOT + i] = pattern(b.round, j, i);
		atomic_store(&b.rc, GICE_OK);
		ck_assert_int_eq(gice_launch(s, burst_kernel, 1, &bp, sizeof(bp)), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(s, test_scaled(60000)), GICE_OK);
		ck_assert_int_eq(atomic_load(&b.rc), GICE_OK);
		for (uint32_t j = 0; j < PUTS; j++) {
			if (with_bad && j == BAD_PUT)
				continue;
			sigsum += j + 1;
		}
		ck_assert_int_eq(gice_counter_wait(dev[1], b.sig, GICE_CMP_GE, sigsum, (int)test_scaled(10000), NULL),
				 GICE_OK);
		ck_assert_uint_eq(gice_counter_read(dev[1], b.sig), sigsum); /* each signal once */
		for (uint32_t j = 0; j < PUTS; j++)
			for (uint32_t i = 0; i < SLOT; i++) {
				uint8_t want = with_bad && j == BAD_PUT ? 0
					       : i < put_len(j)           ? pattern(b.round, j, i)
					       : 0;
				if (buf[1][j * SLOT + i] != want)
					ck_abort_msg("round %u, put %u of %u B: byte %u is 0x%02x, expected 0x%02x", b.round, j,
						     put_len(j), i, buf[1][j * SLOT + i], want);
			}
	}
	if (with_bad) {
		ck_assert_int_eq(gice_counter_wait(dev[0], b.bad, GICE_CMP_GE, 1, (int)test_scaled(10000), NULL),
				 GICE_ERR_BAD_KEY);
	}
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	fprintf(stderr, "small puts: %u puts: tx_pkts %llu, tx_small_puts %llu, fab_sends %llu, retransmits %llu\n",
		(rounds)*PUTS, (unsigned long long)st.tx_pkts, (unsigned long long)st.tx_small_puts,
		(unsigned long long)st.fab_sends, (unsigned long long)st.retransmits);
	return st;
}

static void shared_over(const char *provider)
{
	open_pair(provider);
	gice_stats_t st = run_bursts(5, 0), rx;
	ck_assert_int_eq(gice_device_stats(dev[1], &rx), GICE_OK);
	/* most puts shared packets: all but the first of a burst can (it leaves at once) */
	ck_assert_uint_ge(st.tx_small_puts, 5 * PUTS / 2);
	ck_assert_uint_lt(st.tx_pkts, 5 * PUTS);
	ck_assert_uint_eq(rx.rx_pkts, st.tx_pkts);
	ck_assert_uint_eq(rx.nacks_sent, 0);
	close_pair();
}

START_TEST(small_puts_share_packets_over_shm) { shared_over("shm"); }
END_TEST

START_TEST(small_puts_share_packets_over_tcp) { shared_over("tcp"); }
END_TEST

START_TEST(a_bad_key_fails_its_put_alone)
{
	gice_stats_t rx;

	open_pair("shm");
	gice_stats_t st = run_bursts(1, 1);
	ck_assert_uint_ge(st.tx_small_puts, PUTS / 2);
	ck_assert_uint_eq(st.ops_failed, 1);
	ck_assert_int_eq(gice_device_stats(dev[1], &rx), GICE_OK);
	ck_assert_uint_eq(rx.nacks_sent, 1);
	close_pair();
}
END_TEST

START_TEST(lost_small_puts_are_sent_again)
{
	/* 3 in 10: of the ~35 PUTS packets of 5 bursts, none lost would be 0.7^35 (4e-6); 1 in 10
	 * left that at 2.5% */
	setenv("GICE_FAULTS", "drop=0.3,seed=5", 1);
	setenv("GICE_CT_SMALL_PUTS", "1024", 1);
	setenv("GICE_RTO_MIN_US", "200", 1);
	open_pair("shm");
	gice_stats_t st = run_bursts(5, 0);
	ck_assert_uint_gt(st.tx_small_puts, 0);
	ck_assert_uint_gt(st.retransmits, 0);
	close_pair();
}
END_TEST

/* One burst of 8-byte puts whose signals mix two counters, adds and a set: j = 40 sets A to
 * 1000, every third put outside 36..44 adds j + 1 to B, the others add 1 to A (a run of adds
 * on each side of the set). The receiver sums a run of adds to
 * one counter within a packet (ct_rx_signals_batch): the runs before the set must land before it,
 * those after it after, and a run must end where another counter's signal comes.
 * That the burst shares packets is made certain, not left to the scheduler: the sender's CT
 * threads are stalled, so that its kernel alone takes its puts to the link (a CT thread woken
 * at each put would send it alone), and so are the receiver's until the whole burst is issued
 * (an ACK back before the next put sends that put at once, as Nagle's algorithm would). */
#define MIXED_SET 40u
struct mixed {
	gice_counter_t done, a, b;
	_Atomic int rc, issued;
};

static int to_counter_b(uint32_t j) { return j % 3 == 0 && (j + 4 < MIXED_SET || j > MIXED_SET + 4); }

static void mixed_kernel(gice_kctx_t *k, void *arg)
{
	struct mixed *m = *(struct mixed **)arg;

	for (uint32_t j = 0; j < PUTS; j++) {
		int set = j == MIXED_SET, to_b = to_counter_b(j);
		int r = gice_put_signal(k, conn, key[1], (uint64_t)j * SLOT, buf[0] + j * SLOT, 8, to_b ? m->b : m->a,
					set ? 1000 : to_b ? j + 1 : 1, set ? 0 : GICE_SIGNAL_ADD, m->done);
		if (r) {
			atomic_store(&m->rc, r);
			atomic_store(&m->issued, 1);
			return;
		}
	}
	atomic_store(&m->issued, 1);
	int r = gice_wait_until(k, m->done, GICE_CMP_GE, PUTS, 0, NULL);
	if (r)
		atomic_store(&m->rc, r);
}

START_TEST(signals_summed_in_a_packet_keep_their_order)
{
	struct mixed m = {0}, *mp = &m;
	uint64_t want_a = 1000, want_b = 0;
	gice_stream_t *s;
	gice_stats_t st, st0;

	setenv("GICE_TIMEOUT_MS", "60000", 1); /* the watchdog stays out of the stalls */
	open_pair("shm");
	/* first a burst with no stall: shm refuses (FI_EAGAIN) the sends to a peer that has made
	 * no progress since its open, which a stalled receiver would not */
	run_bursts(1, 0);
	ck_assert_int_eq(gice_device_stats(dev[0], &st0), GICE_OK);
	ck_assert_int_eq(gice_faults_set(dev[0], "stall_ct=0@0+inf,stall_ct=1@0+inf"), GICE_OK);
	ck_assert_int_eq(gice_faults_set(dev[1], "stall_ct=0@0+inf,stall_ct=1@0+inf"), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &m.done), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[1], &m.a), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[1], &m.b), GICE_OK);
	for (uint32_t j = 0; j < PUTS; j++) {
		if (to_counter_b(j))
			want_b += j + 1;
		else if (j > MIXED_SET)
			want_a++;
	}
	ck_assert_int_eq(gice_stream_create(dev[0], &s), GICE_OK);
	ck_assert_int_eq(gice_launch(s, mixed_kernel, 1, &mp, sizeof(mp)), GICE_OK);
	for (uint64_t ms = 0; !atomic_load(&m.issued); ms++) {
		ck_assert_msg(ms < test_scaled(10000), "the burst was not issued in 10 s");
		usleep(1000);
	}
	/* a stall of a CT replaces the one in force (gice_faults_set): one of 1 ns ends it */
	ck_assert_int_eq(gice_faults_set(dev[1], "stall_ct=0@0+1ns,stall_ct=1@0+1ns"), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(s, test_scaled(60000)), GICE_OK);
	ck_assert_int_eq(atomic_load(&m.rc), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], m.b, GICE_CMP_GE, want_b, (int)test_scaled(10000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(dev[1], m.a, GICE_CMP_GE, want_a, (int)test_scaled(10000), NULL), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[1], m.a), want_a);
	ck_assert_uint_eq(gice_counter_read(dev[1], m.b), want_b);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	ck_assert_int_eq(gice_device_stats(dev[0], &st), GICE_OK);
	fprintf(stderr, "mixed signals: tx_pkts %llu, tx_small_puts %llu\n", (unsigned long long)(st.tx_pkts - st0.tx_pkts),
		(unsigned long long)(st.tx_small_puts - st0.tx_small_puts));
	/* all but the first two share packets: the first goes to an idle peer at once, the second
	 * into the bundle the link corks (Nagle), and the rest join that cork */
	ck_assert_uint_ge(st.tx_small_puts - st0.tx_small_puts, PUTS - 2);
	close_pair();
}
END_TEST

static void each_alone(const char *env, const char *value)
{
	setenv(env, value, 1);
	open_pair("shm");
	gice_stats_t st = run_bursts(2, 0);
	ck_assert_uint_eq(st.tx_small_puts, 0);
	ck_assert_uint_ge(st.tx_pkts, 2 * PUTS);
	close_pair();
}

START_TEST(zero_sends_each_put_alone) { each_alone("GICE_CT_SMALL_PUTS", "0"); }
END_TEST

START_TEST(faults_send_each_put_alone) { each_alone("GICE_FAULTS", "delay_us=1,seed=1"); }
END_TEST

static void refused(const char *value)
{
	gice_device_attr_t at = {.n_sms = 1, .n_cts = 1, .hbm_bytes = 1 << 20};
	gice_device_t *d;

	setenv("GICE_CT_SMALL_PUTS", value, 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&at, &d), GICE_ERR_CONFIG);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

START_TEST(a_size_above_an_entry_is_refused) { refused("65536"); }
END_TEST

START_TEST(a_value_that_is_no_size_is_refused) { refused("many"); }
END_TEST

int main(void)
{
	Suite *s = suite_create("small_puts");
	TCase *tc = tcase_create("puts");

	tcase_set_timeout(tc, test_scaled(120));
	tcase_add_test(tc, small_puts_share_packets_over_shm);
	tcase_add_test(tc, small_puts_share_packets_over_tcp);
	tcase_add_test(tc, a_bad_key_fails_its_put_alone);
	tcase_add_test(tc, signals_summed_in_a_packet_keep_their_order);
	tcase_add_test(tc, lost_small_puts_are_sent_again);
	tcase_add_test(tc, zero_sends_each_put_alone);
	tcase_add_test(tc, faults_send_each_put_alone);
	tcase_add_test(tc, a_size_above_an_entry_is_refused);
	tcase_add_test(tc, a_value_that_is_no_size_is_refused);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
