/* Description: reliability, fault injection, the watchdog and host-driven mode.
 * - 10,000 puts and a 64 MiB exchange both ways under drop 5%, dup 1%, reorder 5%, corrupt 1%
 *   arrive bit-exact, over shm and over raw udp datagrams, with retransmits counted;
 * - failed puts (bad key) under loss complete with exactly GICE_ERR_BAD_KEY, good ones with OK:
 *   a NACK is never overtaken by the ack that covers its put;
 * - a stalled CT is reported within 2x GICE_TIMEOUT_MS and its waiters get GICE_ERR_CT_STALLED;
 *   with GICE_ON_TIMEOUT=fallback the host proxy finishes the work; abort aborts; a stall set
 *   through gice_faults_set delays a put by its length;
 * - across processes: a hung peer is reported within 2x GICE_TIMEOUT_MS and the waiter returns
 *   GICE_ERR_PEER_HUNG; a killed rank is detected by every other rank;
 * - GICE_MODE=host issues a kernel's put only after the kernel has ended (device mode: during);
 * - GICE_STATS=1 prints the rank's fault and retransmission counters at gice_finalize.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. */
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"

#define MIB (1024u * 1024u)
#define FAULTS "drop=0.05,dup=0.01,reorder=0.05,corrupt=0.01,seed=11"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint8_t pat(uint32_t op, size_t i) { return (uint8_t)((op * 2654435761u) >> 13 ^ (uint32_t)(i * 131u + op)); }

/* ---------------------------------------------------------------- one process, two devices */

static gice_device_t *A, *B;
static uint8_t *abuf, *bbuf;
static uint64_t akey, bkey;
static gice_conn_t ab, ba;

static void pair_open(size_t bytes)
{
	gice_device_attr_t at = {.n_sms = 2, .n_cts = 2, .hbm_bytes = bytes + 4 * MIB};
	void *p;

	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&at, &A), GICE_OK);
	ck_assert_int_eq(gice_device_open(&at, &B), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(A, bytes, &p), GICE_OK);
	abuf = p;
	ck_assert_int_eq(gice_mem_alloc(B, bytes, &p), GICE_OK);
	bbuf = p;
	ck_assert_int_eq(gice_mem_register(A, abuf, bytes, &akey), GICE_OK);
	ck_assert_int_eq(gice_mem_register(B, bbuf, bytes, &bkey), GICE_OK);
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &ab), GICE_OK);
	ck_assert_int_eq(gice_conn_open(B, gice_device_id(A), NULL, &ba), GICE_OK);
}

