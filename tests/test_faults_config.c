/* Description: the settings a fault-injection run reads from the environment. GICE_FAULTS:
 * every key parses to the exact values (rules unscoped and for good, stalls, hang and kill
 * times, the seed), bad specs are GICE_ERR_CONFIG and leave the output untouched, formatting
 * reads back the same, and the parameter is registered with a help that says what empty means.
 * GICE_LOG_LEVEL (which the provider probes of the other test_faults_* binaries set to off):
 * off in any case silences every message, errors included; error keeps errors only; an unknown
 * level is reported, naming the choices, and is warn. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/common/faults.h"
#include "fabric/fabric.h"
#include "tests/test_faults.h"

/* ================================================================ GICE_FAULTS */

START_TEST(test_faults_parse_valid)
{
	gice_faults_t f;

	/* nothing */
	ck_assert_int_eq(gice_faults_parse(NULL, &f), GICE_OK);
	ck_assert_uint_eq(f.n_rules, 0);
	ck_assert_uint_eq(f.seed, 1);
	ck_assert_uint_eq(f.n_stall, 0);
	ck_assert_int_eq(f.hang_rank, -1);
	ck_assert_int_eq(f.kill_rank, -1);
	ck_assert_int_eq(gice_faults_any_net(&f), 0);
	ck_assert_int_eq(gice_faults_parse("", &f), GICE_OK);
	ck_assert_int_eq(gice_faults_any_net(&f), 0);
	ck_assert_int_eq(gice_faults_any_net(NULL), 0);

	/* every key */
	ck_assert_int_eq(gice_faults_parse("drop=0.05,dup=0.25,reorder=1,corrupt=0,delay_us=300,seed=7,"
					   "stall_ct=2@2s+500ms,stall_ct=0@200us+inf,stall_ct=1@1500+100ns,"
					   "hang_rank=3@10s,kill_rank=1@250ms",
					   &f),
			 GICE_OK);
	ck_assert_uint_eq(f.n_rules, 5);
	ck_assert(f.rule[0].kind == GICE_FK_DROP && f.rule[0].p == 0.05);
	ck_assert(f.rule[1].kind == GICE_FK_DUP && f.rule[1].p == 0.25);
	ck_assert(f.rule[2].kind == GICE_FK_REORDER && f.rule[2].p == 1.0);
	ck_assert(f.rule[3].kind == GICE_FK_CORRUPT && f.rule[3].p == 0.0);
	ck_assert(f.rule[4].kind == GICE_FK_DELAY && f.rule[4].n == 300000);
	for (int i = 0; i < 5; i++) { /* unscoped, for good */
		ck_assert_uint_eq(f.rule[i].from, GICE_FAULTS_ANY);
		ck_assert_uint_eq(f.rule[i].to, GICE_FAULTS_ANY);
		ck_assert_uint_eq(f.rule[i].at_ns, 0);
		ck_assert_uint_eq(f.rule[i].dur_ns, UINT64_MAX);
	}
	ck_assert_uint_eq(f.seed, 7);
	ck_assert_uint_eq(f.n_stall, 3);
	ck_assert_uint_eq(f.stall[0].ct, 2);
	ck_assert_uint_eq(f.stall[0].at_ns, 2000000000ull);
	ck_assert_uint_eq(f.stall[0].dur_ns, 500000000ull);
	ck_assert_uint_eq(f.stall[1].ct, 0);
	ck_assert_uint_eq(f.stall[1].at_ns, 200000ull);
	ck_assert_uint_eq(f.stall[1].dur_ns, UINT64_MAX);
	ck_assert_uint_eq(f.stall[2].ct, 1);
	ck_assert_uint_eq(f.stall[2].at_ns, 1500000000ull); /* bare number: ms */
	ck_assert_uint_eq(f.stall[2].dur_ns, 100);
	ck_assert_int_eq(f.hang_rank, 3);
	ck_assert_uint_eq(f.hang_at_ns, 10000000000ull);
	ck_assert_int_eq(f.kill_rank, 1);
	ck_assert_uint_eq(f.kill_at_ns, 250000000ull);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);

	/* blanks and empty tokens are fine; each network fault alone turns "any" on */
	ck_assert_int_eq(gice_faults_parse(" drop = 0.5 , ,seed=18446744073709551615,", &f), GICE_OK);
	ck_assert(f.n_rules == 1 && f.rule[0].p == 0.5);
	ck_assert_uint_eq(f.seed, UINT64_MAX);
	ck_assert_int_eq(gice_faults_parse("delay_us=1", &f), GICE_OK);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);
	ck_assert_int_eq(gice_faults_parse("corrupt=1e-3", &f), GICE_OK);
	ck_assert(f.rule[0].kind == GICE_FK_CORRUPT && f.rule[0].p == 0.001);
	ck_assert_int_eq(gice_faults_any_net(&f), 1);
	ck_assert_int_eq(gice_faults_parse("kill_rank=0@0", &f), GICE_OK);
	ck_assert_int_eq(f.kill_rank, 0);
	ck_assert_uint_eq(f.kill_at_ns, 0);
	ck_assert_int_eq(gice_faults_any_net(&f), 0); /* kills are not network faults */

	/* eight stalls is the limit */
	ck_assert_int_eq(gice_faults_parse("stall_ct=0@1+1,stall_ct=1@1+1,stall_ct=2@1+1,stall_ct=3@1+1,"
					   "stall_ct=4@1+1,stall_ct=5@1+1,stall_ct=6@1+1,stall_ct=7@1s+2s",
					   &f),
			 GICE_OK);
	ck_assert_uint_eq(f.n_stall, GICE_FAULTS_MAX_STALLS);
	ck_assert_uint_eq(f.stall[7].ct, 7);
	ck_assert_uint_eq(f.stall[7].dur_ns, 2000000000ull);
}
END_TEST

