// crumbs_hooks.c — the armed hook table: NULL in the product (kit/crumbs_hooks.h).
#include "kit/crumbs_hooks.h"

#include <stddef.h>

const crumbs__hooks *crumbs__hooks_armed = NULL;
