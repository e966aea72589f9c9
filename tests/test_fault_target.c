/* Description: fault injection a watchdog tester can aim (issue 14). The spec language
 * (link=, peer=, rank=, partition=, after_ops=, nth_put=, corrupt_msg=, latency=, rate=, windows
 * @T+D, groups) parses to what it says and refuses what it cannot do with the reason; on an
 * endpoint pair whose sender is wrapped with gice's packet classifier, each targeting form
 * touches only the packets it names (per-peer counts prove it), decisions are keyed on
 * (link, psn, attempt) so that the same seed drops the same packets whatever the order they
 * are sent in. The same in gice jobs of forked ranks: tests/test_fault_jobs.c. Rates are measured
 * by scripts/fault_rate.sh, not here. */
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
#include "tests/test_util.h"

/* ================================================================ the spec */

/* Parse spec with stderr into a file; the text logged goes to out. */
static int parse_logged(const char *spec, gice_faults_t *f, char *out, size_t len)
{
	char path[] = "/tmp/gice-ft-XXXXXX";
	int fd = mkstemp(path), saved = dup(2), rc;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	dup2(fd, 2);
	rc = gice_faults_parse(spec, f);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, out, len - 1, 0);
	out[n > 0 ? n : 0] = 0;
	close(fd);
	unlink(path);
	return rc;
}

static gice_faults_t spec_of(const char *spec)
{
	gice_faults_t f;
	char log[1024];

	ck_assert_msg(parse_logged(spec, &f, log, sizeof(log)) == GICE_OK, "\"%s\": %s", spec, log);
	return f;
}

START_TEST(test_spec_forms)
{
	gice_faults_t f = spec_of("drop=0.5,link=2->3;corrupt=1@1s+500ms,peer=1,3;partition=0,1|2,3@2s+1s;"
				  "nth_put=5,after_ops=10,rank=0;corrupt_msg=1;latency=50us,rate=100MBps,peer=2;"
				  "drop=0.1,ctl=1;stall_ct=0@1s+1s,rank=2;seed=9");

	ck_assert_uint_eq(f.n_rules, 8);
	ck_assert(f.rule[0].kind == GICE_FK_DROP && f.rule[0].p == 0.5);
	ck_assert_uint_eq(f.rule[0].from, 1ull << 2);
	ck_assert_uint_eq(f.rule[0].to, 1ull << 3);
	ck_assert_uint_eq(f.rule[0].dur_ns, UINT64_MAX);
	ck_assert(f.rule[1].kind == GICE_FK_CORRUPT && f.rule[1].p == 1.0);
	ck_assert_uint_eq(f.rule[1].from, GICE_FAULTS_ANY);
	ck_assert_uint_eq(f.rule[1].to, (1ull << 1) | (1ull << 3)); /* the list went on over a comma */
	ck_assert_uint_eq(f.rule[1].at_ns, 1000000000ull);
	ck_assert_uint_eq(f.rule[1].dur_ns, 500000000ull);
	ck_assert(f.rule[2].kind == GICE_FK_PARTITION);
	ck_assert_uint_eq(f.rule[2].from, 3);
	ck_assert_uint_eq(f.rule[2].to, 12);
	ck_assert_uint_eq(f.rule[2].at_ns, 2000000000ull);
	ck_assert_uint_eq(f.rule[2].dur_ns, 1000000000ull);
	ck_assert(f.rule[3].kind == GICE_FK_NTH_PUT && f.rule[3].n == 5);
	ck_assert_uint_eq(f.rule[3].after_ops, 10);
	ck_assert_uint_eq(f.rule[3].from, 1);
	ck_assert(f.rule[4].kind == GICE_FK_CORRUPT_MSG && f.rule[4].n == 1);
	ck_assert(f.rule[5].kind == GICE_FK_LATENCY && f.rule[5].n == 50000);
	ck_assert(f.rule[6].kind == GICE_FK_RATE && f.rule[6].n == 100000000ull);
	ck_assert_uint_eq(f.rule[5].to, 1ull << 2); /* one scope for the whole group */
	ck_assert_uint_eq(f.rule[6].to, 1ull << 2);
	ck_assert(f.rule[7].kind == GICE_FK_DROP && f.rule[7].ctl == 1);
	ck_assert_uint_eq(f.n_stall, 1);
	ck_assert_uint_eq(f.stall[0].ranks, 1ull << 2);
	ck_assert_uint_eq(f.seed, 9);
	ck_assert_int_eq(gice_faults_corrupts(&f), 1);
	ck_assert_int_eq(gice_faults_reorders(&f), 0);
	/* an unwindowed fault in a group of its own is the old global form */
	f = spec_of("drop=0.05;dup=0.01");
	ck_assert_uint_eq(f.n_rules, 2);
	ck_assert_uint_eq(f.rule[1].from & f.rule[1].to, GICE_FAULTS_ANY);
	/* @T alone: from T on */
	f = spec_of("drop=1@250ms");
	ck_assert_uint_eq(f.rule[0].at_ns, 250000000ull);
	ck_assert_uint_eq(f.rule[0].dur_ns, UINT64_MAX);
	ck_assert_uint_eq(f.rule[0].coll_at, 0);
}
END_TEST

