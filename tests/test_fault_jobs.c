/* Description: fault targeting (issue 14) in gice jobs of forked ranks (tests/test_job.h): a
 * lossy link is blamed on the right peer by the per-peer counts, every link has round-trip
 * samples and the lossy one none from retransmitted packets (Karn's rule), a partition from a scenario file
 * heals and traffic resumes, the same seed gives the same counts three times, rank 0 kills rank 2
 * and hangs rank 1 with gice_faults_set, faults switched on at run time on one rank leave the job
 * correct, and header corruption without CRC ends in a named error. The packet-level forms, on
 * bare endpoints: tests/test_fault_target.c. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/gice.h"
#include "emu/common/faults.h"
#include "emu/ct_engine/ct_engine.h"
#include "emu/ct_engine/ct_proto.h"
#include "fabric/fab_fault.h"
#include "tests/test_job.h"

#define MIB (1024u * 1024u)

static uint64_t now_ms(void) { return gice_now_ns() / 1000000; }

struct shared {
	uint64_t key;
	uint32_t sig, pad;
};

struct tally {
	uint64_t tx[4], rx[4], drops[4], retx[4];
	uint64_t rtt_n[4], karn[4], srtt[4], rtt_min[4], rtt_max[4]; /* the link's round trip */
};

/* Every rank puts n 64-byte messages to every other (each waited), then the ranks swap their
 * per-peer counts; rank r writes its tally to file.r when file is set. */
static int puts_rank(int rank, int size, int n, const char *file)
{
	gice_device_t *d;
	void *p;
	struct shared me, all[4];
	struct tally t = {0}, every[4];
	gice_counter_t done;

	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	uint64_t k = 0;
	for (int r = 0; r < size; r++) {
		gice_conn_t c;
		if (r == rank)
			continue;
		FAILIF(gice_conn_open(d, gice_device_id_of((uint32_t)r, 0), NULL, &c), "conn");
		for (int i = 0; i < n; i++) {
			gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[r].key,
					.signal = GICE_NO_COUNTER, .completion = done};
			FAILIF(gice_post(d, &op), "post");
			int rc = gice_counter_wait(d, done, GICE_CMP_GE, ++k, 20000, NULL);
			FAILIF(rc, "put %d to rank %d: %s", i, r, gice_status_name(rc));
		}
	}
	FAILIF(gice_allgather(&me, sizeof(me), all), "barrier"); /* every put of every rank has landed */
	for (int r = 0; r < size; r++) {
		gice_peer_stats_t ps;
		FAILIF(gice_device_peer_stats(d, gice_device_id_of((uint32_t)r, 0), &ps), "peer stats");
		t.tx[r] = ps.tx_pkts;
		t.rx[r] = ps.rx_pkts;
		t.drops[r] = ps.fault_drops;
		t.retx[r] = ps.retransmits;
		t.rtt_n[r] = ps.rtt_samples;
		t.karn[r] = ps.rtt_karn_skips;
		t.srtt[r] = ps.srtt_ns;
		t.rtt_min[r] = ps.rtt_min_ns;
		t.rtt_max[r] = ps.rtt_max_ns;
	}
	FAILIF(gice_allgather(&t, sizeof(t), every), "tallies");
	for (int r = 0; r < size; r++) /* counted the same way at both ends */
		FAILIF(every[r].tx[rank] != t.rx[r], "rank %d sent %llu packets here, %llu arrived", r,
		       (unsigned long long)every[r].tx[rank], (unsigned long long)t.rx[r]);
	if (file) {
		char path[256];
		snprintf(path, sizeof(path), "%s.%d", file, rank);
		FILE *fp = fopen(path, "w");
		FAILIF(!fp || fwrite(&t, sizeof(t), 1, fp) != 1, "write %s", path);
		fclose(fp);
	}
	gice_device_close(d);
	gice_finalize();
	return 0;
}

static const char *tally_file;
static int puts_rank_100(int rank, int size) { return puts_rank(rank, size, 100, tally_file); }

static struct tally read_tally(const char *file, int rank)
{
	char path[256];
	struct tally t;
	FILE *fp;