static void pair_close(void)
{
	ck_assert_int_eq(gice_device_close(A), GICE_OK);
	ck_assert_int_eq(gice_device_close(B), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static const char *providers[] = {"shm", "udp"};

static int use_provider(int i)
{
	setenv("GICE_FI_PROVIDER", providers[i], 1);
	setenv("GICE_PLANE", "net", 1);          /* every byte through libfabric */
	setenv("GICE_CT_RNDV_BYTES", "0", 1);    /* large puts as packets, so faults hit payload */
	setenv("GICE_FAULTS", FAULTS, 1);
	setenv("GICE_TIMEOUT_MS", "60000", 1);
	return 1;
}

#define NPUTS 10000
#define SLOT 4096u

/* 10,000 puts of 1..4096 bytes, each to its own slot, with an added signal: all arrive
 * bit-exact, the signal counts exactly 10,000, and the faults and retransmits were real. */
START_TEST(test_put_storm)
{
	gice_counter_t sig, done;
	gice_stats_t sa, sb;

	use_provider(_i);
	pair_open((size_t)NPUTS * SLOT);
	ck_assert_int_eq(gice_counter_alloc(B, &sig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	for (uint32_t i = 0; i < NPUTS; i++) {
		size_t len = 1 + (i * 7919u) % SLOT;
		for (size_t j = 0; j < len; j++)
			abuf[(size_t)i * SLOT + j] = pat(i, j);
	}
	memset(bbuf, 0, (size_t)NPUTS * SLOT);
	uint64_t t0 = now_ms();
	for (uint32_t i = 0; i < NPUTS; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf + (size_t)i * SLOT,
				.bytes = 1 + (i * 7919u) % SLOT, .rkey = bkey, .roff = (uint64_t)i * SLOT, .value = 1,
				.signal = sig, .signal_flags = GICE_SIGNAL_ADD, .completion = done};
		ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	}
	uint64_t found = 0;
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, NPUTS, test_scaled(120000), &found), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, sig, GICE_CMP_GE, NPUTS, test_scaled(120000), &found), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(B, sig), NPUTS);
	for (uint32_t i = 0; i < NPUTS; i++) {
		size_t len = 1 + (i * 7919u) % SLOT;
		for (size_t j = 0; j < SLOT; j++) {
			uint8_t want = j < len ? pat(i, j) : 0;
			if (bbuf[(size_t)i * SLOT + j] != want)
				ck_abort_msg("put %u byte %zu: expected 0x%02x, found 0x%02x", i, j, want,
					     bbuf[(size_t)i * SLOT + j]);
		}
	}
	ck_assert_int_eq(gice_device_stats(A, &sa), GICE_OK);
	ck_assert_int_eq(gice_device_stats(B, &sb), GICE_OK);
	fprintf(stderr, "put storm over %s: %d puts in %llu ms; A: retransmits %llu (rto %llu fast %llu), "
		"dropped %llu dup %llu reordered %llu corrupted %llu; B: csum bad %llu, rx dup %llu\n",
		gice_device_provider(A), NPUTS, (unsigned long long)(now_ms() - t0),
		(unsigned long long)sa.retransmits, (unsigned long long)sa.rto_expired,
		(unsigned long long)sa.fast_retransmits, (unsigned long long)sa.fault_drops,
		(unsigned long long)sa.fault_dups, (unsigned long long)sa.fault_reorders,
		(unsigned long long)sa.fault_corrupts, (unsigned long long)sb.rx_csum_bad, (unsigned long long)sb.rx_dup);
	ck_assert_uint_gt(sa.fault_drops, 0);
	ck_assert_uint_gt(sa.fault_dups, 0);
	ck_assert_uint_gt(sa.fault_reorders, 0);
	ck_assert_uint_gt(sa.fault_corrupts, 0);
	ck_assert_uint_gt(sa.retransmits, 0);
	ck_assert_uint_gt(sb.rx_csum_bad, 0);
	ck_assert_uint_gt(sb.rx_dup, 0);
	ck_assert_uint_eq(sa.ops_failed, 0);
	pair_close();
}
END_TEST

