/* MPI one-sided latency and bandwidth, in the manner of the OSU micro-benchmarks
 * (osu_put_latency, osu_get_latency, osu_acc_latency, osu_put_bw, osu_get_bw with
 * MPI_Win_fence synchronisation), for two ranks: rank 0 is the origin, rank 1's window the
 * target.
 *   latency: per iteration MPI_Put (MPI_Get, MPI_Accumulate of MPI_INT with MPI_SUM) of SIZE
 *            bytes between two fences; µs per iteration.
 *   bandwidth: per iteration WINDOW Puts (Gets, Accumulates) of SIZE bytes to distinct
 *            offsets between two fences; MB/s (10^6 bytes per second).
 * Every Put's bytes are checked at the target, every Get's at the origin, and every
 * Accumulate's sum at the target (each int of the window must be the number of
 * Accumulates times the origin's int) after the last iteration of each size (a transport
 * that loses data fails instead of looking fast).
 * Output, one line per measurement on rank 0: "put_lat SIZE US", "get_lat SIZE US",
 * "acc_lat SIZE US", "put_bw SIZE MBS", "get_bw SIZE MBS", "acc_bw SIZE MBS"; "verified" at
 * the end; exit 1 on a mismatch.
 * Usage: mpirun -np 2 ... mpi_osc_bench [ITERATIONS]   (default 200; warm-up 20) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (256 * 1024)
#define WINDOW 16
#define WARMUP 20

static const int sizes[] = { 8, 64, 512, 4096, 32768, 262144 };

static void fill(unsigned char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7);
}

static int check(const unsigned char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed * 31 + i * 7))
			return 0;
	return 1;
}

/* The origin's ints of an Accumulate: small, so that hundreds of sums stay far from overflow. */
static void fill_ints(unsigned char *p, size_t n)
{
	int *v = (int *)p;
	for (size_t i = 0; i < n / sizeof(int); i++)
		v[i] = (int)(i % 7) + 1;
}

/* The target's ints after COUNT Accumulates of fill_ints' values onto zeros. */
static int check_sums(const unsigned char *p, size_t n, int count)
{
	const int *v = (const int *)p;
	for (size_t i = 0; i < n / sizeof(int); i++)
		if (v[i] != count * ((int)(i % 7) + 1))
			return 0;
	return 1;
}

enum op { PUT, GET, ACC };
static const char *const op_name[] = { "put", "get", "acc" };

/* One operation of SIZE bytes at OFF of the origin's LOCAL and the target's window. */
static void issue(enum op op, unsigned char *local, size_t off, int size, MPI_Win win)
{
	switch (op) {
	case PUT:
		MPI_Put(local + off, size, MPI_BYTE, 1, off, size, MPI_BYTE, win);
		break;
	case GET:
		MPI_Get(local + off, size, MPI_BYTE, 1, off, size, MPI_BYTE, win);
		break;
	case ACC:
		MPI_Accumulate(local + off, size / (int)sizeof(int), MPI_INT, 1, off,
			       size / (int)sizeof(int), MPI_INT, MPI_SUM, win);
		break;
	}
}

/* Before a measurement: the data source filled, the destination zeroed (N bytes each). */
static void prepare(enum op op, unsigned char *local, unsigned char *winbuf, size_t n, int seed)
{
	if (op == ACC) {
		fill_ints(local, n);
		memset(winbuf, 0, n);
	} else {
		fill(op == GET ? winbuf : local, n, seed);
		memset(op == GET ? local : winbuf, 0, n);
	}
}

/* After a measurement: is the destination right? (COUNT operations reached it.) */
static int verify(enum op op, int rank, const unsigned char *local, const unsigned char *winbuf,
		  size_t n, int seed, int count)
{
	switch (op) {
	case PUT:
		return rank != 1 || check(winbuf, n, seed);
	case GET:
		return rank != 0 || check(local, n, seed);
	case ACC:
		return rank != 1 || check_sums(winbuf, n, count);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rank, nranks, iters = argc > 1 ? atoi(argv[1]) : 200, bad = 0;
	unsigned char *local, *winbuf;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi_osc_bench: two ranks and ITERATIONS >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Alloc_mem(MAX_SIZE * WINDOW, MPI_INFO_NULL, &local);
	MPI_Alloc_mem(MAX_SIZE * WINDOW, MPI_INFO_NULL, &winbuf);
	MPI_Win_create(winbuf, MAX_SIZE * WINDOW, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);

	for (int o = PUT; o <= ACC; o++) {
		enum op op = (enum op)o;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			int size = sizes[s], seed = (int)s + 10 * o;
			double t0 = 0;
			/* Latency. */
			prepare(op, local, winbuf, size, seed);
			MPI_Barrier(MPI_COMM_WORLD);
			for (int i = 0; i < WARMUP + iters; i++) {
				if (i == WARMUP)
					t0 = MPI_Wtime();
				MPI_Win_fence(0, win);
				if (rank == 0)
					issue(op, local, 0, size, win);
				MPI_Win_fence(0, win);
			}
			double lat = (MPI_Wtime() - t0) * 1e6 / iters;
			if (!verify(op, rank, local, winbuf, size, seed, WARMUP + iters))
				bad = 1;
			if (rank == 0)
				printf("%s_lat %d %.2f\n", op_name[op], size, lat);
			/* Bandwidth. */
			for (int w = 0; w < WINDOW; w++) {
				size_t off = (size_t)w * size;
				prepare(op, local + off, winbuf + off, size, seed + w);
			}
			MPI_Barrier(MPI_COMM_WORLD);
			int bw_iters = iters / 4 > 0 ? iters / 4 : 1;
			for (int i = 0; i < WARMUP / 4 + bw_iters; i++) {
				if (i == WARMUP / 4)
					t0 = MPI_Wtime();
				MPI_Win_fence(0, win);
				if (rank == 0)
					for (int w = 0; w < WINDOW; w++)
						issue(op, local, (size_t)w * size, size, win);
				MPI_Win_fence(0, win);
			}
			double secs = MPI_Wtime() - t0;
			for (int w = 0; w < WINDOW; w++) {
				size_t off = (size_t)w * size;
				if (!verify(op, rank, local + off, winbuf + off, size, seed + w,
					    WARMUP / 4 + bw_iters))
					bad = 1;
			}
			if (rank == 0)
				printf("%s_bw %d %.2f\n", op_name[op], size,
				       (double)size * WINDOW * bw_iters / secs / 1e6);
			fflush(stdout);
		}
	}
	int any = 0;
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf(any ? "MISMATCH\n" : "verified\n");
	MPI_Win_free(&win);
	MPI_Free_mem(local);
	MPI_Free_mem(winbuf);
	MPI_Finalize();
	return any;
}
