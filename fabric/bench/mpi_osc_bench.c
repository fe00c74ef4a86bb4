/* MPI one-sided latency and bandwidth, in the manner of the OSU micro-benchmarks
 * (osu_put_latency, osu_get_latency, osu_put_bw, osu_get_bw with MPI_Win_fence
 * synchronisation), for two ranks: rank 0 is the origin, rank 1's window the target.
 *   latency: per iteration MPI_Put (or MPI_Get) of SIZE bytes between two fences; µs per
 *            iteration.
 *   bandwidth: per iteration WINDOW Puts (Gets) of SIZE bytes to distinct offsets between
 *            two fences; MB/s (10^6 bytes per second).
 * Every Put's bytes are checked at the target and every Get's at the origin after the last
 * iteration of each size (a transport that loses data fails instead of looking fast).
 * Output, one line per measurement on rank 0: "put_lat SIZE US", "get_lat SIZE US",
 * "put_bw SIZE MBS", "get_bw SIZE MBS"; "verified" at the end; exit 1 on a mismatch.
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

	for (int get = 0; get < 2; get++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			int size = sizes[s], seed = (int)s + 10 * get;
			double t0 = 0;
			/* Latency. */
			fill(get ? winbuf : local, size, seed);
			memset(get ? local : winbuf, 0, size);
			MPI_Barrier(MPI_COMM_WORLD);
			for (int i = 0; i < WARMUP + iters; i++) {
				if (i == WARMUP)
					t0 = MPI_Wtime();
				MPI_Win_fence(0, win);
				if (rank == 0) {
					if (get)
						MPI_Get(local, size, MPI_BYTE, 1, 0, size, MPI_BYTE, win);
					else
						MPI_Put(local, size, MPI_BYTE, 1, 0, size, MPI_BYTE, win);
				}
				MPI_Win_fence(0, win);
			}
			double lat = (MPI_Wtime() - t0) * 1e6 / iters;
			if (!get && rank == 1 && !check(winbuf, size, seed))
				bad = 1;
			if (get && rank == 0 && !check(local, size, seed))
				bad = 1;
			if (rank == 0)
				printf("%s_lat %d %.2f\n", get ? "get" : "put", size, lat);
			/* Bandwidth. */
			for (int w = 0; w < WINDOW; w++)
				fill((get ? winbuf : local) + (size_t)w * size, size, seed + w);
			memset(get ? local : winbuf, 0, (size_t)size * WINDOW);
			MPI_Barrier(MPI_COMM_WORLD);
			int bw_iters = iters / 4 > 0 ? iters / 4 : 1;
			for (int i = 0; i < WARMUP / 4 + bw_iters; i++) {
				if (i == WARMUP / 4)
					t0 = MPI_Wtime();
				MPI_Win_fence(0, win);
				if (rank == 0)
					for (int w = 0; w < WINDOW; w++) {
						size_t off = (size_t)w * size;
						if (get)
							MPI_Get(local + off, size, MPI_BYTE, 1, off,
								size, MPI_BYTE, win);
						else
							MPI_Put(local + off, size, MPI_BYTE, 1, off,
								size, MPI_BYTE, win);
					}
				MPI_Win_fence(0, win);
			}
			double secs = MPI_Wtime() - t0;
			for (int w = 0; w < WINDOW; w++) {
				size_t off = (size_t)w * size;
				if (!get && rank == 1 && !check(winbuf + off, size, seed + w))
					bad = 1;
				if (get && rank == 0 && !check(local + off, size, seed + w))
					bad = 1;
			}
			if (rank == 0)
				printf("%s_bw %d %.2f\n", get ? "get" : "put", size,
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
