/* fab_shm.c: leftovers of libfabric's shm provider. Its regions are named /dev/shm/<pid>:...;
 * those of a dead process whose pid we now hold make our endpoints fail (EBUSY).
 * fab_shm_remove (fabric.h) removes a pid's regions (launchers and tests clean up after a
 * killed rank); fab_ofi_sweep_stale_shm removes those left under our own pid before this
 * process started (the ofi backend runs it once per process, at its first open);
 * fab_shm_unlink_left unlinks the region of an endpoint left open to the process's exit. */
#include "fabric/fab_ofi_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* When this process started (CLOCK_REALTIME seconds), from /proc; 0 if unknown. */
static double ofi_process_start(void)
{
	char buf[1024], *p;
	unsigned long long ticks = 0, btime = 0;
	FILE *f = fopen("/proc/self/stat", "r");

	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* after "pid (comm)": field 3 is state ... field 22 is starttime */
	for (int field = 3; p && field <= 22; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &ticks) != 1 || !(f = fopen("/proc/stat", "r")))
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime ? (double)btime + (double)ticks / (double)sysconf(_SC_CLK_TCK) : 0;
}

int fab_shm_remove(int pid, double before_s)
{
	char prefix[24], path[300];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), "%d:", pid);
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	struct stat st;
	int removed = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, n))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		if (before_s > 0 && (stat(path, &st) ||
				     (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9 >= before_s))
			continue;
		if (!shm_unlink(de->d_name))
			removed++;
	}
	closedir(d);
	return removed;
}

/* No live process holds our pid: shm regions named after it and last written before this
 * process started were left by a dead one, and would make our endpoints fail (EBUSY). */
void fab_ofi_sweep_stale_shm(void)
{
	double start = ofi_process_start();
	int swept = start > 0 ? fab_shm_remove((int)getpid(), start - 0.02) : 0;

	if (swept)
		gice_info("fab", "removed %d shm region(s) /dev/shm/%d:* left by a dead process with our pid", swept,
			  (int)getpid());
}

int fab_shm_unlink_left(fab_ep_t *ep)
{
	static const char prefix[] = "fi_shm://"; /* the shm provider's address: the region's name */
	char name[128];
	size_t len = sizeof(name) - 1;

	if (!ep || strncmp(ep->provider, "shm", 3) || fab_getname(ep, name, &len))
		return 0;
	name[GICE_MIN(len, sizeof(name) - 1)] = 0; /* a string; some versions give a larger len */
	const char *region = name + sizeof(prefix) - 1;
	if (strncmp(name, prefix, sizeof(prefix) - 1) || !*region || strchr(region, '/'))
		return 0;
	if (shm_unlink(region)) {
		if (errno != ENOENT) /* ENOENT: unlinked already (a second abandoned device) */
			gice_warn("fab", "endpoint left to the process's exit: shm_unlink of /dev/shm/%s: %s", region,
				  strerror(errno));
		return 0;
	}
	gice_info("fab", "endpoint left to the process's exit: /dev/shm/%s unlinked (still mapped here)", region);
	return 1;
}