/* Windows in collective operations: @collN (from the N-th on), @collN+K (K of them), at=collN+K
 * for a group, and kill_rank / hang_rank at the start of a rank's N-th collective. */
START_TEST(test_spec_coll_forms)
{
	gice_faults_t f = spec_of("nth_put=2@coll3+1,link=0->1;drop=1@coll2,peer=2;at=coll4+inf,corrupt_msg=1,"
				  "dup=0.5@1s;kill_rank=2@coll5;hang_rank=1@coll6");

	ck_assert_uint_eq(f.n_rules, 4);
	ck_assert(f.rule[0].kind == GICE_FK_NTH_PUT && f.rule[0].n == 2);
	ck_assert_uint_eq(f.rule[0].coll_at, 3);
	ck_assert_uint_eq(f.rule[0].coll_n, 1);
	ck_assert_uint_eq(f.rule[0].at_ns, 0);
	ck_assert_uint_eq(f.rule[0].dur_ns, UINT64_MAX);
	ck_assert_uint_eq(f.rule[0].from, 1);
	ck_assert_uint_eq(f.rule[0].to, 2);
	ck_assert_uint_eq(f.rule[1].coll_at, 2);
	ck_assert_uint_eq(f.rule[1].coll_n, UINT64_MAX);
	ck_assert_uint_eq(f.rule[2].coll_at, 4); /* the group's window */
	ck_assert_uint_eq(f.rule[2].coll_n, UINT64_MAX);
	ck_assert_uint_eq(f.rule[3].coll_at, 0); /* its own, in time */
	ck_assert_uint_eq(f.rule[3].at_ns, 1000000000ull);
	ck_assert_int_eq(f.kill_rank, 2);
	ck_assert_uint_eq(f.kill_coll, 5);
	ck_assert_uint_eq(f.kill_at_ns, 0);
	ck_assert_int_eq(f.hang_rank, 1);
	ck_assert_uint_eq(f.hang_coll, 6);
	/* a scenario line's window in collectives */
	char path[] = "/tmp/gice-ft-collscript-XXXXXX";
	const char *text = "@coll5+1 nth_put=2,link=1->2\n";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(gice_faults_load(NULL, path, &f), GICE_OK);
	unlink(path);
	ck_assert_uint_eq(f.n_rules, 1);
	ck_assert_uint_eq(f.rule[0].coll_at, 5);
	ck_assert_uint_eq(f.rule[0].coll_n, 1);
	ck_assert_uint_eq(f.rule[0].from, 1ull << 1);
}
END_TEST

/* Each refused spec: GICE_ERR_CONFIG, the output untouched, and the reason in the log line. */
START_TEST(test_spec_refused)
{
	static const struct {
		const char *spec, *why;
	} bad[] = {
		{"drop=0.1,drop=0.2", "drop given twice in one group"},
		{"peer=2", "a scope (link, peer, rank, from, after_ops, ctl) without a fault in its group"},
		{"partition=0,1|2,3,peer=1", "a partition names its sides itself"},
		{"partition=0,1", "missing '|'"},
		{"partition=0,1|1,2", "a rank is on both sides"},
		{"drop=1,link=2-3", "the form is link=SENDER->RECEIVER"},
		{"drop=1,link=1->2,peer=3", "link=A->B names both"},
		{"drop=1,peer=64", "rank 64: a scope names ranks 0..63"},
		{"rate=100", "is not an integer followed by Bps, KBps, MBps or GBps"},
		{"rate=0MBps", "rate 0: use drop=1 or a partition"},
		{"nth_put=0", "nth_put counts from 1"},
		{"latency=5x", "is not an integer followed by ns, us, ms, s"},
		{"drop=1@2s+", "has no number"},
		{"drop=1@inf", "inf is only allowed"},
		{"stall_ct=0@1s+1s,peer=2", "stall_ct takes only rank="},
		{"bogus=1", "unknown key \"bogus\""},
		{"seed=1;seed=2", "seed given twice"},
		{"at=1s,stall_ct=0@1s+1s", "at= without a network fault in its group"},
		{"kill_rank=1@coll0", "collectives count from 1 (coll1 is the first)"},
		{"drop=1@coll2+0", "a window of 0 collectives"},
		{"drop=1@collx", "\"x\" is not a decimal integer"},
		{"stall_ct=0@coll2+1", "a stall takes a time window, not collectives"},
		{"drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1;drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1;"
		 "drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1;drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1;drop=0.1",
		 "more than 16 network faults"},
	};
	gice_faults_t f, before;
	char log[2048];

	memset(&f, 0xa5, sizeof(f));
	before = f;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_logged(bad[i].spec, &f, log, sizeof(log));
		ck_assert_msg(rc == GICE_ERR_CONFIG, "\"%s\" gave %s", bad[i].spec, gice_status_name(rc));
		ck_assert_msg(!memcmp(&f, &before, sizeof(f)), "\"%s\" changed the output", bad[i].spec);
		ck_assert_msg(strstr(log, bad[i].why), "\"%s\": log \"%s\" does not say \"%s\"", bad[i].spec, log,
			      bad[i].why);
	}
}
END_TEST

