/* crr.c — the floor of a TCP connect/request/response/close transaction on this host, for
 * bench/peers (netperf TCP_CRR without netperf).
 *
 * The client opens one connection per transaction: socket(), connect(), send() the request,
 * recv() the response, close() — nothing else, and one clock_gettime(CLOCK_MONOTONIC) per
 * transaction like netsweep's per-transaction timing. The server is a plain blocking loop:
 * accept(), recv() the request, send() the response, recv() until the client's close, close().
 * The client closes first, so it holds the TIME_WAIT (as with netperf); loopback reuses
 * TIME_WAIT ports (net.ipv4.tcp_tw_reuse=2, the default).
 *
 *   crr server PORT                  serve until 10 s without a connection, then exit
 *   crr client HOST PORT N [SIZE] [nodelay|options]
 *
 * The client runs 1000 untimed transactions, then N timed ones, and prints one line:
 *   size=1 n=N tps=… mean_ns=… median_ns=… min_ns=… p99_ns=…   (whole transactions)
 * `nodelay` also sets TCP_NODELAY on every client socket (netsweep's default); `options` sets
 * it and SO_SNDTIMEO and SO_RCVTIMEO (5 s), the three calls netsweep's client makes on each
 * socket: they show what those setsockopt calls cost.
 * Build: gcc -O2 -o crr crr.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000
#define MAXSIZE 65536

static void die(const char *what) {
    perror(what);
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends or receives exactly len bytes (a stream may split them); 0 on success. */
static int full(int fd, char *buf, size_t len, int sending) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = sending ? send(fd, buf + off, len - off, MSG_NOSIGNAL)
                            : recv(fd, buf + off, len - off, 0);
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

/* The first 4 bytes of the first connection carry the size; every later connection
 * carries one request of that size. */
static int serve(int port) {
    static char buf[MAXSIZE];
    int one = 1;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        die("socket");
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(s, 128) < 0)
        die("listen");
    /* Bounds accept(); Linux accepted sockets inherit it, bounding their recv() too. */
    struct timeval tv = {10, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint32_t size = 0;
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            break; /* 10 s without a client: done */
        if (size == 0) {
            if (full(c, (char *)&size, sizeof size, 0) < 0 || size == 0 || size > MAXSIZE) {
                close(c);
                break;
            }
        } else if (full(c, buf, size, 0) == 0) {
            full(c, buf, size, 1);
            while (recv(c, buf, 1, 0) > 0) {
            }
        }
        close(c);
    }
    close(s);
    return 0;
}

static int client(const char *host, int port, long n, uint32_t size, int opts) {
    static char buf[MAXSIZE];
    int one = 1;
    struct timeval tv = {5, 0};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "crr: %s is not an IPv4 address\n", host);
        return 2;
    }
    /* Tell the server the size (retrying while it starts). */
    for (int tries = 0;; tries++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0)
            die("socket");
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
            if (full(s, (char *)&size, sizeof size, 1) < 0)
                die("send size");
            close(s);
            break;
        }
        close(s);
        if (tries > 100)
            die("connect");
        usleep(20000);
    }
    memset(buf, 'x', size);
    uint64_t *txn = malloc(sizeof *txn * (size_t)n);
    if (!txn)
        die("malloc");
    uint64_t start = 0;
    for (long i = -WARMUP; i < n; i++) {
        if (i == 0)
            start = now_ns();
        uint64_t t0 = now_ns();
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0)
            die("socket");
        if (opts > 0)
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (opts > 1) {
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        }
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
            die("connect");
        if (full(s, buf, size, 1) < 0 || full(s, buf, size, 0) < 0)
            die("transaction");
        close(s);
        uint64_t t1 = now_ns();
        if (i >= 0)
            txn[i] = t1 - t0;
    }
    double wall = (double)(now_ns() - start);
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += (double)txn[i];
    qsort(txn, (size_t)n, sizeof *txn, cmp_u64);
    printf("size=%u n=%ld tps=%.1f mean_ns=%.1f median_ns=%.1f min_ns=%.1f p99_ns=%.1f\n", size,
           n, 1e9 * (double)n / wall, sum / (double)n, (double)txn[n / 2], (double)txn[0],
           (double)txn[(size_t)((double)n * 0.99)]);
    free(txn);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "server") == 0)
        return serve(atoi(argv[2]));
    if (argc >= 5 && strcmp(argv[1], "client") == 0) {
        long n = atol(argv[4]);
        long size = argc > 5 ? atol(argv[5]) : 1;
        int opts = argc <= 6                        ? 0
                   : strcmp(argv[6], "nodelay") == 0 ? 1
                   : strcmp(argv[6], "options") == 0 ? 2
                                                     : -1;
        if (opts < 0) {
            fprintf(stderr, "crr: the last argument is nodelay or options\n");
            return 2;
        }
        if (n < 1 || size < 1 || size > MAXSIZE) {
            fprintf(stderr, "crr: N must be >= 1 and SIZE in 1..%d\n", MAXSIZE);
            return 2;
        }
        return client(argv[2], atoi(argv[3]), n, (uint32_t)size, opts);
    }
    fprintf(stderr, "usage: crr server PORT\n"
                    "       crr client HOST PORT N [SIZE] [nodelay|options]\n");
    return 2;
}
