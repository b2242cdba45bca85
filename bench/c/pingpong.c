/* pingpong.c — the floor of a sockets round trip on this host, for bench/peers.
 *
 * A blocking send()/recv() ping-pong over TCP (TCP_NODELAY) or UDP on loopback, nothing
 * else: no timers in the loop but one clock_gettime(CLOCK_MONOTONIC) per round trip, the
 * same as netsweep's per-round-trip timing.
 *
 *   pingpong server tcp|udp PORT            serve one client, then exit (10 s idle timeout)
 *   pingpong client tcp|udp HOST PORT N [SIZE]
 *
 * The client runs 1000 untimed round trips, then N timed ones, and prints one line:
 *   proto=tcp size=1 n=N mean_ns=… median_ns=… min_ns=… p99_ns=…   (all RTT/2)
 * Build: gcc -O2 -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
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
#define MAXSIZE 65507

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

static void timeout(int fd, int sec) {
    struct timeval tv = {sec, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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

static int serve(int tcp, int port) {
    static char buf[MAXSIZE + 1];
    int one = 1;
    int s = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    if (s < 0)
        die("socket");
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    timeout(s, 10);
    if (tcp) {
        if (listen(s, 1) < 0)
            die("listen");
        int c = accept(s, NULL, NULL);
        if (c < 0)
            die("accept");
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeout(c, 10);
        uint32_t size;
        if (full(c, (char *)&size, sizeof size, 0) < 0 || size == 0 || size > MAXSIZE)
            return 1;
        while (full(c, buf, size, 0) == 0 && full(c, buf, size, 1) == 0) {
        }
        close(c);
    } else {
        for (;;) {
            struct sockaddr_storage from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            if (n <= 0) /* timeout, or the client's empty "done" datagram */
                break;
            if (sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) < 0)
                break;
        }
    }
    close(s);
    return 0;
}

static int client(int tcp, const char *host, int port, long n, uint32_t size) {
    static char buf[MAXSIZE + 1];
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "pingpong: %s is not an IPv4 address\n", host);
        return 2;
    }
    int s = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    if (s < 0)
        die("socket");
    timeout(s, 5);
    for (int tries = 0; connect(s, (struct sockaddr *)&a, sizeof a) < 0; tries++) {
        if (tries > 100)
            die("connect");
        usleep(20000);
    }
    if (tcp) {
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (full(s, (char *)&size, sizeof size, 1) < 0)
            die("send size");
    }
    memset(buf, 'x', size);
    uint64_t *rtt = malloc(sizeof *rtt * (size_t)n);
    if (!rtt)
        die("malloc");
    for (long i = -WARMUP; i < n; i++) {
        uint64_t t0 = now_ns();
        if (tcp) {
            if (full(s, buf, size, 1) < 0 || full(s, buf, size, 0) < 0)
                die("tcp round trip");
        } else {
            if (send(s, buf, size, 0) != (ssize_t)size)
                die("udp send");
            if (recv(s, buf, sizeof buf, 0) != (ssize_t)size)
                die("udp recv (lost or timed out)");
        }
        uint64_t t1 = now_ns();
        if (i >= 0)
            rtt[i] = t1 - t0;
    }
    if (!tcp)
        send(s, buf, 0, 0);
    close(s);
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += (double)rtt[i];
    qsort(rtt, (size_t)n, sizeof *rtt, cmp_u64);
    printf("proto=%s size=%u n=%ld mean_ns=%.1f median_ns=%.1f min_ns=%.1f p99_ns=%.1f\n",
           tcp ? "tcp" : "udp", size, n, sum / (double)n / 2, rtt[n / 2] / 2.0, rtt[0] / 2.0,
           rtt[(size_t)((double)n * 0.99)] / 2.0);
    free(rtt);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "server") == 0)
        return serve(strcmp(argv[2], "tcp") == 0, atoi(argv[3]));
    if (argc >= 6 && strcmp(argv[1], "client") == 0) {
        long n = atol(argv[5]);
        long size = argc > 6 ? atol(argv[6]) : 1;
        if (n < 1 || size < 1 || size > MAXSIZE) {
            fprintf(stderr, "pingpong: N must be >= 1 and SIZE in 1..%d\n", MAXSIZE);
            return 2;
        }
        return client(strcmp(argv[2], "tcp") == 0, argv[3], atoi(argv[4]), n, (uint32_t)size);
    }
    fprintf(stderr, "usage: pingpong server tcp|udp PORT\n"
                    "       pingpong client tcp|udp HOST PORT N [SIZE]\n");
    return 2;
}