/* A scenario file: one group a line, comments, a leading window for the line's faults. */
START_TEST(test_script_timeline)
{
	char path[] = "/tmp/gice-ft-script-XXXXXX", log[1024];
	int fd = mkstemp(path);
	gice_faults_t f;
	const char *text = "# flapping link, then a partition that heals\n"
			   "@1s+200ms drop=1,link=0->1\n"
			   "@2s+200ms  drop=1,link=0->1   # again\n"
			   "\n"
			   "partition=0|1@3s+1s\n"
			   "@5s corrupt_msg=1,dup=0.5@6s+1s\n";

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(gice_faults_load("seed=3", path, &f), GICE_OK);
	ck_assert_uint_eq(f.seed, 3);
	ck_assert_uint_eq(f.n_rules, 5);
	ck_assert_uint_eq(f.rule[0].at_ns, 1000000000ull);
	ck_assert_uint_eq(f.rule[0].dur_ns, 200000000ull);
	ck_assert_uint_eq(f.rule[0].from, 1);
	ck_assert_uint_eq(f.rule[1].at_ns, 2000000000ull);
	ck_assert(f.rule[2].kind == GICE_FK_PARTITION && f.rule[2].at_ns == 3000000000ull);
	ck_assert(f.rule[3].kind == GICE_FK_CORRUPT_MSG && f.rule[3].at_ns == 5000000000ull);
	ck_assert_uint_eq(f.rule[3].dur_ns, UINT64_MAX);
	ck_assert(f.rule[4].kind == GICE_FK_DUP && f.rule[4].at_ns == 6000000000ull); /* its own window */
	ck_assert_uint_eq(f.rule[4].dur_ns, 1000000000ull);
	/* the same as one spec */
	gice_faults_t g = spec_of("seed=3;at=1s+200ms,drop=1,link=0->1;drop=1@2s+200ms,link=0->1;"
				  "partition=0|1@3s+1s;at=5s,corrupt_msg=1,dup=0.5@6s+1s");
	ck_assert(!memcmp(&f, &g, sizeof(f)));
	unlink(path);
	ck_assert_int_eq(gice_faults_load("", path, &f), GICE_ERR_CONFIG); /* gone */
	ck_assert_int_eq(gice_faults_load("drop=0.5", "", &f), GICE_OK);   /* none */
	ck_assert_uint_eq(f.n_rules, 1);
	(void)log;
}
END_TEST

START_TEST(test_spec_round_trip)
{
	static const char *const specs[] = {
		"drop=0.5,link=2->3;corrupt=1@1s+500ms,peer=1,3;partition=0,1|2,3@2s+1s",
		"nth_put=5,after_ops=10,rank=0;corrupt_msg=1;latency=50us,rate=100MBps,peer=2;seed=4",
		"drop=0.1,ctl=1;stall_ct=0@1s+1s,rank=2;stall_ct=1@0ms+inf;kill_rank=1@3s",
		"peer=1,drop=0.2;dup=0.3",
		"nth_put=2@coll3+1,link=0->1;drop=1@coll2,peer=2;kill_rank=2@coll5;hang_rank=1@coll6",
	};
	char buf[1024];
	gice_faults_t f, g;

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		f = spec_of(specs[i]);
		gice_faults_format(&f, buf, sizeof(buf));
		g = spec_of(buf);
		ck_assert_msg(!memcmp(&f, &g, sizeof(f)), "\"%s\" formatted as \"%s\" reads back differently", specs[i],
			      buf);
	}
	f = spec_of("drop=0.5,link=2->3");
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "drop=0.5,rank=2,peer=3;seed=1");
}
END_TEST

/* ================================================================ aimed at packets */

enum { NR = 4, GIDS = 8, MAXP = 4096 };

typedef struct {
	fab_ep_t *a, *b; /* a: the sender, wrapped with the classifier; b: the receiver */
	fab_addr_t a2b;
	/* what b received: (dst, psn) seen, payload intact */
	uint32_t got[GIDS][1024];
	uint32_t bad_payload;
	uint64_t last_rx_ns;
	uint64_t t_wrap[2]; /* ms: the wrap (the origin of the windows) happened between these */
} tpair_t;