/* 64 MiB each way at once, under the same faults: both arrive bit-exact. */
START_TEST(test_exchange_64m)
{
	const size_t n = 64 * MIB;
	gice_counter_t sa_sig, sb_sig, ca, cb;

	use_provider(_i);
	pair_open(2 * n);
	for (size_t j = 0; j < n; j++) {
		abuf[j] = pat(1, j);
		bbuf[j] = pat(2, j);
	}
	memset(abuf + n, 0, n);
	memset(bbuf + n, 0, n);
	ck_assert_int_eq(gice_counter_alloc(A, &sa_sig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &sb_sig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &ca), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &cb), GICE_OK);
	gice_op_t to_b = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = n, .rkey = bkey, .roff = n,
			  .value = 7, .signal = sb_sig, .completion = ca};
	gice_op_t to_a = {.type = GICE_OP_PUT, .conn = ba, .local = bbuf, .bytes = n, .rkey = akey, .roff = n,
			  .value = 9, .signal = sa_sig, .completion = cb};
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_post(A, &to_b), GICE_OK);
	ck_assert_int_eq(gice_post(B, &to_a), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, sb_sig, GICE_CMP_EQ, 7, test_scaled(120000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, sa_sig, GICE_CMP_EQ, 9, test_scaled(120000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, ca, GICE_CMP_GE, 1, test_scaled(120000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, cb, GICE_CMP_GE, 1, test_scaled(120000), NULL), GICE_OK);
	uint64_t ms = now_ms() - t0;
	for (size_t j = 0; j < n; j++) {
		if (bbuf[n + j] != pat(1, j))
			ck_abort_msg("A->B byte %zu: expected 0x%02x, found 0x%02x", j, pat(1, j), bbuf[n + j]);
		if (abuf[n + j] != pat(2, j))
			ck_abort_msg("B->A byte %zu: expected 0x%02x, found 0x%02x", j, pat(2, j), abuf[n + j]);
	}
	gice_stats_t sa;
	ck_assert_int_eq(gice_device_stats(A, &sa), GICE_OK);
	fprintf(stderr, "64 MiB exchange over %s: %llu ms, A retransmits %llu, dropped %llu, corrupted %llu\n",
		gice_device_provider(A), (unsigned long long)ms, (unsigned long long)sa.retransmits,
		(unsigned long long)sa.fault_drops, (unsigned long long)sa.fault_corrupts);
	ck_assert_uint_gt(sa.retransmits, 0);
	pair_close();
}
END_TEST

/* Puts to a wrong key and to a right one, interleaved, under loss: each completes with its own
 * exact status — the ACK that covers a failed put never completes it before its NACK. */
START_TEST(test_nack_under_loss)
{
	gice_counter_t good, bad;
	gice_counter_state_t st;

	use_provider(_i);
	setenv("GICE_FAULTS", "drop=0.1,reorder=0.1,seed=5", 1);
	setenv("GICE_LOG_LEVEL", "off", 1); /* 200 expected BAD_KEY errors; read at the first log call */
	pair_open(MIB);
	ck_assert_int_eq(gice_counter_alloc(A, &good), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &bad), GICE_OK);
	for (int i = 0; i < 400; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = 64, .rkey = (i & 1) ? bkey ^ 1 : bkey,
				.roff = 0, .signal = GICE_NO_COUNTER, .completion = (i & 1) ? bad : good};
		ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	}
	/* quiet reports the first failure since the last quiet, once */
	ck_assert_int_eq(gice_device_quiet(A, test_scaled(60000)), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(gice_device_quiet(A, test_scaled(60000)), GICE_OK);
	ck_assert_int_eq(gice_counter_get(A, good, &st), GICE_OK);
	ck_assert_uint_eq(st.value, 200);
	ck_assert_uint_eq(st.fail, 0);
	ck_assert_int_eq(gice_counter_get(A, bad, &st), GICE_OK);
	ck_assert_uint_eq(st.value, 0);
	ck_assert_uint_eq(st.fail, 200);
	ck_assert_int_eq(st.status, GICE_ERR_BAD_KEY);
	pair_close();
}
END_TEST

/* A device closes while the injector holds delayed packets of its peer for it (same process,
 * shm): they are dropped, not sent to the closed endpoint, and its peer's operations to it fail
 * with GICE_ERR_PEER_DEAD. */
START_TEST(test_close_with_held_packets)
{
	gice_counter_t done;
	gice_counter_state_t st;

	setenv("GICE_FI_PROVIDER", "shm", 1);
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_FAULTS", "delay_us=20000,seed=4", 1);
	pair_open(MIB);
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	for (int i = 0; i < 50; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = 1000, .rkey = bkey,
				.signal = GICE_NO_COUNTER, .completion = done};
		ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	}
	usleep(5000); /* A's CT has sent them into the injector, which holds them up to 20 ms */
	ck_assert_int_eq(gice_device_close(B), GICE_OK);
	usleep(40000); /* A's CT keeps polling: nothing may reach B's closed endpoint */
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 50, test_scaled(2000), NULL), GICE_ERR_PEER_DEAD);
	/* the wait ends at the first failure; the others are being recorded (1 s, scaled) */
	for (uint64_t i = 0; i < test_scaled(100); i++) {
		ck_assert_int_eq(gice_counter_get(A, done, &st), GICE_OK);
		if (st.value + st.fail == 50)
			break;
		usleep(10000);
	}
	ck_assert_uint_eq(st.value + st.fail, 50);
	ck_assert_int_eq(st.status, GICE_ERR_PEER_DEAD);
	ck_assert_int_eq(gice_device_close(A), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}