	snprintf(path, sizeof(path), "%s.%d", file, rank);
	fp = fopen(path, "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fread(&t, sizeof(t), 1, fp), 1);
	fclose(fp);
	unlink(path);
	return t;
}

/* puts_rank_100 on 3 ranks over shm under env: the exit statuses in st, rank 0's stderr in text
 * (len bytes), every rank's tally in t. */
static void puts_job(const char *const *env, int st[3], char *text, size_t len, struct tally t[3])
{
	char file[] = "/tmp/gice-ft-tally-XXXXXX", err[] = "/tmp/gice-ft-err-XXXXXX";
	int fd = mkstemp(file), efd = mkstemp(err);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(efd, 0);
	close(fd);
	tally_file = file;
	run_job(3, 3, puts_rank_100, "shm", env, st, err);
	ssize_t n = pread(efd, text, len - 1, 0);
	close(efd);
	unlink(err);
	text[n > 0 ? n : 0] = 0;
	for (int r = 0; r < 3; r++) {
		ck_assert_msg(st[r] == 0, "rank %d exited %d; rank 0 said: %s", r, st[r], text);
		t[r] = read_tally(file, r);
	}
	unlink(file);
}

/* link=0->1 at 20%: rank 0 blames peer 1 (drops, retransmits) and nobody else; ranks 1 and 2
 * inject nothing; every put lands. */
START_TEST(test_job_lossy_link_blamed)
{
	static const char *const env[] = {"GICE_FAULTS=drop=0.2,link=0->1", "GICE_PLANE=net",
					  "GICE_TIMEOUT_MS=5000", "GICE_STATS=1", NULL};
	char text[16384];
	int st[3];
	struct tally t[3];

	puts_job(env, st, text, sizeof(text), t);
	/* GICE_STATS=1: rank 0's line for peer 1 shows the drops, the one for peer 2 none */
	const char *l1 = strstr(text, "gice peer stats: rank 0: device 0 peer 1 (rank 1): tx_pkts ");
	const char *l2 = strstr(text, "gice peer stats: rank 0: device 0 peer 2 (rank 2): tx_pkts ");
	ck_assert_msg(l1 && l2, "no per-peer lines in: %s", text);
	unsigned long long d1 = 99, d2 = 99;
	ck_assert_int_eq(sscanf(strstr(l1, " fault_drops "), " fault_drops %llu", &d1), 1);
	ck_assert_int_eq(sscanf(strstr(l2, " fault_drops "), " fault_drops %llu", &d2), 1);
	ck_assert_uint_gt(d1, 0);
	ck_assert_uint_eq(d2, 0);
	printf("lossy link 0->1: rank 0 dropped %llu to peer 1 (%llu retransmits), %llu to peer 2\n",
	       (unsigned long long)t[0].drops[1], (unsigned long long)t[0].retx[1], (unsigned long long)t[0].drops[2]);
	ck_assert_uint_gt(t[0].drops[1], 5);
	ck_assert_uint_ge(t[0].retx[1], t[0].drops[1]);
	ck_assert_uint_eq(t[0].drops[2], 0);
	/* a slow ack may cost a spurious retransmission on any link of a loaded machine: the lossy
	 * one still stands out */
	ck_assert_uint_lt(t[0].retx[2], t[0].retx[1]);
	for (int r = 1; r < 3; r++)
		for (int q = 0; q < 3; q++)
			ck_assert_uint_eq(t[r].drops[q], 0);
}
END_TEST

/* Per-peer round trip: after traffic every link has samples with min <= srtt <= max; on the
 * lossy link 0->1 the ACKs of packets sent more than once give none (Karn's rule): every ACK
 * advance of its 100 one-packet puts (waited one by one) is a sample or a skip, and there are
 * skips. GICE_STATS=json prints the gauges in the per-peer objects. */
START_TEST(test_job_rtt_per_peer)
{
	static const char *const env[] = {"GICE_FAULTS=drop=0.3,link=0->1,seed=5", "GICE_PLANE=net",
					  "GICE_TIMEOUT_MS=5000", "GICE_STATS=json", NULL};
	char text[16384];
	int st[3];
	struct tally t[3];

	puts_job(env, st, text, sizeof(text), t);
	const char *js = strstr(text, "{\"rank\":0,\"device\":0,\"peer\":1,");
	ck_assert_msg(js && strstr(js, "\"rtt_karn_skips\":") && strstr(js, "\"srtt_ns\":") &&
			      strstr(js, "\"rtt_min_ns\":") && strstr(js, "\"rtt_max_ns\":"),
		      "no round trip in the per-peer json: %s", text);
	for (int r = 0; r < 3; r++)
		for (int q = 0; q < 3; q++) {
			if (q == r)
				continue;
			printf("rtt %d->%d: %llu samples, %llu skipped, min %llu srtt %llu max %llu ns (%llu retransmits)\n",
			       r, q, (unsigned long long)t[r].rtt_n[q], (unsigned long long)t[r].karn[q],
			       (unsigned long long)t[r].rtt_min[q], (unsigned long long)t[r].srtt[q],
			       (unsigned long long)t[r].rtt_max[q], (unsigned long long)t[r].retx[q]);
			ck_assert_uint_gt(t[r].rtt_n[q], 0);
			ck_assert_uint_gt(t[r].rtt_min[q], 0);
			ck_assert_uint_le(t[r].rtt_min[q], t[r].srtt[q]);
			ck_assert_uint_le(t[r].srtt[q], t[r].rtt_max[q]);
			ck_assert_uint_le(t[r].rtt_n[q] + t[r].karn[q], t[r].tx[q]);
		}
	/* the lossy link: every packet acknowledged once, as a sample or (sent again) a skip */
	ck_assert_uint_eq(t[0].tx[1], 100);
	ck_assert_uint_eq(t[0].rtt_n[1] + t[0].karn[1], t[0].tx[1]);
	ck_assert_uint_gt(t[0].karn[1], 0);
	ck_assert_uint_le(t[0].karn[1], t[0].retx[1]);
	ck_assert_uint_lt(t[0].rtt_n[1], 100);
}
END_TEST

/* The same seed three times: the same drops on the link (GICE_RTO_MIN_US high: no spurious
 * retransmission, whose own draw would add to the count). */
START_TEST(test_job_same_seed_same_counts)
{
	static const char *const env[] = {"GICE_FAULTS=drop=0.1,link=0->1,seed=9", "GICE_PLANE=net",
					  "GICE_TIMEOUT_MS=10000", "GICE_RTO_MIN_US=20000", NULL};
	char file[] = "/tmp/gice-ft-seed-XXXXXX";
	int st[2], fd = mkstemp(file);
	uint64_t drops[3];

	ck_assert_int_ge(fd, 0);
	close(fd);
	tally_file = file;
	for (int k = 0; k < 3; k++) {
		run_job(2, 2, puts_rank_100, "shm", env, st, NULL);
		ck_assert_int_eq(st[0], 0);
		ck_assert_int_eq(st[1], 0);
		struct tally t0 = read_tally(file, 0);
		read_tally(file, 1);
		drops[k] = t0.drops[1];
	}
	unlink(file);
	printf("same seed, three jobs: %llu %llu %llu packets dropped on link 0->1\n", (unsigned long long)drops[0],
	       (unsigned long long)drops[1], (unsigned long long)drops[2]);
	ck_assert_uint_gt(drops[0], 0);
	ck_assert_uint_eq(drops[0], drops[1]);
	ck_assert_uint_eq(drops[0], drops[2]);
}
END_TEST

/* partition=0|1 for 700 ms from 300 ms: puts across it wait, then land; traffic resumes. */
static int partition_rank(int rank, int size)
{
	gice_device_t *d;
	void *p;
	struct shared me, all[2];
	gice_counter_t done;
	uint64_t longest = 0, k = 0;

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	uint64_t t_open = now_ms();
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 0) {
		gice_conn_t c;
		FAILIF(gice_conn_open(d, gice_device_id_of(1, 0), NULL, &c), "conn");
		while (now_ms() - t_open < 1500) {
			gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[1].key,
					.signal = GICE_NO_COUNTER, .completion = done};
			uint64_t t0 = now_ms();
			FAILIF(gice_post(d, &op), "post");
			int rc = gice_counter_wait(d, done, GICE_CMP_GE, ++k, 20000, NULL);
			FAILIF(rc, "put %llu: %s", (unsigned long long)k, gice_status_name(rc));
			longest = GICE_MAX(longest, now_ms() - t0);
			usleep(20000);
		}
		gice_peer_stats_t ps;
		FAILIF(gice_device_peer_stats(d, gice_device_id_of(1, 0), &ps), "peer stats");
		fprintf(stderr, "partition: %llu puts, the longest took %llu ms; %llu packets dropped\n",
			(unsigned long long)k, (unsigned long long)longest, (unsigned long long)ps.fault_drops);
		FAILIF(ps.fault_drops == 0, "nothing dropped");
		FAILIF(longest < 100, "no put waited for the heal");
	}
	FAILIF(gice_allgather(&me, sizeof(me), all), "barrier after the heal");
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_job_partition_heals)
{
	static char script[64] = "GICE_FAULT_SCRIPT=/tmp/gice-ft-part-XXXXXX";
	static const char *const env[] = {script, "GICE_PLANE=net", "GICE_TIMEOUT_MS=5000", NULL};
	const char *text = "# the scenario file of the partition recipe\n@300ms+700ms partition=0|1\n";
	int st[2], fd = mkstemp(script + strlen("GICE_FAULT_SCRIPT="));

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	run_job(2, 2, partition_rank, "shm", env, st, NULL);
	unlink(script + strlen("GICE_FAULT_SCRIPT="));
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
}
END_TEST

