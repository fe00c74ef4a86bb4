/* Open MPI over the softrnic provider (through libfabric's ofi_rxm): two ranks exchange 100
 * round trips of 64 KiB with MPI_Send/MPI_Recv, every byte checked, then rank 0 puts 4 KiB into
 * rank 1's window between two fences (MPI one-sided) and rank 1 checks the bytes.
 * Prints "rank R: sendrecv verified, put verified" (rank 1) or "... put sent" (rank 0);
 * exits 1 on any mismatch. Run by capi/tests/fabric.rs with mpirun. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define LEN 65536
#define PUT 4096

static unsigned char buf[LEN], win_buf[LEN];

int main(int argc, char **argv)
{
	int rank, bad = 0;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Win_create(win_buf, sizeof win_buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	for (int i = 0; i < 100; i++) {
		if (rank == 0) {
			for (int j = 0; j < LEN; j++)
				buf[j] = (unsigned char)(i * 7 + j);
			MPI_Send(buf, LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
			memset(buf, 0, sizeof buf);
			MPI_Recv(buf, LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int j = 0; j < LEN; j++)
				bad += buf[j] != (unsigned char)~(i * 7 + j);
		} else {
			MPI_Recv(buf, LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int j = 0; j < LEN; j++) {
				bad += buf[j] != (unsigned char)(i * 7 + j);
				buf[j] = (unsigned char)~buf[j];
			}
			MPI_Send(buf, LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
		}
	}
	for (int j = 0; j < PUT; j++)
		buf[j] = (unsigned char)(j * 13 + 5);
	MPI_Win_fence(0, win);
	if (rank == 0)
		MPI_Put(buf, PUT, MPI_BYTE, 1, 0, PUT, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	int put_bad = 0;
	if (rank == 1)
		for (int j = 0; j < PUT; j++)
			put_bad += win_buf[j] != (unsigned char)(j * 13 + 5);
	printf("rank %d: sendrecv %s, put %s\n", rank, bad ? "WRONG" : "verified",
	       rank == 0 ? "sent" : (put_bad ? "WRONG" : "verified"));
	MPI_Win_free(&win);
	MPI_Finalize();
	return bad || put_bad;
}