END_TEST

/* GICE_STATS=1: gice_finalize prints the rank's counters, and they are the API's. */
START_TEST(test_stats_at_finalize)
{
	char path[] = "/tmp/gice-stats-XXXXXX";
	int fd = mkstemp(path);
	gice_stats_t sa, sb;

	ck_assert_int_ge(fd, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		gice_counter_t done;
		dup2(fd, 2);
		use_provider(0);
		setenv("GICE_FAULTS", "drop=0.2,seed=3", 1);
		setenv("GICE_STATS", "1", 1);
		pair_open(MIB);
		gice_counter_alloc(A, &done);
		for (int i = 0; i < 200; i++) {
			gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = 512, .rkey = bkey,
					.signal = GICE_NO_COUNTER, .completion = done};
			gice_post(A, &op);
		}
		if (gice_counter_wait(A, done, GICE_CMP_GE, 200, test_scaled(30000), NULL))
			_exit(2);
		gice_device_stats(A, &sa);
		gice_device_stats(B, &sb);
		/* what the line must say: the sums over both devices */
		fprintf(stderr, "expect: faults dropped %llu\n", (unsigned long long)(sa.fault_drops + sb.fault_drops));
		gice_device_close(A);
		gice_device_close(B);
		gice_finalize();
		_exit(0);
	}
	int w;
	ck_assert_int_eq(waitpid(pid, &w, 0), pid);
	ck_assert(WIFEXITED(w) && WEXITSTATUS(w) == 0);
	char buf[16384] = {0};
	ck_assert_int_gt(pread(fd, buf, sizeof(buf) - 1, 0), 0);
	close(fd);
	unlink(path);
	char *line = strstr(buf, "gice stats: rank 0:");
	char *exp = strstr(buf, "expect: faults dropped ");
	ck_assert_msg(line && exp, "output: %s", buf);
	unsigned long long want = strtoull(exp + strlen("expect: faults dropped "), NULL, 10), got = 0, retx = 0;
	/* "name value" pairs named as gice_stats_t's fields (GICE_STATS_LIST) */
	char *f = strstr(line, " fault_drops "), *r = strstr(line, " retransmits ");
	ck_assert_msg(f && r, "line: %s", line);
	got = strtoull(f + strlen(" fault_drops "), NULL, 10);
	retx = strtoull(r + strlen(" retransmits "), NULL, 10);
	/* the line is printed after the last packets (acks of the close) went out: at least */
	ck_assert_msg(got >= want, "fault_drops %llu in the line, %llu expected; output: %s", got, want, buf);
	ck_assert_uint_gt(want, 0);
	ck_assert_uint_gt(retx, 0);
}
END_TEST

/* ---------------------------------------------------------------- the watchdog, one process */

static struct {
	_Atomic int n, ready, status, fallback;
	_Atomic uint32_t ct, peer, device;
	char msg[700];
} ev;

static void on_error(const gice_error_info_t *info, void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&ev.n, 1) == 0) {
		atomic_store(&ev.status, info->status);
		atomic_store(&ev.fallback, info->fallback);
		atomic_store(&ev.ct, info->ct);
		atomic_store(&ev.peer, info->peer);
		atomic_store(&ev.device, info->device);
		snprintf(ev.msg, sizeof(ev.msg), "%s", info->message);
		atomic_store_explicit(&ev.ready, 1, memory_order_release); /* publishes the above */
	}
}