static void tpair_open(tpair_t *p, const char *spec)
{
	fab_attr_t attr = {.provider = "shm", .max_packet = MAXP};
	fab_fault_attr_t fa = {.nranks = NR, .max_gids = GIDS, .classify = ct_fault_classify};
	gice_faults_t f;
	char addr[FAB_ADDR_MAX];
	size_t l = sizeof(addr);
	fab_ep_t *raw;

	memset(p, 0, sizeof(*p));
	if (spec)
		f = spec_of(spec);
	ck_assert_int_eq(fab_open(&attr, &raw), GICE_OK);
	p->t_wrap[0] = gice_now_ns() / 1000000;
	ck_assert_int_eq(fab_fault_wrap(raw, spec ? &f : NULL, 0, &fa, &p->a), GICE_OK);
	p->t_wrap[1] = gice_now_ns() / 1000000 + 1;
	ck_assert_int_eq(fab_open(&attr, &p->b), GICE_OK);
	ck_assert_int_eq(fab_getname(p->b, addr, &l), GICE_OK);
	ck_assert_int_eq(fab_insert(p->a, addr, l, &p->a2b), GICE_OK);
}

static void tpair_close(tpair_t *p)
{
	fab_close(p->a);
	fab_close(p->b);
}

static uint8_t pay_byte(uint32_t psn, uint32_t i) { return (uint8_t)(psn * 31 + i * 7); }

/* Take what b has (every packet of each bundle). */
static void tpair_pump(tpair_t *p)
{
	fab_event_t ev[16];
	int n;

	fab_poll(p->a, ev, 0);
	while ((n = fab_poll(p->b, ev, 16)) > 0)
		for (int i = 0; i < n; i++) {
			const uint8_t *buf = ev[i].buf;
			size_t len = ev[i].len;
			if (ev[i].type != FAB_EV_RX)
				continue;
			while (len >= CT_HDR_BYTES) {
				fab_fault_pkt_t k;
				if (ct_fault_classify(buf, len, &k) || k.len > len)
					break;
				if (k.dst < GIDS && k.seq)
					p->got[k.dst][k.psn % 1024]++;
				for (size_t j = CT_HDR_BYTES; j < k.len; j++)
					if (buf[j] != pay_byte(k.psn, (uint32_t)(j - CT_HDR_BYTES))) {
						p->bad_payload++;
						break;
					}
				buf += k.len;
				len -= k.len;
			}
			p->last_rx_ns = gice_now_ns();
			fab_release(p->b, ev[i].buf);
		}
}

static void tpair_settle(tpair_t *p, int ms)
{
	for (int i = 0; i < ms; i++) {
		tpair_pump(p);
		usleep(1000);
	}
	tpair_pump(p);
}

/* Encode one packet (src -> dst, op, psn, msg, flags, plen bytes of payload) at buf. */
static size_t pkt_make(uint8_t *buf, uint32_t src, uint32_t dst, uint8_t op, uint32_t psn, uint32_t msg,
		       uint8_t flags, uint32_t plen)
{
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = op, .flags = flags,
		      .src_gid = src, .dst_gid = dst, .msg_id = msg, .psn = psn, .payload_len = plen,
		      .msg_len = plen};

	ct_proto_build(&h, buf);
	for (uint32_t i = 0; i < plen; i++)
		buf[CT_HDR_BYTES + i] = pay_byte(psn, i);
	return CT_HDR_BYTES + plen;
}

/* Send len bytes at buf (one packet or a bundle) through a, retrying GICE_ERR_AGAIN. */
static void tsend(tpair_t *p, const uint8_t *buf, size_t len)
{
	int rc;

	while ((rc = fab_send(p->a, p->a2b, buf, len, NULL, 0)) == GICE_ERR_AGAIN)
		tpair_pump(p);
	ck_assert_int_eq(rc, GICE_OK);
}

/* One single-packet put of 64 bytes (an operation: FIRST and LAST). */
static void put1(tpair_t *p, uint32_t src, uint32_t dst, uint32_t psn)
{
	uint8_t buf[CT_HDR_BYTES + 64];

	tsend(p, buf, pkt_make(buf, src, dst, CT_PKT_PUT, psn, psn, CT_HF_FIRST | CT_HF_LAST, 64));
}

static fab_fault_stats_t peer_st(tpair_t *p, uint32_t gid)
{
	fab_fault_stats_t st;

	ck_assert_int_eq(fab_fault_peer_stats(p->a, gid, &st), GICE_OK);
	return st;
}

