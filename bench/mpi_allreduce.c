/* The baseline of `cargo bench --features mpi --bench distributed`: the same MPI call torchfn
   makes for all_reduce (MPI_Allreduce in place, float32, sum), made directly from C. Started
   by the bench under mpirun; rank 0 prints one JSON line per size: its bytes and the mean
   seconds per call over `repeats` calls, after two warm-up calls, between barriers. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i + 1 < argc; i += 2) {
        long bytes = atol(argv[i]);
        int repeats = atoi(argv[i + 1]);
        long n = bytes / 4;
        float *x = malloc(n * sizeof(float));
        for (long j = 0; j < n; j++) x[j] = (float)(j % 7);
        for (int w = 0; w < 2; w++) MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int r = 0; r < repeats; r++) MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double seconds = (MPI_Wtime() - start) / repeats;
        if (rank == 0) printf("RESULT {\"what\": \"raw\", \"bytes\": %ld, \"seconds\": %.9f}\n", bytes, seconds);
        free(x);
    }
    MPI_Finalize();
    return 0;
}