/* Wait (up to 1 s, scaled) for the first event: the callback runs on the watchdog thread after
 * the operations involved have been failed or taken over. */
static int ev_wait(void)
{
	for (uint64_t i = 0; i < test_scaled(100) && !atomic_load_explicit(&ev.ready, memory_order_acquire); i++)
		usleep(10000);
	return atomic_load_explicit(&ev.ready, memory_order_acquire);
}

/* CT stall_ct stalls from the start for good; a put on a connection of that CT. */
static void stall_setup(const char *stall, const char *on_timeout)
{
	setenv("GICE_TIMEOUT_MS", "400", 1);
	setenv("GICE_FAULTS", stall, 1);
	setenv("GICE_ON_TIMEOUT", on_timeout, 1);
	pair_open(MIB);
	ck_assert_int_eq(gice_set_error_callback(on_error, NULL), GICE_OK);
}

/* A stalled CT 1 (it runs connection 1's requests): the put's waiter gets
 * GICE_ERR_CT_STALLED within 2x GICE_TIMEOUT_MS, quiet reports it too, and the diagnostic
 * names the device, the CT and the requests queued. */
START_TEST(test_stall_error)
{
	gice_conn_t c1;
	gice_counter_t done;
	uint64_t found = 99;

	stall_setup("stall_ct=1@0+inf", "error");
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &c1), GICE_OK);
	ck_assert_uint_eq(c1 % 2, 1); /* conn % n_cts: CT 1 */
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = c1, .local = abuf, .bytes = 100, .rkey = bkey,
			.signal = GICE_NO_COUNTER, .completion = done};
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 1, test_scaled(5000), &found), GICE_ERR_CT_STALLED);
	uint64_t ms = now_ms() - t0;
	ck_assert_uint_eq(found, 0);
	ck_assert_uint_lt(ms, test_scaled(800));
	ck_assert_int_eq(gice_device_quiet(A, test_scaled(1000)), GICE_ERR_CT_STALLED);
	ck_assert(ev_wait());
	ck_assert_int_eq(atomic_load(&ev.status), GICE_ERR_CT_STALLED);
	ck_assert_uint_eq(atomic_load(&ev.ct), 1);
	ck_assert_int_eq(atomic_load(&ev.fallback), 0);
	ck_assert_msg(strstr(ev.msg, "CT 1 stalled") && strstr(ev.msg, "1 request(s) queued") &&
			      strstr(ev.msg, "GICE_ERR_CT_STALLED"),
		      "diagnostic: %s", ev.msg);
	/* and names the operation and the counter its waiter watches */
	char want[96];
	snprintf(want, sizeof(want), "oldest: put of 100 B on connection %u, completion counter %u expected 1 found 0",
		 (unsigned)c1, (unsigned)done);
	ck_assert_msg(strstr(ev.msg, want), "diagnostic: %s (wanted \"%s\")", ev.msg, want);
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(A, &st), GICE_OK);
	ck_assert_uint_ge(st.ct_stalls, 1);
	ck_assert_uint_eq(st.ops_failed, 1);
	fprintf(stderr, "stall reported after %llu ms: %s\n", (unsigned long long)ms, ev.msg);
	pair_close();
}
END_TEST

/* The same stall under GICE_ON_TIMEOUT=fallback, of CT 1 and of CT 0 (the link): the host
 * proxy issues the operations and they complete with the data in place. */