/* link=0->2: only packets of rank 0 to rank 2 (gid 6 is rank 2 too: 6 % 4) */
START_TEST(test_link_hits_only_its_link)
{
	tpair_t p;

	tpair_open(&p, "drop=1,link=0->2");
	for (uint32_t psn = 0; psn < 10; psn++)
		for (uint32_t dst = 1; dst < 4; dst++)
			put1(&p, 0, dst, psn);
	for (uint32_t psn = 10; psn < 20; psn++) {
		put1(&p, 1, 2, psn); /* another sender rank to rank 2: not its link */
		put1(&p, 0, 6, psn); /* rank 0 to rank 2's second device: its link */
	}
	tpair_settle(&p, 20);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 0);
	ck_assert_uint_eq(peer_st(&p, 3).dropped, 0);
	ck_assert_uint_eq(peer_st(&p, 2).sent, 20);
	ck_assert_uint_eq(peer_st(&p, 2).dropped, 10);
	ck_assert_uint_eq(peer_st(&p, 6).dropped, 10);
	for (uint32_t psn = 0; psn < 10; psn++) {
		ck_assert_uint_eq(p.got[1][psn], 1);
		ck_assert_uint_eq(p.got[2][psn], 0);
		ck_assert_uint_eq(p.got[3][psn], 1);
		ck_assert_uint_eq(p.got[2][psn + 10], 1);
		ck_assert_uint_eq(p.got[6][psn + 10], 0);
	}
	tpair_close(&p);
}
END_TEST

/* peer=3: corruption of packets to rank 3 only; from anyone */
START_TEST(test_peer_hits_only_its_peer)
{
	tpair_t p;

	tpair_open(&p, "corrupt=1,peer=3");
	for (uint32_t psn = 0; psn < 20; psn++) {
		put1(&p, 0, 1, psn);
		put1(&p, 0, 3, psn);
	}
	tpair_settle(&p, 20);
	ck_assert_uint_eq(peer_st(&p, 1).corrupted, 0);
	ck_assert_uint_eq(peer_st(&p, 3).corrupted, 20);
	ck_assert_uint_eq(peer_st(&p, 3).dropped, 0);
	tpair_close(&p);
}
END_TEST

/* A partition cuts both ways between its sides, control packets too, and nothing else. */
START_TEST(test_partition_cuts_between_sides)
{
	uint8_t buf[CT_HDR_BYTES];
	tpair_t p;

	tpair_open(&p, "partition=0,1|2,3");
	for (uint32_t psn = 0; psn < 5; psn++) {
		put1(&p, 0, 1, psn); /* same side */
		put1(&p, 0, 2, psn); /* across */
		put1(&p, 2, 1, psn); /* across, the other way (as rank 2's injector would see it) */
		put1(&p, 2, 3, psn); /* same side */
		tsend(&p, buf, pkt_make(buf, 0, 3, CT_PKT_ACK, psn, 0, 0, 0)); /* an ack across */
		tsend(&p, buf, pkt_make(buf, 0, 1, CT_PKT_HEARTBEAT, 0, 0, 0, 0));
	}
	tpair_settle(&p, 20);
	ck_assert_uint_eq(peer_st(&p, 2).dropped, 5);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 5); /* 2 -> 1 */
	ck_assert_uint_eq(peer_st(&p, 1).sent, 15);   /* and 0 -> 1 (with heartbeats) went */
	ck_assert_uint_eq(peer_st(&p, 3).dropped, 5); /* the acks 0 -> 3; 2 -> 3 went */
	ck_assert_uint_eq(p.got[3][0], 1);
	ck_assert_uint_eq(p.got[1][0], 1);
	tpair_close(&p);
}
END_TEST

/* Control packets are out of reach unless the group says ctl=1. */
START_TEST(test_control_exempt_unless_ctl)
{
	uint8_t buf[CT_HDR_BYTES];
	tpair_t p;

	for (int ctl = 0; ctl < 2; ctl++) {
		tpair_open(&p, ctl ? "drop=1,ctl=1" : "drop=1");
		for (uint32_t i = 0; i < 10; i++) {
			put1(&p, 0, 1, i);
			tsend(&p, buf, pkt_make(buf, 0, 2, CT_PKT_ACK, i, 0, 0, 0));
			tsend(&p, buf, pkt_make(buf, 0, 2, CT_PKT_HEARTBEAT, 0, 0, 0, 0));
		}
		tpair_settle(&p, 10);
		ck_assert_uint_eq(peer_st(&p, 1).dropped, 10);
		ck_assert_uint_eq(peer_st(&p, 2).dropped, ctl ? 20 : 0);
		tpair_close(&p);
	}
}
END_TEST

/* after_ops=3: the first three operations in scope go, then the fault acts; a retransmission
 * is not a new operation. */
