/* bench/fuse/client.c: the measuring client: stat loop, sequential write, sequential read, paced
 * stat latency.
 * usage: client stat DIR ROUNDS | client write FILE MIB | client read FILE ; prints one number per
 * run. client lat STOP PATH... : prints "ready", then "<index> <ns>" per stat(2) of each PATH, one
 * round per millisecond (an interactive client, not a spinning one), until 5 rounds after STOP
 * exists. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
static long long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  if (!strcmp(argv[1], "lat")) {
    struct stat st; struct timespec pace = {0, 1000000}; int after = 0;
    printf("ready\n"); fflush(stdout);
    while (after < 5) {
      for (int i = 3; i < argc; i++) {
        long long t0 = ns();
        if (stat(argv[i], &st) < 0) { perror(argv[i]); return 1; }
        printf("%d %lld\n", i - 3, ns() - t0);
      }
      if (after || access(argv[2], F_OK) == 0) after++;
      nanosleep(&pace, NULL);
    }
    return 0;
  }
  static char buf[1 << 20]; memset(buf, 'x', sizeof buf);
  if (!strcmp(argv[1], "stat")) {
    /* relative names from inside DIR: the walk starts at the pinned cwd, as in a shell loop there */
    if (chdir(argv[2]) < 0) { perror(argv[2]); return 1; }
    int rounds = atoi(argv[3]); char p[64]; struct stat st; double t0 = now(); long n = 0;
    for (int r = 0; r < rounds; r++)
      for (int i = 0; i < 10000; i++) {
        snprintf(p, sizeof p, "f%05d", i);
        if (stat(p, &st) < 0) { perror(p); return 1; }
        n++;
      }
    printf("%.0f\n", n / (now() - t0));
  } else if (!strcmp(argv[1], "write")) {
    int mib = atoi(argv[3]); int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[2]); return 1; }
    double t0 = now();
    for (int i = 0; i < mib; i++) if (write(fd, buf, sizeof buf) != sizeof buf) { perror("write"); return 1; }
    close(fd); printf("%.1f\n", mib / (now() - t0));
  } else if (!strcmp(argv[1], "read")) {
    int fd = open(argv[2], O_RDONLY); if (fd < 0) { perror(argv[2]); return 1; }
    double t0 = now(); long total = 0; ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    close(fd); printf("%.1f\n", total / 1048576.0 / (now() - t0));
  }
  return 0;
}
