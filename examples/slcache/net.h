/* SPDX-License-Identifier: MIT */
#ifndef SLCACHE_NET_H
#define SLCACHE_NET_H

/** Listen on opt.addr:opt.port and serve until SIGINT or SIGTERM; 0, or 1
 * when the server could not start. */
int net_run(void);

/** A non-blocking listening TCP socket on @addr:@port, or -1 (with a
 * message on stderr). */
int net_listen(const char *addr, const char *port);

#endif /* SLCACHE_NET_H */