START_TEST(test_after_ops)
{
	tpair_t p;

	tpair_open(&p, "drop=1,after_ops=3,peer=1");
	put1(&p, 0, 1, 0);
	put1(&p, 0, 1, 0); /* psn 0 again: a retransmission */
	put1(&p, 0, 2, 0); /* out of scope */
	put1(&p, 0, 1, 1);
	put1(&p, 0, 1, 2);
	put1(&p, 0, 1, 3);
	put1(&p, 0, 1, 4);
	tpair_settle(&p, 10);
	ck_assert_uint_eq(p.got[1][0], 2);
	ck_assert_uint_eq(p.got[1][1], 1);
	ck_assert_uint_eq(p.got[1][2], 1);
	ck_assert_uint_eq(p.got[1][3], 0);
	ck_assert_uint_eq(p.got[1][4], 0);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 2);
	tpair_close(&p);
}
END_TEST

/* nth_put=2 on link 0->1: the second put (both its packets), and every retransmission of it,
 * is lost; gets do not count; the other puts and other links go. */
START_TEST(test_nth_put_lost_for_good)
{
	uint8_t buf[2 * (CT_HDR_BYTES + 64)];
	tpair_t p;
	size_t n;

	tpair_open(&p, "nth_put=2,link=0->1");
	put1(&p, 0, 1, 0);                                                                    /* put 1 */
	tsend(&p, buf, pkt_make(buf, 0, 1, CT_PKT_GET_REQ, 1, 1, CT_HF_FIRST | CT_HF_LAST, 0)); /* a get */
	put1(&p, 0, 2, 0); /* another link's put */
	/* put 2: two packets, in one bundle */
	n = pkt_make(buf, 0, 1, CT_PKT_PUT, 2, 2, CT_HF_FIRST, 64);
	n += pkt_make(buf + n, 0, 1, CT_PKT_PUT, 3, 2, CT_HF_LAST, 64);
	tsend(&p, buf, n);
	put1(&p, 0, 1, 4); /* put 3 */
	tsend(&p, buf, pkt_make(buf, 0, 1, CT_PKT_PUT, 2, 2, CT_HF_FIRST, 64)); /* put 2 again */
	tsend(&p, buf, pkt_make(buf, 0, 1, CT_PKT_PUT, 3, 2, CT_HF_LAST, 64));
	tpair_settle(&p, 10);
	ck_assert_uint_eq(p.got[1][0], 1);
	ck_assert_uint_eq(p.got[1][1], 1);
	ck_assert_uint_eq(p.got[1][2], 0);
	ck_assert_uint_eq(p.got[1][3], 0);
	ck_assert_uint_eq(p.got[1][4], 1);
	ck_assert_uint_eq(p.got[2][0], 1);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 4);
	tpair_close(&p);
}
END_TEST

/* corrupt_msg=3: exactly one packet is corrupted, in its payload: the third operation's first
 * transmission; its retransmission arrives intact. */
START_TEST(test_corrupt_msg_exactly_once)
{
	tpair_t p;

	tpair_open(&p, "corrupt_msg=3");
	for (uint32_t psn = 0; psn < 6; psn++)
		put1(&p, 0, 1 + psn % 2, psn);
	tpair_settle(&p, 10);
	ck_assert_uint_eq(p.bad_payload, 1);
	put1(&p, 0, 1, 2); /* the corrupted one again */
	tpair_settle(&p, 10);
	ck_assert_uint_eq(p.bad_payload, 1);
	ck_assert_uint_eq(peer_st(&p, 1).corrupted, 1);
	ck_assert_uint_eq(peer_st(&p, 2).corrupted, 0);
	tpair_close(&p);
}
END_TEST

/* The same seed drops the same (link, psn) whatever the order and bundling of the sends, three
 * times; another seed drops others. */
static void drops_in_order(const char *spec, int order, uint8_t out[2][300], uint64_t *n_dropped)
{
	uint8_t buf[2 * (CT_HDR_BYTES + 64)];
	tpair_t p;

	tpair_open(&p, spec);
	for (uint32_t i = 0; i < 300; i++) {
		if (order == 0) { /* link 1 then link 2, one packet a message */
			put1(&p, 0, 1, i);
		} else if (order == 1) { /* interleaved, link 2 first */
			put1(&p, 0, 2, i);
			put1(&p, 0, 1, i);
		} else { /* bundles of two, links reversed */
			uint32_t q = 299 - i;
			if (i % 2 == 0) {
				size_t n = pkt_make(buf, 0, 2, CT_PKT_PUT, q, q, CT_HF_FIRST | CT_HF_LAST, 64);
				n += pkt_make(buf + n, 0, 2, CT_PKT_PUT, q - 1, q - 1, CT_HF_FIRST | CT_HF_LAST, 64);
				tsend(&p, buf, n);
			}
			put1(&p, 0, 1, q);
		}
	}
	if (order == 0)
		for (uint32_t i = 0; i < 300; i++)
			put1(&p, 0, 2, i);
	tpair_settle(&p, 30);
	for (uint32_t d = 0; d < 2; d++)
		for (uint32_t i = 0; i < 300; i++)
			out[d][i] = (uint8_t)p.got[d + 1][i];
	*n_dropped = peer_st(&p, 1).dropped + peer_st(&p, 2).dropped;
	tpair_close(&p);
}

