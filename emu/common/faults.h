/* faults.h: the fault-injection spec (GICE_FAULTS, gice_faults_set). Network faults are rules
 * applied per packet sent by fabric/fab_fault*.c; stalls, hangs and kills by the engine and the
 * API. docs/faults.md has the whole language with recipes; in short:
 *
 *   spec    = group { ";" group }          groups are independent: adding one never clears another
 *   group   = item { "," item }            the scope items of a group apply to all its faults
 *   fault   = drop=P | dup=P | reorder=P | corrupt=P      probability per packet, P in [0, 1]
 *           | delay_us=N                   hold each packet a uniform random [0, N] microseconds
 *           | latency=DUR                  hold each packet exactly DUR more (order kept)
 *           | rate=N(B|KB|MB|GB)ps         token-bucket cap of the bytes sent per link
 *           | partition=A|B                drop everything between rank lists A and B (both ways)
 *           | nth_put=N                    the N-th put (1-based) is lost, every retransmission too
 *           | corrupt_msg=N                the N-th operation's first packet corrupted, once
 *           each optionally followed by a window: @T or @T+D (time, D may be inf), or
 *           @collN or @collN+K (from the N-th collective operation for K of them, K may be inf)
 *   scope   = link=A->B | peer=P[,Q..] | rank=R[,S..] (or from=) | after_ops=N | ctl=1
 *           | at=T[+D] | at=collN[+K]      the window of the group's faults that name none
 *   global  = seed=N | stall_ct=C@T+D | hang_rank=R@T | kill_rank=R@T
 *           | hang_rank=R@collN | kill_rank=R@collN   at the start of rank R's N-th collective
 * A rank list continues over commas: "partition=0,1|2,3" and "peer=1,3" are one item each.
 * Times T, D: an integer with ns, us, ms or s, or a bare integer of ms, counted from the end of
 * the device's open (GICE_FAULTS) or from the gice_faults_set call; collective operations (every
 * gice_coll_* call a device takes part in, each iteration of a persistent one) are counted per
 * device, from its open or from the call, the first being 1. Ranks named in a scope are
 * 0..63. Packets are matched by sender rank (rank=, the rank that injects) and receiver rank
 * (peer=); control packets (ACK, heartbeat, BYE) are exempt from everything but partitions
 * unless the group says ctl=1. */
#ifndef GICE_FAULTS_H
#define GICE_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#define GICE_FAULTS_MAX_STALLS 8
#define GICE_FAULTS_MAX_RULES 16
#define GICE_FAULTS_MAX_RANK 63 /* ranks a scope can name (bits of a uint64_t) */
#define GICE_FAULTS_ANY UINT64_MAX /* a rank mask matching every rank */

/* Kinds of network fault. Never renumbered (a rule is plain data). */
#define GICE_FAULT_KIND_LIST(X)                                                                     \
	X(GICE_FK_DROP, "drop")               /* p: probability per packet */                       \
	X(GICE_FK_DUP, "dup")                 /* p */                                                \
	X(GICE_FK_REORDER, "reorder")         /* p: held until the next packet (at most 1 ms) */    \
	X(GICE_FK_CORRUPT, "corrupt")         /* p: one bit flipped */                               \
	X(GICE_FK_DELAY, "delay_us")          /* n: largest hold in ns (uniform random) */           \
	X(GICE_FK_LATENCY, "latency")         /* n: hold in ns, order kept */                        \
	X(GICE_FK_RATE, "rate")               /* n: bytes per second per link */                     \
	X(GICE_FK_PARTITION, "partition")     /* from, to: the two sides */                          \
	X(GICE_FK_NTH_PUT, "nth_put")         /* n: which put (1-based) is lost for good */          \
	X(GICE_FK_CORRUPT_MSG, "corrupt_msg") /* n: which operation (1-based) is corrupted once */

enum gice_fault_kind {
#define GICE_FK_ENUM_(k, s) k,
	GICE_FAULT_KIND_LIST(GICE_FK_ENUM_)
#undef GICE_FK_ENUM_
	GICE_FK_N
};

