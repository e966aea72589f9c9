/* faults.h: the fault-injection spec (GICE_FAULTS). Network faults are applied per packet sent by
 * fabric/fab_fault.c; stalls, hangs and kills by the engine. The spec is comma-separated
 * key=value:
 *   drop=P dup=P reorder=P corrupt=P   probability per packet sent, P in [0, 1]
 *   delay_us=N                         hold each packet a uniform random [0, N] microseconds
 *   seed=N                             seed of the per-endpoint random sequence (default 1)
 *   stall_ct=C@T+D                     CT C stalls at T for D (repeatable, at most 8)
 *   hang_rank=R@T  kill_rank=R@T       rank R hangs / dies at T
 * T and D are durations: an integer with ns, us, ms or s, or a bare integer of ms; D may be inf.
 * Each key but stall_ct at most once. */
#ifndef GICE_FAULTS_H
#define GICE_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#define GICE_FAULTS_MAX_STALLS 8

typedef struct {
	uint32_t ct;            /* CT index */
	uint64_t at_ns, dur_ns; /* stall at at_ns for dur_ns; dur_ns UINT64_MAX: forever */
} gice_fault_stall_t;

typedef struct {
	double drop, dup, reorder, corrupt; /* per packet sent, each in [0, 1] */
	uint64_t delay_us; /* each packet is held a uniform random time in [0, delay_us] before it goes out */
	uint64_t seed;     /* default 1 */
	gice_fault_stall_t stall[GICE_FAULTS_MAX_STALLS];
	uint32_t n_stall;
	int32_t hang_rank; /* -1: none */
	uint64_t hang_at_ns;
	int32_t kill_rank; /* -1: none */
	uint64_t kill_at_ns;
} gice_faults_t;

/* Parse spec (NULL or "" = no faults: zero probabilities, seed 1, no stall, hang_rank and
 * kill_rank -1) into *out. Blanks around tokens are ignored, and so are empty tokens.
 * GICE_OK; GICE_ERR_CONFIG on a bad spec (unknown key, missing '=', a value that does not
 * parse or is out of range, a key given twice, more than GICE_FAULTS_MAX_STALLS stalls), logged
 * with the whole spec, the bad token and why; GICE_ERR_INVALID when out is NULL. *out is set
 * only on success. */
int gice_faults_parse(const char *spec, gice_faults_t *out);

/* 1 when any network fault is on (drop, dup, reorder, corrupt above 0, or delay_us above 0);
 * 0 otherwise or when f is NULL. */
int gice_faults_any_net(const gice_faults_t *f);

/* Format f as a spec that parses back to the same values, e.g. "drop=0.05,seed=7": every
 * setting that differs from "no faults", plus the seed whenever a network fault is on. Empty
 * string when there is no fault. Truncated (still NUL-terminated) when len is too small; NULL f
 * formats as no fault. */
void gice_faults_format(const gice_faults_t *f, char *buf, size_t len);

#endif