START_TEST(test_same_seed_same_drops_any_order)
{
	uint8_t r[3][2][300], other[2][300];
	uint64_t n[3], m;

	for (int k = 0; k < 3; k++)
		drops_in_order("drop=0.3,seed=5", k, r[k], &n[k]);
	drops_in_order("drop=0.3,seed=6", 0, other, &m);
	printf("same seed, three orders: %llu %llu %llu packets dropped; seed 6: %llu\n", (unsigned long long)n[0],
	       (unsigned long long)n[1], (unsigned long long)n[2], (unsigned long long)m);
	ck_assert_uint_gt(n[0], 100);
	ck_assert_uint_lt(n[0], 260);
	ck_assert_uint_eq(n[0], n[1]);
	ck_assert_uint_eq(n[0], n[2]);
	ck_assert(!memcmp(r[0], r[1], sizeof(r[0])));
	ck_assert(!memcmp(r[0], r[2], sizeof(r[0])));
	ck_assert(memcmp(r[0], other, sizeof(other)));
}
END_TEST

/* A window: the fault acts from T for D, counted from the wrap (packets near an edge are not
 * judged: the test only knows when it called send). */
START_TEST(test_window)
{
	tpair_t p;
	int judged[3] = {0};

	tpair_open(&p, "drop=1@200ms+300ms,peer=1");
	uint64_t tb = p.t_wrap[0], ta = p.t_wrap[1]; /* the origin is between them */
	for (uint32_t psn = 0; psn < 3; psn++) {
		uint64_t want_ms = psn == 0 ? 0 : psn == 1 ? 350 : 800;
		while (gice_now_ns() / 1000000 < ta + want_ms)
			usleep(2000);
		uint64_t before = gice_now_ns() / 1000000;
		put1(&p, 0, 1, psn);
		uint64_t after = gice_now_ns() / 1000000 + 1;
		tpair_settle(&p, 5);
		if (after - tb < 200 || before - ta >= 500) { /* surely outside */
			judged[psn] = 1;
			ck_assert_uint_eq(p.got[1][psn], 1);
		} else if (before - ta >= 200 && after - tb < 500) { /* surely inside */
			judged[psn] = 1;
			ck_assert_uint_eq(p.got[1][psn], 0);
		}
	}
	printf("window: %d of 3 sends far enough from its edges to judge\n", judged[0] + judged[1] + judged[2]);
	ck_assert_int_ge(judged[0] + judged[1] + judged[2], 2);
	tpair_close(&p);
}
END_TEST

/* A window in collectives: the owner's count (fab_fault_coll), not time, opens and closes it;
 * a rule added later counts the collectives from its own start. */
START_TEST(test_coll_window)
{
	tpair_t p;
	gice_faults_t f = spec_of("drop=1@coll1+1,peer=2");

	tpair_open(&p, "drop=1@coll2+2,peer=1");
	put1(&p, 0, 1, 0); /* before any collective */
	ck_assert_int_eq(fab_fault_coll(p.a, 1), GICE_OK);
	put1(&p, 0, 1, 1);
	ck_assert_int_eq(fab_fault_coll(p.a, 2), GICE_OK);
	put1(&p, 0, 1, 2); /* collectives 2 and 3: dropped */
	put1(&p, 0, 2, 0); /* another peer: out of scope */
	ck_assert_int_eq(fab_fault_coll(p.a, 3), GICE_OK);
	put1(&p, 0, 1, 3);
	ck_assert_int_eq(fab_fault_add(p.a, &f), GICE_OK); /* its first collective is the 4th */
	put1(&p, 0, 2, 1);
	ck_assert_int_eq(fab_fault_coll(p.a, 4), GICE_OK);
	put1(&p, 0, 1, 4);
	put1(&p, 0, 2, 2);
	ck_assert_int_eq(fab_fault_coll(p.a, 5), GICE_OK);
	put1(&p, 0, 2, 3);
	tpair_settle(&p, 20);
	static const uint32_t want1[5] = {1, 1, 0, 0, 1}, want2[4] = {1, 1, 0, 1};
	for (int i = 0; i < 5; i++)
		ck_assert_msg(p.got[1][i] == want1[i], "peer 1 psn %d: %u", i, p.got[1][i]);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(p.got[2][i] == want2[i], "peer 2 psn %d: %u", i, p.got[2][i]);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 2);
	ck_assert_uint_eq(peer_st(&p, 2).dropped, 1);
	ck_assert_int_eq(fab_fault_coll(p.b, 1), GICE_ERR_INVALID); /* not a wrapper */
	tpair_close(&p);
}
END_TEST