/* One network fault with its scope and window. Plain data; unused fields zero. */
typedef struct {
	uint8_t kind;   /* enum gice_fault_kind */
	uint8_t ctl;    /* 1: control packets (ACK, heartbeat, BYE) too */
	uint8_t pad[6];
	double p;       /* DROP, DUP, REORDER, CORRUPT */
	uint64_t n;     /* DELAY, LATENCY: ns; RATE: bytes/s; NTH_PUT, CORRUPT_MSG: N >= 1 */
	uint64_t from;  /* sender ranks (bit r); PARTITION: side A */
	uint64_t to;    /* receiver ranks; PARTITION: side B */
	uint64_t at_ns; /* window start, from the origin (end of device open, or gice_faults_set) */
	uint64_t dur_ns; /* window length; UINT64_MAX: for good */
	uint64_t after_ops; /* acts once this many operations matching its scope were sent */
	uint64_t coll_at;   /* a window in collectives instead (@collN+K): from the coll_at-th (1-based; 0:
			     * a time window), for coll_n of them (UINT64_MAX: for good); at_ns, dur_ns
			     * are then 0 and UINT64_MAX */
	uint64_t coll_n;
} gice_fault_rule_t;

typedef struct {
	uint32_t ct;            /* CT index */
	uint64_t at_ns, dur_ns; /* stall at at_ns for dur_ns; dur_ns UINT64_MAX: forever */
	uint64_t ranks;         /* ranks where it applies (rank= of its group); GICE_FAULTS_ANY: all */
} gice_fault_stall_t;

typedef struct {
	gice_fault_rule_t rule[GICE_FAULTS_MAX_RULES];
	uint32_t n_rules;
	uint64_t seed; /* default 1 */
	gice_fault_stall_t stall[GICE_FAULTS_MAX_STALLS];
	uint32_t n_stall;
	int32_t hang_rank; /* -1: none */
	uint64_t hang_at_ns;
	int32_t kill_rank; /* -1: none */
	uint64_t kill_at_ns;
	uint64_t hang_coll, kill_coll; /* @collN: at the start of the rank's N-th collective instead of
					* at a time (0: at hang_at_ns / kill_at_ns) */
} gice_faults_t;

/* Parse spec (NULL or "" = no faults: no rule, seed 1, no stall, hang_rank and kill_rank -1)
 * into *out (zeroed first, padding included: two parses of one spec compare equal with memcmp).
 * Blanks around items are ignored, and so are empty items.
 * GICE_OK; GICE_ERR_CONFIG on a bad spec (unknown key, missing '=', a value that does not
 * parse or is out of range, a fault or scope key given twice in a group, a scope without a
 * fault, a scope on a partition, a rank above GICE_FAULTS_MAX_RANK, more than
 * GICE_FAULTS_MAX_RULES rules or GICE_FAULTS_MAX_STALLS stalls), logged with the whole spec,
 * the bad item and why; GICE_ERR_INVALID when out is NULL. *out is set only on success. */
int gice_faults_parse(const char *spec, gice_faults_t *out);

/* spec, then the groups of the scenario file script (NULL or "": none), parsed into *out. The
 * file is a timeline: one group a line, '#' starts a comment, and a line may start with a
 * window "@T" or "@T+D" followed by blanks, which is the window of its faults that name none
 * (as the group item at=T+D). GICE_OK; GICE_ERR_CONFIG: the file cannot be read, is above
 * 64 KiB, or the whole does not parse (logged); GICE_ERR_NO_MEMORY. */
int gice_faults_load(const char *spec, const char *script, gice_faults_t *out);

/* 1 when f has a network fault rule; 0 otherwise or when f is NULL. */
int gice_faults_any_net(const gice_faults_t *f);
/* 1 when a rule of f may corrupt packets (corrupt, corrupt_msg). */
int gice_faults_corrupts(const gice_faults_t *f);
/* 1 when a rule of f may hold packets back out of order (reorder, delay_us). */
int gice_faults_reorders(const gice_faults_t *f);
/* Name of a fault kind ("drop", ...), "?" when out of range. */
const char *gice_fault_kind_name(unsigned kind);

/* Format f as a spec that parses back to the same values: every setting that differs from
 * "no faults", plus the seed whenever a network fault is on. Empty string when there is no
 * fault. Truncated (still NUL-terminated) when len is too small; NULL f formats as no fault. */
void gice_faults_format(const gice_faults_t *f, char *buf, size_t len);

#endif