/* Network faults turned on at run time on rank 0 only (drop and corrupt, no GICE_FAULTS, so the
 * peers keep reliability and checksums off): every put both ways lands intact; rank 0's
 * corrupted packets carry a CRC the peers check. A stall_ct set afterwards clears nothing. */
static int runtime_rank(int rank, int size)
{
	enum { N = 150, B = 256 };
	gice_device_t *d;
	uint8_t *p;
	struct shared me, all[3];
	gice_counter_t done;
	uint64_t k = 0;

	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_mem_alloc(d, MIB, (void **)&p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 0) {
		int rc = gice_faults_set(d, "drop=0.1,corrupt=0.05,seed=4");
		FAILIF(rc, "faults_set: %s", gice_status_name(rc));
		/* a stall set later (far off) clears nothing: the drops below still happen */
		rc = gice_faults_set(d, "stall_ct=0@3600s+1ms");
		FAILIF(rc, "faults_set stall: %s", gice_status_name(rc));
	}
	/* rank r's bytes for rank q go to slot r of q's memory */
	for (int i = 0; i < B; i++)
		p[MIB / 2 + (size_t)i] = (uint8_t)(rank * 40 + i);
	for (int q = 0; q < size; q++) {
		gice_conn_t c;
		if (q == rank)
			continue;
		FAILIF(gice_conn_open(d, gice_device_id_of((uint32_t)q, 0), NULL, &c), "conn");
		for (int i = 0; i < N; i++) {
			gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p + MIB / 2, .bytes = B,
					.rkey = all[q].key, .roff = (uint64_t)rank * B, .value = 1,
					.signal = all[q].sig, .signal_flags = GICE_SIGNAL_ADD, .completion = done};
			FAILIF(gice_post(d, &op), "post");
			int rc = gice_counter_wait(d, done, GICE_CMP_GE, ++k, 20000, NULL);
			FAILIF(rc, "put %d to rank %d: %s", i, q, gice_status_name(rc));
		}
	}
	/* every put to here has landed once its signal has counted (the wait orders the reads) */
	int rc = gice_counter_wait(d, me.sig, GICE_CMP_GE, (uint64_t)N * (uint64_t)(size - 1), 20000, NULL);
	FAILIF(rc, "signals: %s", gice_status_name(rc));
	FAILIF(gice_allgather(&me, sizeof(me), all), "barrier");
	for (int r = 0; r < size; r++)
		for (int i = 0; r != rank && i < B; i++)
			FAILIF(p[(size_t)r * B + (size_t)i] != (uint8_t)(r * 40 + i), "byte %d from rank %d", i, r);
	gice_stats_t st;
	gice_peer_stats_t ps;
	FAILIF(gice_device_stats(d, &st), "stats");
	if (rank == 0)
		fprintf(stderr, "run-time faults on rank 0: %llu dropped, %llu corrupted, %llu retransmits\n",
			(unsigned long long)st.fault_drops, (unsigned long long)st.fault_corrupts,
			(unsigned long long)st.retransmits);
	else {
		FAILIF(gice_device_peer_stats(d, gice_device_id_of(0, 0), &ps), "peer stats");
		fprintf(stderr, "rank %d: %llu packets from rank 0 failed their CRC\n", rank,
			(unsigned long long)ps.rx_csum_bad);
	}
	FAILIF(rank == 0 && (st.fault_drops == 0 || st.fault_corrupts == 0), "no fault injected");
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_job_runtime_faults_one_rank)
{
	static const char *const env[] = {"GICE_PLANE=net", "GICE_TIMEOUT_MS=5000", NULL};
	int st[3];

	run_job(3, 3, runtime_rank, "shm", env, st, NULL);
	for (int r = 0; r < 3; r++)
		ck_assert_int_eq(st[r], 0);
}
END_TEST

