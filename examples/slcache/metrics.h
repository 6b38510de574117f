/* SPDX-License-Identifier: MIT */
#ifndef SLCACHE_METRICS_H
#define SLCACHE_METRICS_H

#include <softlimit/softlimit.h>

/**
 * metrics_start() - with --metrics-port, listen on opt.addr:metrics_port
 * and serve GET /metrics: the OpenMetrics dump of the subtree that
 * @scope() returns at each scrape (404 for other paths, 400 for what is not
 * an HTTP/1.x request, 500 when @scope() is NULL).  0, or -1 with a message
 * on stderr.  Without --metrics-port it does nothing and returns 0.
 */
int metrics_start(sl_group *(*scope)(void));

/** Stops the metrics thread and closes its socket (nothing if not started). */
void metrics_stop(void);

#endif /* SLCACHE_METRICS_H */
