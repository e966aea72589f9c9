/* options.c: gicerun's command line, parsed into opt (usage errors print the usage, exit 2). */
#include "tools/gicerun/gicerun.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gicerun -n N [--devices-per-rank D] [--netns NS1,NS2,...] [--port P] [--timeout SEC] "
		"[--keep-going] [--faults FILE] [--trace OUT.json] [--] prog [args...]\n"
		"  -n N                  number of ranks (1..%d)\n"
		"  --devices-per-rank D  GICE_DEVICES_PER_RANK of every rank (1..%d, default 1)\n"
		"  --netns LIST          run rank r in network namespace LIST[r %% count] (/run/netns/NAME)\n"
		"  --port P              bootstrap TCP port (1..65535; default: a free port)\n"
		"  --timeout SEC         kill the job after SEC seconds and exit 124\n"
		"  --keep-going          when a rank fails, let the others run on (to watch them notice,\n"
		"                        e.g. under GICE_FAULTS=kill_rank=...); exit with the first failure\n"
		"  --faults FILE         run the fault scenario FILE (GICE_FAULT_SCRIPT of every rank)\n"
		"  --trace OUT.json      every rank writes its GICE_TRACE; merged into OUT.json at the end\n"
		"  -h, --help            print this help\n",
		MAX_RANKS, MAX_DEVICES);
}

static int bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	return 2;
}

/* Whole-string integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

gicerun_opt_t opt = {.devices = 1};

static int parse_netns(const char *arg)
{
	size_t n = 1;

	for (const char *p = arg; *p; p++)
		n += *p == ',';
	opt.netns_buf = strdup(arg);
	opt.netns = calloc(n, sizeof(*opt.netns));
	if (!opt.netns_buf || !opt.netns)
		return bad_usage("out of memory");
	char *p = opt.netns_buf;
	for (size_t i = 0; i < n; i++) {
		char *name = p;
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0', p = comma + 1;
		if (!*name)
			return bad_usage("--netns '%s': empty namespace name at position %zu", arg, i + 1);
		if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
			return bad_usage("--netns '%s': bad namespace name '%s' (a name in /run/netns)", arg, name);
		if (strlen(name) > NAME_MAX)
			return bad_usage("--netns '%s': namespace name '%s' longer than %d bytes", arg, name,
					 NAME_MAX);
		opt.netns[opt.nnetns++] = name;
	}
	return 0;
}

int parse_args(int argc, char **argv)
{
	static const struct option lo[] = {{"devices-per-rank", required_argument, 0, 'd'},
					   {"netns", required_argument, 0, 'N'},
					   {"port", required_argument, 0, 'p'},
					   {"timeout", required_argument, 0, 't'},
					   {"keep-going", no_argument, 0, 'k'},
					   {"faults", required_argument, 0, 'f'},
					   {"trace", required_argument, 0, 'T'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	int ch;

	/* '+': stop at the program name, its options are its own */
	while ((ch = getopt_long(argc, argv, "+n:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (parse_long(optarg, 1, MAX_RANKS, &opt.nranks))
				return bad_usage("bad -n '%s' (want an integer 1..%d)", optarg, MAX_RANKS);
			break;
		case 'd':
			if (parse_long(optarg, 1, MAX_DEVICES, &opt.devices))
				return bad_usage("bad --devices-per-rank '%s' (want an integer 1..%d)", optarg,
						 MAX_DEVICES);
			break;
		case 'p':
			if (parse_long(optarg, 1, 65535, &opt.port))
				return bad_usage("bad --port '%s' (want an integer 1..65535)", optarg);
			break;
		case 't': {
			char *end;
			errno = 0;
			opt.timeout_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(opt.timeout_s) || opt.timeout_s <= 0 ||
			    opt.timeout_s > MAX_TIMEOUT_S)
				return bad_usage("bad --timeout '%s' (want seconds, > 0 and <= %.0f)", optarg,
						 MAX_TIMEOUT_S);
			break;
		}
		case 'N': {
			int rc = parse_netns(optarg);
			if (rc)
				return rc;
			break;
		}
		case 'k': opt.keep_going = 1; break;
		case 'f':
			/* every rank reads it at gice_init: a path that is not readable here fails now */
			if (access(optarg, R_OK))
				return bad_usage("cannot read the fault scenario '%s': %s", optarg, strerror(errno));
			if (setenv("GICE_FAULT_SCRIPT", optarg, 1))
				return bad_usage("cannot set GICE_FAULT_SCRIPT: %s", strerror(errno));
			break;
		case 'T':
			if (!*optarg)
				return bad_usage("--trace needs a file name");
			opt.trace = optarg;
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (!opt.nranks)
		return bad_usage("-n N is required");
	if (optind >= argc)
		return bad_usage("no program to run");
	opt.argv = argv + optind;
	return 0;
}