/* Rank 0 hangs rank 1 at run time (SIGSTOP: alive, silent): its put to rank 1 fails with
 * GICE_ERR_PEER_HUNG. Rank 0 then kills the stopped rank (whatever happened: a stopped process
 * would outlive the test). */
static int hang_from_rank0(int rank, int size)
{
	gice_device_t *d;
	void *p;
	struct {
		struct shared s;
		int32_t pid, pad;
	} me = {.pid = getpid()}, all[2];
	gice_counter_t done;

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.s.key), "mem");
	FAILIF(gice_counter_alloc(d, &done), "counter");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 1) {
		sleep(30); /* stopped, then killed */
		return 3;
	}
	gice_conn_t c;
	int set = gice_faults_set(d, "hang_rank=1@0"), rc = GICE_ERR_INVALID;
	for (int i = 0; set == GICE_OK && i < 2000; i++) { /* until its process shows stopped ('T') */
		char path[64], stat[256] = "";
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)all[1].pid);
		FILE *fp = fopen(path, "r");
		size_t n = fp ? fread(stat, 1, sizeof(stat) - 1, fp) : 0;
		if (fp)
			fclose(fp);
		stat[n] = 0;
		const char *paren = strrchr(stat, ')');
		if (paren && paren[1] == ' ' && paren[2] == 'T')
			break;
		usleep(1000);
	}
	if (set == GICE_OK && gice_conn_open(d, gice_device_id_of(1, 0), NULL, &c) == GICE_OK) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[1].s.key,
				.signal = GICE_NO_COUNTER, .completion = done};
		if ((rc = gice_post(d, &op)) == GICE_OK)
			rc = gice_counter_wait(d, done, GICE_CMP_GE, 1, 10000, NULL);
	}
	kill(all[1].pid, SIGKILL);
	fprintf(stderr, "rank 0: hang_rank=1@0: %s; the put to rank 1 ended %s\n", gice_status_name(set),
		gice_status_name(rc));
	FAILIF(set != GICE_OK, "hang_rank=1@0 refused");
	FAILIF(rc != GICE_ERR_PEER_HUNG, "put to the hung rank: %s", gice_status_name(rc));
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_job_rank0_hangs_rank1)
{
	static const char *const env[] = {"GICE_TIMEOUT_MS=500", "GICE_PLANE=net", NULL};
	int st[2];

	run_job(2, 2, hang_from_rank0, "shm", env, st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 128 + SIGKILL);
}
END_TEST

