/* bench/c/mpi_osu.c — the MPI floor netsweep's `-t mpi` is compared with: the calls of the
 * OSU micro-benchmarks' osu_latency (MPI_Send/MPI_Recv ping-pong; latency = time / 2 /
 * iterations) and osu_bw (a window of 64 MPI_Isend/MPI_Irecv, all on one buffer per side as
 * osu_bw posts them, MPI_Waitall, a 4-byte ack; bandwidth = bytes / time), written for this
 * benchmark (Debian has no OSU package).
 *
 *   mpirun -np 2 mpi_osu latency SIZE SECONDS
 *   mpirun -np 2 mpi_osu bw SIZE SECONDS
 *   mpirun -np 2 mpi_osu bounded SIZE SECONDS [serialized]
 *
 * `bounded` is the ping-pong with the calls a tool that must never hang makes instead:
 * MPI_Isend and MPI_Irecv each polled with MPI_Test (the clock looked at once every 64 polls,
 * as a timeout would), and every round trip timed on its own (two clock reads), its mean
 * reported — what netsweep's `-t mpi` pingpong does, without netsweep. A last argument
 * `serialized` initialises MPI at MPI_THREAD_SERIALIZED, netsweep's level, instead of MPI_Init.
 *
 * Rank 0 prints one line: "latency_us X" or "bw_mbps X" (10^6 bit/s). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 64
#define SPINS 64

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Polls `req` with MPI_Test, looking at the clock once every SPINS polls (a deadline far off:
 * the look is what costs). */
static void poll(MPI_Request *req) {
    int done = 0;
    double deadline = 0;
    for (unsigned spins = 1;; spins++) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins % SPINS == 0) {
            double t = now_ns();
            if (deadline == 0) deadline = t + 10e9;
            else if (t > deadline) MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void bounded_send(char *buf, int size, int peer) {
    MPI_Request r;
    MPI_Isend(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &r);
    poll(&r);
}

static void bounded_recv(char *buf, int size, int peer) {
    MPI_Request r;
    MPI_Irecv(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &r);
    poll(&r);
}

int main(int argc, char **argv) {
    int provided;
    if (argc == 5 && strcmp(argv[4], "serialized") == 0)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    else
        MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4 && argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_osu latency|bw|bounded SIZE SECONDS [serialized]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bw = strcmp(argv[1], "bw") == 0;
    int bounded = strcmp(argv[1], "bounded") == 0;
    double rtt_sum = 0;
    int size = atoi(argv[2]);
    double seconds = atof(argv[3]);
    int peer = 1 - rank;
    char *buf = malloc((size_t)size + 1);
    memset(buf, 'a', (size_t)size + 1);
    MPI_Request req[WINDOW];
    char ack[4];
    /* Calibrate: rank 0 decides the iteration count from a warm-up and tells rank 1. */
    long iters = 100;
    for (int phase = 0; phase < 2; phase++) {
        MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        rtt_sum = 0;
        for (long i = 0; i < iters; i++) {
            if (bounded) {
                if (rank == 0) {
                    double a = now_ns();
                    bounded_send(buf, size, peer);
                    bounded_recv(buf, size, peer);
                    rtt_sum += now_ns() - a;
                } else {
                    bounded_recv(buf, size, peer);
                    bounded_send(buf, size, peer);
                }
            } else if (!bw) {
                if (rank == 0) {
                    MPI_Send(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                }
            } else if (rank == 0) {
                for (int w = 0; w < WINDOW; w++)
                    MPI_Isend(buf, size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < WINDOW; w++)
                    MPI_Irecv(buf, size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (phase == 0) {
            long want = (long)(iters * seconds / (t > 1e-6 ? t : 1e-6));
            iters = want < 10 ? 10 : want;
        } else if (rank == 0) {
            if (bw)
                printf("bw_mbps %.3f\n", (double)size * WINDOW * iters * 8 / t / 1e6);
            else if (bounded)
                printf("latency_us %.4f\n", rtt_sum / 1e3 / 2 / iters);
            else
                printf("latency_us %.4f\n", t * 1e6 / 2 / iters);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