START_TEST(test_stall_fallback)
{
	const char *spec = _i == 0 ? "stall_ct=1@0+inf" : "stall_ct=0@0+inf";
	gice_conn_t c1;
	gice_counter_t done, sig;

	stall_setup(spec, "fallback");
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &c1), GICE_OK);
	gice_conn_t c = _i == 0 ? c1 : ab;
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &sig), GICE_OK);
	for (int i = 0; i < 4096; i++)
		abuf[i] = (uint8_t)(i * 3 + 1);
	uint64_t t0 = now_ms();
	for (int i = 0; i < 16; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = abuf + 256 * i, .bytes = 256, .rkey = bkey,
				.roff = 256u * (unsigned)i, .value = 1, .signal = sig, .signal_flags = GICE_SIGNAL_ADD,
				.completion = done};
		ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	}
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 16, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, sig, GICE_CMP_GE, 16, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(memcmp(abuf, bbuf, 4096), 0);
	ck_assert_uint_lt(now_ms() - t0, test_scaled(800));
	ck_assert(ev_wait());
	ck_assert_int_eq(atomic_load(&ev.status), GICE_ERR_CT_STALLED);
	ck_assert_int_eq(atomic_load(&ev.fallback), 1);
	ck_assert_msg(strstr(ev.msg, "fallback"), "diagnostic: %s", ev.msg);
	gice_stats_t st;
	ck_assert_int_eq(gice_device_stats(A, &st), GICE_OK);
	ck_assert_uint_ge(st.fallback_ops, 16);
	ck_assert_uint_eq(st.ops_failed, 0);
	fprintf(stderr, "fallback: %s\n", ev.msg);
	pair_close();
}
END_TEST

/* gice_faults_set stalls a CT from now: a put on it waits the stall out (shorter than the
 * watchdog's half timeout: no event) and completes; bad specs get exact errors. */
START_TEST(test_api_stall)
{
	gice_conn_t c1;
	gice_counter_t done;

	setenv("GICE_TIMEOUT_MS", "2000", 1);
	pair_open(MIB);
	ck_assert_int_eq(gice_set_error_callback(on_error, NULL), GICE_OK);
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &c1), GICE_OK);
	ck_assert_uint_eq(c1 % 2, 1);
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	ck_assert_int_eq(gice_faults_set(A, "stall_ct=9@0+1ms"), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_faults_set(A, "stall=1"), GICE_ERR_CONFIG);
	ck_assert_int_eq(gice_faults_set(A, "stall_ct=1@0+300ms"), GICE_OK);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = c1, .local = abuf, .bytes = 100, .rkey = bkey,
			.signal = GICE_NO_COUNTER, .completion = done};
	uint64_t t0 = now_ms();
	ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	uint64_t ms = now_ms() - t0;
	ck_assert_msg(ms >= 250 && ms < test_scaled(1000), "the put completed after %llu ms", (unsigned long long)ms);
	ck_assert_int_eq(atomic_load(&ev.n), 0);
	pair_close();
}
END_TEST

/* GICE_ON_TIMEOUT=abort: the process aborts with the diagnostic. */
START_TEST(test_stall_abort)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		gice_conn_t c1;
		stall_setup("stall_ct=1@0+inf", "abort");
		gice_conn_open(A, gice_device_id(B), NULL, &c1);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c1, .local = abuf, .bytes = 8, .rkey = bkey,
				.signal = GICE_NO_COUNTER, .completion = GICE_NO_COUNTER};
		gice_post(A, &op);
		sleep(5);
		_exit(0);
	}
	int w;
	ck_assert_int_eq(waitpid(pid, &w, 0), pid);
	fab_shm_remove((int)pid, 0);
	ck_assert(WIFSIGNALED(w));
	ck_assert_int_eq(WTERMSIG(w), SIGABRT);
}
END_TEST

/* ---------------------------------------------------------------- host-driven mode */

static _Atomic uint64_t kernel_end_ns;

