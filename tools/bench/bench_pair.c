/* bench_pair.c: the two devices of a pair benchmark (put, stress, rate) — both in this process
 * when it runs alone, else one per rank, ranks paired 0<->1, 2<->3, ... (bench.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

size_t bench_pair_sizes(gice_device_attr_t *attr)
{
	size_t maxb = 1;

	for (int i = 0; i < opt.nsizes; i++)
		maxb = opt.sizes[i] > maxb ? opt.sizes[i] : maxb;
	if (!attr->hbm_bytes && maxb * 2 + (1 << 20) > (64u << 20))
		attr->hbm_bytes = maxb * 2 + (16u << 20);
	return maxb;
}

void bench_pair_open(struct bench_pair *p, const gice_device_attr_t *attr)
{
	memset(p, 0, sizeof(*p));
	p->world = gice_world_size();
	p->rank = gice_rank();
	p->role = p->world == 1 ? 0 : p->rank & 1;
	p->partner = p->rank ^ 1;
	p->active = p->world == 1 || p->partner < p->world;
	p->pairs = p->world == 1 ? 1 : p->world / 2;
	p->sd[0].local = p->world == 1 || p->role == 0;
	p->sd[1].local = p->world == 1 || p->role == 1;
	for (int i = 0; i < 2; i++) {
		struct bench_side *s = &p->sd[i];
		if (!s->local)
			continue;
		CHECK(gice_device_open(attr, &s->d)); /* collective across ranks */
		s->gid = gice_device_id(s->d);
		CHECK(gice_stream_create(s->d, &s->s));
	}
	if (p->world > 1 && p->active)
		p->sd[1 - p->role].gid = gice_device_id_of(p->partner, 0);
}

void bench_pair_connect(struct bench_pair *p)
{
	for (int i = 0; i < 2 && p->active; i++)
		if (p->sd[i].local)
			CHECK(gice_conn_open(p->sd[i].d, p->sd[1 - i].gid, NULL, &p->sd[i].c));
}

void bench_pair_exchange(struct bench_pair *p, void *pub, size_t len)
{
	uint8_t *all, *side = pub;

	if (p->world == 1)
		return;
	all = malloc(p->world * len);
	if (!all)
		die("bench_pair_exchange: malloc", GICE_ERR_NO_MEMORY);
	CHECK(gice_allgather(side + p->role * len, len, all));
	if (p->active)
		memcpy(side + (1 - p->role) * len, all + p->partner * len, len);
	free(all);
}

void bench_pair_close(struct bench_pair *p)
{
	for (int i = 0; i < 2; i++) {
		if (!p->sd[i].local)
			continue;
		CHECK(gice_stream_destroy(p->sd[i].s));
		CHECK(gice_device_close(p->sd[i].d));
	}
}

int bench_counter_exact(const char *bench, const struct bench_side *s, gice_counter_t c, uint64_t want,
			const char *what)
{
	gice_counter_state_t st;

	CHECK(gice_counter_get(s->d, c, &st));
	if (st.value == want && !st.fail)
		return 0;
	fprintf(stderr, "%s: device %u: FAILED: %s (counter %u) reads %llu, expected exactly %llu", bench, s->gid, what,
		c, (unsigned long long)st.value, (unsigned long long)want);
	if (st.fail)
		fprintf(stderr, "; it records %llu failed (last %s)", (unsigned long long)st.fail,
			gice_status_name(st.status));
	fputc('\n', stderr);
	return 1;
}