/* Header corruption with checksums off (GICE_CHECKSUM=0; ACKs corrupted too): the job may go
 * wrong, but never silently: each put succeeds or fails with a named status within the no-
 * progress timeout, and every rank ends (none is killed by the harness's alarm). */
static int hdr_corrupt_rank(int rank, int size)
{
	gice_device_t *d;
	void *p;
	struct shared me, all[2];
	gice_counter_t done;
	int rc = GICE_OK, i = 0;

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	gice_conn_t c;
	FAILIF(gice_conn_open(d, gice_device_id_of((uint32_t)(1 - rank), 0), NULL, &c), "conn");
	for (i = 0; i < 300 && rc == GICE_OK; i++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[1 - rank].key,
				.signal = GICE_NO_COUNTER, .completion = done};
		if ((rc = gice_post(d, &op)) == GICE_OK)
			rc = gice_counter_wait(d, done, GICE_CMP_GE, (uint64_t)i + 1, 0, NULL);
	}
	fprintf(stderr, "rank %d: header corruption, checksums off: %d puts, last %s\n", rank, i, gice_status_name(rc));
	FAILIF(rc > 0, "a put ended with %d", rc);
	gice_device_close(d);
	gice_finalize();
	return rc == GICE_OK ? 0 : 10; /* 10: a named error */
}

