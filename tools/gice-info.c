/* gice-info: what gice finds on this machine and how it is configured (docs/gice-info.md).
 *   gice-info      gice and libfabric versions, the providers offering FI_EP_RDM endpoints,
 *                  the provider a device opened now would use, and its memory pools (usage and
 *                  fragmentation of the compute and communication pools, GICE_COMM_POOL_BYTES)
 *   gice-info -c   every GICE_* parameter: name, effective value, default, help
 *   gice-info -s   every counter of gice_device_stats / GICE_STATS=1: name, source, help
 * Exit 0; 1 with a message on stderr when something fails. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "api/gice.h"

/* Keep in step with Version in api/gice.pc.in (gice.h has no version macro yet). */
#ifndef GICE_VERSION
#define GICE_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gice-info [-c] [-s] [-h]\n"
		"  (none)  versions, libfabric providers with RDM endpoints, the provider gice picks\n"
		"  -c      every GICE_* configuration parameter: name, value, default, help\n"
		"          (* marks values set in the environment)\n"
		"  -s      every counter of gice_device_stats and GICE_STATS=1: name, source, help\n"
		"  -h      this help\n");
}

/* ---------------------------------------------------------------- -c */

#define MAX_PARAMS 256

struct param {
	const char *name, *value, *defval, *help;
	int is_set;
};

struct plist {
	struct param p[MAX_PARAMS];
	int n, dropped;
};

static void collect(const char *name, const char *value, const char *defval, int is_set, const char *help,
		    void *arg)
{
	struct plist *l = arg;

	if (l->n == MAX_PARAMS) {
		l->dropped++;
		return;
	}
	l->p[l->n++] = (struct param){name, value, defval, help, is_set};
}

static const char *shown(const char *s) { return (s && *s) ? s : "\"\""; }

static int width(const struct plist *l, int col)
{
	int w = col == 0 ? 4 : col == 1 ? 5 : 7; /* "NAME", "VALUE", "DEFAULT" */

	for (int i = 0; i < l->n; i++) {
		const char *s = col == 0 ? l->p[i].name : shown(col == 1 ? l->p[i].value : l->p[i].defval);
		int n = (int)strlen(s);
		if (n > w)
			w = n;
	}
	return w;
}

static int list_config(void)
{
	static struct plist l;
	int wn, wv, wd, any_set = 0;

	gice_config_list(collect, &l);
	if (l.dropped) {
		fprintf(stderr, "gice-info: more than %d parameters; raise MAX_PARAMS in tools/gice-info.c\n",
			MAX_PARAMS);
		return 1;
	}
	wn = width(&l, 0);
	wv = width(&l, 1);
	wd = width(&l, 2);
	printf("  %-*s  %-*s  %-*s  %s\n", wn, "NAME", wv, "VALUE", wd, "DEFAULT", "HELP");
	for (int i = 0; i < l.n; i++) {
		const struct param *p = &l.p[i];
		any_set |= p->is_set;
		printf("%c %-*s  %-*s  %-*s  %s\n", p->is_set ? '*' : ' ', wn, p->name, wv, shown(p->value), wd,
		       shown(p->defval), p->help ? p->help : "");
	}
	if (any_set)
		printf("* set in the environment\n");
	return 0;
}

/* ---------------------------------------------------------------- -s */

/* The counters, from GICE_STATS_LIST: the fields of gice_stats_t, in order; then the per-peer
 * gauges of GICE_PEER_GAUGE_LIST (source "peer": gice_device_peer_stats only). */
#define STAT_SOURCE_ENGINE "engine"
#define STAT_SOURCE_FAULT "faults"
#define STAT_SOURCE_STORAGE "storage"
#define STAT_SOURCE_POOL "pool"

static int list_stats(void)
{
	static const struct {
		const char *name, *from, *help;
	} s[] = {
#define STAT_ROW(name, from, field, help) {#name, STAT_SOURCE_##from, help},
		GICE_STATS_LIST(STAT_ROW)
#undef STAT_ROW
#define GAUGE_ROW(name, help) {#name, "peer", help},
		GICE_PEER_GAUGE_LIST(GAUGE_ROW) /* gice_device_peer_stats only */
#undef GAUGE_ROW
	};
	int w = 4; /* "NAME" */

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		if ((int)strlen(s[i].name) > w)
			w = (int)strlen(s[i].name);
	printf("  %-*s  %-6s  %s\n", w, "NAME", "SOURCE", "HELP");
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		printf("  %-*s  %-6s  %s\n", w, s[i].name, s[i].from, s[i].help);
	return 0;
}

/* ---------------------------------------------------------------- default report */