START_TEST(test_faults_parse_invalid)
{
	static const char *const bad[] = {
		"bogus=1",                /* unknown key */
		"drop",                   /* no '=' */
		"drop=",                  /* no value */
		"drop=1.5",               /* P > 1 */
		"drop=-0.1",              /* P < 0 */
		"dup=nan",                /* not a number in range */
		"reorder=0.1x",           /* trailing junk */
		"corrupt=inf",            /* not finite */
		"drop=0.1,drop=0.2",      /* twice */
		"delay_us=-5",            /* not an integer */
		"delay_us=1.5",           /* not an integer */
		"seed=99999999999999999999", /* above 64 bits */
		"stall_ct=1",             /* missing '@' */
		"stall_ct=1@2s",          /* missing '+' */
		"stall_ct=1@2x+1s",       /* bad duration unit */
		"stall_ct=1@2s+",         /* empty duration */
		"stall_ct=1@inf+1s",      /* inf only for the duration */
		"stall_ct=x@1s+1s",       /* bad CT */
		"stall_ct=1@s+1s",        /* unit without number */
		"hang_rank=1",            /* missing '@' */
		"hang_rank=1@2 s",        /* blank inside */
		"kill_rank=-1@1s",        /* negative rank */
		"kill_rank=2147483648@1s", /* above int32 */
		"stall_ct=0@1+1,stall_ct=1@1+1,stall_ct=2@1+1,stall_ct=3@1+1,stall_ct=4@1+1,"
		"stall_ct=5@1+1,stall_ct=6@1+1,stall_ct=7@1+1,stall_ct=8@1+1", /* nine stalls */
		"drop=0.1:dup=0.1",       /* wrong separator */
	};
	gice_faults_t f, before;

	memset(&f, 0xa5, sizeof(f));
	before = f;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(gice_faults_parse(bad[i], &f) == GICE_ERR_CONFIG, "\"%s\" was accepted", bad[i]);
		ck_assert_msg(!memcmp(&f, &before, sizeof(f)), "\"%s\" changed the output", bad[i]);
	}
	ck_assert_int_eq(gice_faults_parse("drop=0.1", NULL), GICE_ERR_INVALID);
}
END_TEST