START_TEST(test_job_header_corruption_named)
{
	static const char *const env[] = {"GICE_FAULTS=corrupt=0.05,ctl=1,seed=2", "GICE_CHECKSUM=0", "GICE_PLANE=net",
					  "GICE_TIMEOUT_MS=1000", NULL};
	int st[2];

	run_job(2, 2, hdr_corrupt_rank, "shm", env, st, NULL);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(st[r] == 0 || st[r] == 10, "rank %d ended with %d", r, st[r]);
}
END_TEST

/* Rank 0 kills rank 2 at run time; a rank not in the job is refused with GICE_ERR_INVALID, and
 * another rank at a collective (@collN) with GICE_ERR_UNSUPPORTED. */
static int kill_from_rank0(int rank, int size)
{
	gice_device_t *d;
	struct shared me = {0}, all[3];

	(void)size;
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	if (rank == 0) {
		FAILIF(gice_faults_set(d, "kill_rank=7@0") != GICE_ERR_INVALID, "rank 7 accepted");
		/* another rank's collectives are its own to count */
		FAILIF(gice_faults_set(d, "kill_rank=2@coll3") != GICE_ERR_UNSUPPORTED, "kill_rank=2@coll3 accepted");
		FAILIF(gice_faults_set(d, "kill_rank=2@0") != GICE_OK, "kill_rank=2@0 refused");
	}
	if (rank == 2) {
		sleep(20); /* killed */
		return 3;
	}
	sleep(1);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

START_TEST(test_job_rank0_kills_rank2)
{
	static const char *const env[] = {"GICE_ON_PEER_DEAD=tolerate", "GICE_TIMEOUT_MS=500", NULL};
	int st[3];
	uint64_t t0 = now_ms();

	run_job(3, 3, kill_from_rank0, "shm", env, st, NULL);
	ck_assert_int_eq(st[0], 0);
	ck_assert_int_eq(st[1], 0);
	ck_assert_int_eq(st[2], 128 + SIGKILL);
	ck_assert_uint_lt(now_ms() - t0, test_scaled(15000)); /* not the 20 s sleep */
}
END_TEST

/* `test_fault_jobs job`, started by tests/test_netns_fault.sh: 2 ranks on 2 network namespaces
 * (2 machines), over tcp. Rank 0 kills (TEST_REMOTE_FAULT=kill) or hangs (=hang) rank 1 with
 * gice_faults_set — a FAULT request over the fabric, signed with the job's MAC, that rank 1
 * obeys. Rank 0's put to rank 1 then fails, and the watchdog names rank 1: GICE_ERR_PEER_DEAD
 * when killed; when hung, GICE_ERR_PEER_HUNG (namespaces of one machine share its pids, so its
 * process is seen alive) or, on a real other machine, GICE_ERR_PEER_DEAD. A hung rank 1 finds its
 * own put stalled and meets rank 0 at the bootstrap: alive until rank 0 saw it go silent. */
static int remote_fault_job(int rank, int size)
{
	const char *what = getenv("TEST_REMOTE_FAULT");
	int kill_it = what && !strcmp(what, "kill"), rc = GICE_OK, n = 0;
	gice_device_t *d;
	void *p;
	struct shared me, all[2];
	gice_counter_t done;
	gice_conn_t c;
	gice_error_info_t info;
	char spec[32];

	FAILIF(size != 2 || !what || (strcmp(what, "kill") && strcmp(what, "hang")), "TEST_REMOTE_FAULT=%s, %d ranks",
	       what ? what : "(unset)", size);
	FAILIF(gice_init(), "init");
	FAILIF(gice_device_open(NULL, &d), "open");
	FAILIF(gice_mem_alloc(d, MIB, &p) || gice_mem_register(d, p, MIB, &me.key), "mem");
	FAILIF(gice_counter_alloc(d, &me.sig) || gice_counter_alloc(d, &done), "counters");
	FAILIF(gice_allgather(&me, sizeof(me), all), "allgather");
	FAILIF(gice_conn_open(d, gice_device_id_of((uint32_t)(1 - rank), 0), NULL, &c), "conn");
	if (rank == 0) {
		snprintf(spec, sizeof(spec), "%s_rank=1@0", what);
		int set = gice_faults_set(d, spec);
		FAILIF(set != GICE_OK, "%s: %s", spec, gice_status_name(set));
	} else if (kill_it) {
		sleep(30); /* killed */
		return 3;
	}
	/* puts to the other rank, each waited, until one fails (a minute at most) */
	for (uint64_t t0 = now_ms(); rc == GICE_OK && now_ms() - t0 < 60000; n++) {
		gice_op_t op = {.type = GICE_OP_PUT, .conn = c, .local = p, .bytes = 64, .rkey = all[1 - rank].key,
				.signal = GICE_NO_COUNTER, .completion = done};
		if ((rc = gice_post(d, &op)) == GICE_OK)
			rc = gice_counter_wait(d, done, GICE_CMP_GE, (uint64_t)n + 1, 0, NULL);
	}
	gice_device_error(d, &info);
	fprintf(stderr, "rank %d: %s_rank=1@0 across machines: put %d to rank %d ended %s; watchdog: %s\n", rank, what, n,
		1 - rank, gice_status_name(rc), info.message ? info.message : "none");
	if (rank == 0) {
		int ok = kill_it ? GICE_ERR_PEER_DEAD : GICE_ERR_PEER_HUNG;
		FAILIF(rc != ok && rc != GICE_ERR_PEER_DEAD, "the put to rank 1 ended %s", gice_status_name(rc));
		FAILIF(info.status != rc || info.peer_rank != 1, "the watchdog named %s of rank %u",
		       gice_status_name(info.status), info.peer_rank);
	} else {
		FAILIF(rc == GICE_OK, "rank 1 went on after its hang");
	}
	if (!kill_it) /* the hung rank lives until rank 0 has seen it */
		FAILIF(gice_allgather(&me, sizeof(me), all), "barrier");
	return 0; /* a device of the job is gone: no teardown */
}

static Suite *suite(void)
{
	Suite *s = suite_create("fault_jobs");
	TCase *tc = tcase_create("job");

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_job_lossy_link_blamed);
	tcase_add_test(tc, test_job_same_seed_same_counts);
	tcase_add_test(tc, test_job_rtt_per_peer);
	tcase_add_test(tc, test_job_partition_heals);
	tcase_add_test(tc, test_job_rank0_kills_rank2);
	tcase_add_test(tc, test_job_rank0_hangs_rank1);
	tcase_add_test(tc, test_job_runtime_faults_one_rank);
	tcase_add_test(tc, test_job_header_corruption_named);
	suite_add_tcase(s, tc);
	return s;
}

/* `test_fault_jobs job`: the cross-machine kill or hang (test_netns_fault.sh starts it). */
int main(int argc, char **argv) { return test_main_or_job(argc, argv, remote_fault_job, suite); }