/* latency=30ms on peer 1: its packets arrive no sooner, in order; peer 2's are not held. */
START_TEST(test_latency_holds_in_order)
{
	tpair_t p;
	uint64_t t0;

	tpair_open(&p, "latency=30ms,peer=1");
	t0 = gice_now_ns();
	for (uint32_t psn = 0; psn < 20; psn++)
		put1(&p, 0, 1, psn);
	tpair_pump(&p);
	ck_assert_uint_eq(p.got[1][0], 0);
	while (!p.got[1][19] && gice_now_ns() - t0 < 2000000000ull) {
		tpair_pump(&p);
		usleep(1000);
	}
	ck_assert_uint_ge(p.last_rx_ns - t0, 30000000ull);
	for (uint32_t psn = 0; psn < 20; psn++)
		ck_assert_uint_eq(p.got[1][psn], 1);
	ck_assert_uint_eq(peer_st(&p, 1).delayed, 20);
	put1(&p, 0, 2, 0);
	ck_assert_uint_eq(peer_st(&p, 2).delayed, 0);
	tpair_close(&p);
}
END_TEST

/* rate=2MBps: sends are refused (paced) so that the bytes sent never run ahead of the cap (the
 * bound is an upper one: a slow machine only sends less). The 10% accuracy is measured by
 * scripts/fault_rate.sh. */
START_TEST(test_rate_never_exceeded)
{
	uint8_t buf[MAXP];
	tpair_t p;
	size_t len = pkt_make(buf, 0, 1, CT_PKT_PUT, 0, 0, CT_HF_FIRST | CT_HF_LAST, MAXP - CT_HDR_BYTES);
	uint64_t t0, bytes = 0;

	tpair_open(&p, "rate=2MBps,peer=1");
	t0 = gice_now_ns();
	for (uint32_t i = 0; i < 200; i++) { /* 800 KB: 0.4 s at the cap */
		pkt_make(buf, 0, 1, CT_PKT_PUT, i, i, CT_HF_FIRST | CT_HF_LAST, MAXP - CT_HDR_BYTES);
		tsend(&p, buf, len);
		bytes += len;
	}
	double s = (double)(gice_now_ns() - t0) / 1e9;
	printf("rate=2MBps: %llu bytes in %.3f s: %.2f MB/s, %llu sends paced\n", (unsigned long long)bytes, s,
	       (double)bytes / s / 1e6, (unsigned long long)peer_st(&p, 1).paced);
	/* the bucket starts full (two packets: more than 1 ms of the rate) and may go one packet
	 * negative */
	ck_assert_double_le((double)(bytes - 3 * MAXP) / s, 2e6 * 1.01);
	ck_assert_uint_gt(peer_st(&p, 1).paced, 0);
	tpair_close(&p);
}
END_TEST

/* Adding faults keeps those in force; fab_fault_set(NULL) clears them. */
START_TEST(test_add_keeps_earlier_faults)
{
	gice_faults_t two = spec_of("drop=1,peer=2");
	tpair_t p;

	tpair_open(&p, "drop=1,peer=1");
	ck_assert_int_eq(fab_fault_add(p.a, &two), GICE_OK);
	put1(&p, 0, 1, 0);
	put1(&p, 0, 2, 0);
	put1(&p, 0, 3, 0);
	ck_assert_int_eq(fab_fault_set(p.a, NULL), GICE_OK);
	put1(&p, 0, 1, 1);
	tpair_settle(&p, 10);
	ck_assert_uint_eq(peer_st(&p, 1).dropped, 1);
	ck_assert_uint_eq(peer_st(&p, 2).dropped, 1);
	ck_assert_uint_eq(p.got[3][0], 1);
	ck_assert_uint_eq(p.got[1][1], 1);
	tpair_close(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fault_target");
	TCase *tc = tcase_create("spec");

	tcase_add_test(tc, test_spec_forms);
	tcase_add_test(tc, test_spec_coll_forms);
	tcase_add_test(tc, test_spec_refused);
	tcase_add_test(tc, test_spec_round_trip);
	tcase_add_test(tc, test_script_timeline);
	suite_add_tcase(s, tc);
	tc = tcase_create("aim");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_link_hits_only_its_link);
	tcase_add_test(tc, test_peer_hits_only_its_peer);
	tcase_add_test(tc, test_partition_cuts_between_sides);
	tcase_add_test(tc, test_control_exempt_unless_ctl);
	tcase_add_test(tc, test_after_ops);
	tcase_add_test(tc, test_nth_put_lost_for_good);
	tcase_add_test(tc, test_corrupt_msg_exactly_once);
	tcase_add_test(tc, test_same_seed_same_drops_any_order);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_coll_window);
	tcase_add_test(tc, test_latency_holds_in_order);
	tcase_add_test(tc, test_rate_never_exceeded);
	tcase_add_test(tc, test_add_keeps_earlier_faults);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
