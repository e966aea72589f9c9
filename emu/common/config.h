/* config.h: runtime parameters. Each module declares a table of gice_param_t; values come from
 * GICE_* environment variables, are range-checked, and are listed by `gice-info -c`. */
#ifndef GICE_CONFIG_H
#define GICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { GICE_PARAM_U64, GICE_PARAM_BOOL, GICE_PARAM_STR, GICE_PARAM_SIZE } gice_param_type_t;

typedef struct {
	const char *name;   /* full environment name, "GICE_SMS" */
	const char *defval; /* default as text */
	const char *help;   /* one line */
	gice_param_type_t type;
	uint64_t min, max;  /* inclusive bounds for U64/SIZE */
} gice_param_t;

/* Effective value of a U64/SIZE/BOOL parameter. SIZE accepts k/m/g suffixes (binary). A value
 * that does not parse or is out of [min, max] is rejected with a logged message naming the
 * variable, the value and the bounds: GICE_ERR_CONFIG. *out set only on success. */
int gice_param_u64(const gice_param_t *p, uint64_t *out);
/* Effective string value (environment or default); never NULL. */
const char *gice_param_str(const gice_param_t *p);
/* The value as text, for listing (env value if set, else default). */
const char *gice_param_raw(const gice_param_t *p, int *is_set);

/* Lookup by name in a table terminated by {NULL}. */
const gice_param_t *gice_param_find(const gice_param_t *table, const char *name);

/* Parameters of the common layer (GICE_LOG_LEVEL, GICE_LOG_SUBSYS). */
extern const gice_param_t gice_common_params[];

#endif