struct put_args {
	gice_conn_t conn;
	uint64_t key;
	uint8_t *src;
	gice_counter_t sig;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_then_compute(gice_kctx_t *k, void *arg)
{
	struct put_args *a = arg;

	gice_put_signal(k, a->conn, a->key, 0, a->src, 64, a->sig, 1, GICE_SIGNAL_SET, GICE_NO_COUNTER);
	uint64_t until = mono_ns() + 100000000ull; /* 100 ms of "compute" after the put */
	while (mono_ns() < until)
		;
	atomic_store(&kernel_end_ns, mono_ns());
}

/* The put's signal lands at the target during the kernel in device mode, after its end in host
 * mode (the host proxy issues it once the kernel has completed). */
START_TEST(test_host_mode)
{
	gice_stream_t *s;
	gice_counter_t sig;
	gice_counter_state_t st;

	setenv("GICE_MODE", _i ? "host" : "device", 1);
	setenv("GICE_PLANE", "net", 1);
	pair_open(MIB);
	ck_assert_int_eq(gice_counter_alloc(B, &sig), GICE_OK);
	ck_assert_int_eq(gice_stream_create(A, &s), GICE_OK);
	memset(abuf, 0x5a, 64);
	struct put_args a = {.conn = ab, .key = bkey, .src = abuf, .sig = sig};
	ck_assert_int_eq(gice_launch(s, put_then_compute, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, sig, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(s, test_scaled(5000)), GICE_OK);
	ck_assert_int_eq(gice_counter_get(B, sig, &st), GICE_OK);
	ck_assert_int_eq(bbuf[63], 0x5a);
	uint64_t end = atomic_load(&kernel_end_ns);
	if (_i)
		ck_assert_msg(st.ts_ns > end, "host mode: the signal landed %lld us before the kernel ended",
			      (long long)(end - st.ts_ns) / 1000);
	else
		ck_assert_msg(st.ts_ns < end, "device mode: the signal landed only %lld us after the kernel ended",
			      (long long)(st.ts_ns - end) / 1000);
	ck_assert_int_eq(gice_stream_destroy(s), GICE_OK);
	pair_close();
}
END_TEST

/* ---------------------------------------------------------------- across processes */

/* The environment of the ranks of the tests below: faults, a 500 ms timeout (scaled: under
 * TSan three ranks on 2 cores went silent for over 500 ms before the kill of test_killed_rank,
 * their heartbeats starved, and took each other for hung: 2 runs of 3, before and after
 * 2026-12-05), every byte through libfabric. */
static const char *const *job_env(const char *faults)
{
	static char f[128], t[48];
	static const char *env[] = {f, t, "GICE_PLANE=net", NULL};

	snprintf(f, sizeof(f), "GICE_FAULTS=%s", faults);
	snprintf(t, sizeof(t), "GICE_TIMEOUT_MS=%llu", (unsigned long long)test_scaled(500));
	return env;
}

struct shared {
	uint64_t key;
	uint32_t sig, pad;
};

/* rank 1 hangs (hang_rank=1@1s: its CTs and link stop, no heartbeats; late enough that a slow
 * start under a sanitizer is over); rank 0 puts to it 1.1 s after its start: the put's waiter
 * gets GICE_ERR_PEER_HUNG (its process is alive: hung, not dead) within 2x GICE_TIMEOUT_MS (1 s,
 * scaled). */
static int hang_rank_fn(int rank, int size)
{
	gice_device_t *d;
	void *p;
	struct shared me, all[2];
	gice_counter_t done;

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	uint64_t t_open = now_ms(); /* fault times count from the end of the open */
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 1) {
		/* hung: our own wait for data that never comes times out, it does not hang */
		int rc = gice_counter_wait(d, me.sig, GICE_CMP_GE, 1, 2500, NULL);
		FAILIF(rc != GICE_ERR_TIMED_OUT, "hung rank's wait: %s", gice_status_name(rc));
	} else {
		gice_conn_t c;
		gice_counter_state_t cs;
		FAILIF(gice_conn_open(d, gice_device_id_of(1, 0), NULL, &c), "conn");
		while (now_ms() - t_open < 1100)
			usleep(10000);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[1].key,
				.signal = GICE_NO_COUNTER, .completion = done};
		uint64_t t0 = now_ms();
		FAILIF(gice_post(d, &op), "post");
		int rc = gice_counter_wait(d, done, GICE_CMP_GE, 1, test_scaled(3000), NULL);
		uint64_t ms = now_ms() - t0;
		fprintf(stderr, "rank 0: put to the hung rank ended after %llu ms: %s\n", (unsigned long long)ms,
			gice_status_name(rc));
		FAILIF(rc != GICE_ERR_PEER_HUNG, "waiter got %s", gice_status_name(rc));
		FAILIF(ms >= test_scaled(1000), "reported after %llu ms, not within 2x GICE_TIMEOUT_MS", (unsigned long long)ms);
		FAILIF(gice_counter_get(d, done, &cs) || cs.fail != 1, "failure not recorded");
		gice_stats_t st;
		FAILIF(gice_device_stats(d, &st) || st.peers_dead != 1, "peers_dead %llu", (unsigned long long)st.peers_dead);
	}
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_hung_peer)
{
	int st[2];

	run_job(2, 2, hang_rank_fn, _i ? "tcp" : "shm", job_env("hang_rank=1@1s"), st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
}
END_TEST

static _Atomic uint64_t dead_seen_ms;
static _Atomic uint32_t dead_peer = UINT32_MAX;

static void on_dead(const gice_error_info_t *info, void *arg)
{
	(void)arg;
	if (info->status == GICE_ERR_PEER_DEAD && atomic_load(&dead_peer) == UINT32_MAX) {
		/* the time first: the waiter reads it once it sees the peer (seq_cst stores) */
		atomic_store(&dead_seen_ms, now_ms());
		atomic_store(&dead_peer, info->peer);
	}
}

/* kill_rank=2@1500ms: ranks 0 and 1 each learn through the error callback, within 2x
 * GICE_TIMEOUT_MS of the kill, that device 2 is dead. */
static int kill_rank_fn(int rank, int size)
{
	gice_device_t *d;

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_set_error_callback(on_dead, NULL), "callback");
	FAILIF(gice_device_open(NULL, &d), "open");
	uint64_t t0 = now_ms(); /* fault times count from the end of the open */
	FAILIF(gice_barrier(), "barrier");
	if (rank == 2) {
		sleep(10); /* killed at 1500 ms */
		return 3;
	}
	while (atomic_load(&dead_peer) == UINT32_MAX && now_ms() - t0 < test_scaled(4000))
		usleep(10000);
	uint32_t peer = atomic_load(&dead_peer);
	uint64_t after = atomic_load(&dead_seen_ms) - t0;
	fprintf(stderr, "rank %d: peer %u declared dead %llu ms after start (killed at 1500 ms)\n", rank, peer,
		(unsigned long long)after);
	FAILIF(peer != gice_device_id_of(2, 0), "dead peer %u", peer);
	FAILIF(after < 1500 || after > 1500 + test_scaled(1000), "detected %llu ms after start", (unsigned long long)after);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_killed_rank)
{
	int st[3];

	run_job(3, 3, kill_rank_fn, _i ? "tcp" : "shm", job_env("kill_rank=2@1500ms"), st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
	ck_assert_int_eq(st[2], 128 + SIGKILL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("reliability");
	TCase *tc = tcase_create("faults");

	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, test_put_storm, 0, 2);
	tcase_add_loop_test(tc, test_exchange_64m, 0, 2);
	tcase_add_loop_test(tc, test_nack_under_loss, 0, 2);
	tcase_add_test(tc, test_stats_at_finalize);
	tcase_add_test(tc, test_close_with_held_packets);
	suite_add_tcase(s, tc);
	tc = tcase_create("watchdog");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_stall_error);
	tcase_add_loop_test(tc, test_stall_fallback, 0, 2);
	tcase_add_test(tc, test_stall_abort);
	tcase_add_test(tc, test_api_stall);
	tcase_add_loop_test(tc, test_hung_peer, 0, 2);
	tcase_add_loop_test(tc, test_killed_rank, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("mode");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_host_mode, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