START_TEST(test_faults_format_round_trip)
{
	static const char *const specs[] = {
		"",
		"drop=0.05,seed=7",
		"drop=0.3,dup=0.1,reorder=0.2,corrupt=0.01,delay_us=250,seed=99",
		"seed=5",
		"stall_ct=2@2s+500ms,stall_ct=0@200us+inf,stall_ct=1@1500+100ns,hang_rank=3@10s,kill_rank=1@0",
		"drop=0.1234567890123,seed=1",
	};
	char buf[512];
	gice_faults_t f, g;

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		ck_assert_int_eq(gice_faults_parse(specs[i], &f), GICE_OK);
		gice_faults_format(&f, buf, sizeof(buf));
		ck_assert_msg(gice_faults_parse(buf, &g) == GICE_OK, "\"%s\" formatted as \"%s\"", specs[i], buf);
		ck_assert_msg(!memcmp(&f, &g, sizeof(f)), "\"%s\" formatted as \"%s\" reads back differently", specs[i],
			      buf);
	}
	ck_assert_int_eq(gice_faults_parse("seed=7,drop=0.05", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "drop=0.05,seed=7");
	ck_assert_int_eq(gice_faults_parse("stall_ct=1@1500+inf", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "stall_ct=1@1500ms+inf");
	ck_assert_int_eq(gice_faults_parse("", &f), GICE_OK);
	gice_faults_format(&f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	gice_faults_format(NULL, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	/* a short buffer is cut, and still a string */
	ck_assert_int_eq(gice_faults_parse("drop=0.05,seed=7", &f), GICE_OK);
	gice_faults_format(&f, buf, 6);
	ck_assert_str_eq(buf, "drop=");
}
END_TEST

START_TEST(test_faults_param_registered)
{
	const gice_param_t *p = gice_param_find(fab_params, "GICE_FAULTS");

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(p->type, GICE_PARAM_STR);
	ck_assert_str_eq(p->defval, "");
	ck_assert_ptr_nonnull(strstr(p->help, "empty"));
	ck_assert_ptr_nonnull(strstr(p->help, "stall_ct"));
	printf("GICE_FAULTS: %s\n", p->help);
}
END_TEST

/* ================================================================ GICE_LOG_LEVEL */

/* In a child with GICE_LOG_LEVEL=level: log one error and one warning into a file and return
 * which levels were enabled (bit 0 error, bit 1 warn, bit 2 trace) in *mask; the file's text
 * in out. */
static void log_child(const char *level, int *mask, char *out, size_t outlen)
{
	char path[] = "/tmp/gice-log-XXXXXX";
	int fd = mkstemp(path), w;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fd, 2);
		setenv("GICE_LOG_LEVEL", level, 1);
		setenv("GICE_LOG_SUBSYS", "all", 1);
		gice_error("ct", "an error line");
		gice_warn("ct", "a warning line");
		_exit(gice_log_enabled(GICE_LOG_ERROR, "ct") | gice_log_enabled(GICE_LOG_WARN, "ct") << 1 |
		      gice_log_enabled(GICE_LOG_TRACE, "ct") << 2);
	}
	ck_assert_int_eq(waitpid(pid, &w, 0), pid);
	ck_assert(WIFEXITED(w));
	*mask = WEXITSTATUS(w);
	n = pread(fd, out, outlen - 1, 0);
	ck_assert_int_ge(n, 0);
	out[n] = '\0';
	close(fd);
	unlink(path);
}

/* GICE_LOG_LEVEL=off (any case) is accepted and silences every level, errors included; error
 * keeps errors only; an unknown level is reported, naming off among the choices, and is warn. */
START_TEST(test_log_level_off)
{
	char out[4096];
	int mask;

	log_child("off", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 0);
	ck_assert_msg(!*out, "GICE_LOG_LEVEL=off printed: %s", out);
	log_child("OFF", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 0);
	ck_assert_msg(!*out, "GICE_LOG_LEVEL=OFF printed: %s", out);
	log_child("error", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 1);
	ck_assert_msg(strstr(out, "an error line") && !strstr(out, "a warning line"), "output: %s", out);
	log_child("trace", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 7);
	log_child("quiet", &mask, out, sizeof(out));
	ck_assert_int_eq(mask, 3);
	ck_assert_msg(strstr(out, "GICE_LOG_LEVEL=\"quiet\" is not one of off, error,"), "output: %s", out);
	ck_assert_msg(strstr(out, "a warning line"), "output: %s", out);
	const gice_param_t *p = gice_param_find(gice_common_params, "GICE_LOG_LEVEL");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(strstr(p->help, "off (no messages at all)"));
}
END_TEST

int main(void)
{
	struct fault_case cases[] = {
		{"faults_parse_valid", test_faults_parse_valid, 0, NULL},
		{"faults_parse_invalid", test_faults_parse_invalid, 0, NULL},
		{"faults_format_round_trip", test_faults_format_round_trip, 0, NULL},
		{"faults_param_registered", test_faults_param_registered, 0, NULL},
		{"log_level_off", test_log_level_off, 0, NULL},
	};

	return fault_main("faults_config", cases, sizeof(cases) / sizeof(cases[0]));
}