/* Print each provider (fabric_attr->prov_name) that offers FI_EP_RDM once, with its domains. */
static int list_rdm_providers(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int rc;

	if (!hints) {
		fprintf(stderr, "gice-info: fi_allocinfo: out of memory\n");
		return 1;
	}
	/* accept every mode and memory-registration mode, as fi_info does: list what exists */
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = ~0ull;
	hints->domain_attr->mode = ~0ull;
	hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
	rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (rc == -FI_ENODATA) {
		printf("rdm providers:  none\n");
		return 0;
	}
	if (rc) {
		fprintf(stderr, "gice-info: fi_getinfo: %s\n", fi_strerror(-rc));
		return 1;
	}
	printf("rdm providers:\n");
	for (struct fi_info *i = info; i; i = i->next) {
		const char *prov = i->fabric_attr->prov_name;
		int seen = 0;
		for (struct fi_info *j = info; j != i && !seen; j = j->next)
			seen = !strcmp(j->fabric_attr->prov_name, prov);
		if (seen)
			continue;
		printf("  %-16s domains:", prov);
		/* each domain once, in fi_getinfo's order */
		for (struct fi_info *j = i; j; j = j->next) {
			int dup = 0;
			if (strcmp(j->fabric_attr->prov_name, prov))
				continue;
			for (struct fi_info *k = i; k != j && !dup; k = k->next)
				dup = !strcmp(k->fabric_attr->prov_name, prov) &&
				      !strcmp(k->domain_attr->name, j->domain_attr->name);
			if (!dup)
				printf(" %s", j->domain_attr->name);
		}
		printf("\n");
	}
	fi_freeinfo(info);
	return 0;
}

/* Open a device as a program would (attr NULL: every GICE_* default applies) and report its
 * provider. Done before listing providers: opening binds GICE_FAB_IFACE into libfabric's
 * FI_*_IFACE variables, which libfabric reads at its first fi_getinfo. */
/* One pool's line: size, use, free, largest free block and fragmentation (1 - largest / free). */
static void pool_line(char *out, size_t size, const char *name, const gice_pool_usage_t *u)
{
	double frag = u->free ? 100.0 * (1.0 - (double)u->largest_free / (double)u->free) : 0.0;

	snprintf(out, size, "%s %llu bytes: %llu used, %llu free, largest free block %llu, %u free block(s), "
		 "fragmentation %.1f%%", name, (unsigned long long)u->bytes, (unsigned long long)u->used,
		 (unsigned long long)u->free, (unsigned long long)u->largest_free, u->free_blocks, frag);
}

static char pools[2][256];

static int probe_device(char *provider, size_t size)
{
	gice_device_t *dev;
	int rc;

	if ((rc = gice_init())) {
		fprintf(stderr, "gice-info: gice_init: %s (%s)\n", gice_status_name(rc), gice_status_str(rc));
		return 1;
	}
	rc = gice_device_open(NULL, &dev);
	if (rc) {
		const char *env = getenv("GICE_FI_PROVIDER");
		fprintf(stderr, "gice-info: gice_device_open: %s (%s); provider %s%s\n", gice_status_name(rc),
			gice_status_str(rc), env && *env ? env : "auto: shm, then tcp",
			env && *env ? " (GICE_FI_PROVIDER)" : "");
		gice_finalize();
		return 1;
	}
	snprintf(provider, size, "%s", gice_device_provider(dev));
	gice_pool_usage_t u;
	const char *q = getenv("GICE_COMM_POOL_BYTES");
	if (gice_pool_usage(dev, GICE_POOL_COMPUTE, &u) == GICE_OK)
		pool_line(pools[0], sizeof(pools[0]), "compute", &u);
	if (q && strtoull(q, NULL, 0) && gice_pool_usage(dev, GICE_POOL_COMM, &u) == GICE_OK)
		pool_line(pools[1], sizeof(pools[1]), "communication", &u);
	else
		snprintf(pools[1], sizeof(pools[1]), "communication: shares the compute pool (GICE_COMM_POOL_BYTES=0)");
	if ((rc = gice_device_close(dev)) || (rc = gice_finalize())) {
		fprintf(stderr, "gice-info: closing the device: %s (%s)\n", gice_status_name(rc), gice_status_str(rc));
		return 1;
	}
	return 0;
}

static int report(void)
{
	char provider[64] = "";
	const char *env = getenv("GICE_FI_PROVIDER");
	uint32_t fv = fi_version();
	int failed = probe_device(provider, sizeof(provider));

	printf("gice:           %s\n", GICE_VERSION);
	printf("libfabric:      %u.%u (built against %u.%u)\n", FI_MAJOR(fv), FI_MINOR(fv), FI_MAJOR_VERSION,
	       FI_MINOR_VERSION);
	failed |= list_rdm_providers();
	if (*provider)
		printf("gice provider:  %s (%s)\n", provider,
		       env && *env ? "from GICE_FI_PROVIDER" : "auto: first of shm, net, tcp that opens; of net, tcp in a job spanning hosts");
	else
		printf("gice provider:  none: no device opened (see the error above)\n");
	if (*provider)
		printf("memory pools:   %s\n                %s\n", pools[0], pools[1]);
	return failed;
}

int main(int argc, char **argv)
{
	int c, config = 0, stats = 0;

	while ((c = getopt(argc, argv, "csh")) != -1) {
		switch (c) {
		case 'c':
			config = 1;
			break;
		case 's':
			stats = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gice-info: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	if (config && stats) {
		fprintf(stderr, "gice-info: -c and -s are exclusive\n");
		usage(stderr);
		return 1;
	}
	return config ? list_config() : stats ? list_stats() : report();
}
