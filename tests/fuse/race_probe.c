/* Symlink-swap race probe (tests/fuse/race_test.ts): one side operates on d/... through the mount,
 * the other swaps the backing d for a symlink to a root-only directory and back.
 *   race_probe client MOUNTED_AGENT_HOME SECONDS MARKER   -> JSON counts on stdout
 *   race_probe swap   BACKING_AGENT_HOME SECONDS TARGET   -> JSON counts on stdout
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* errno tallies of the client's operations, by name, for the report */
static long eok, enoent, eacces, eloop, eperm, enotdir, eexist, eother;
static void tally(int r) {
  if (r >= 0) eok++;
  else if (errno == ENOENT) enoent++;
  else if (errno == EACCES) eacces++;
  else if (errno == ELOOP) eloop++;
  else if (errno == EPERM) eperm++;
  else if (errno == ENOTDIR) enotdir++;
  else if (errno == EEXIST) eexist++;
  else eother++;
}

static void touch(const char *p) {
  int fd = open(p, O_CREAT | O_WRONLY, 0644);
  if (fd >= 0) close(fd);
}

static int client(const char *dir, double secs, const char *marker) {
  if (chdir(dir) < 0) return perror("chdir"), 2;
  long iters = 0, reads_mine = 0, leaks = 0;
  char buf[4096];
  double end = now() + secs;
  while (now() < end) {
    iters++;
    /* read: our own d/shadow, or (the hole) the root-only one */
    int fd = open("d/shadow", O_RDONLY);
    tally(fd);
    if (fd >= 0) {
      ssize_t n = read(fd, buf, sizeof buf - 1);
      if (n > 0) {
        buf[n] = 0;
        if (strstr(buf, marker)) leaks++;
        else if (strstr(buf, "mine")) reads_mine++;
      }
      close(fd);
    }
    /* create + write, then remove */
    fd = open("d/made", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    tally(fd);
    if (fd >= 0) {
      if (write(fd, "x", 1) < 0) eother++;
      close(fd);
    }
    tally(unlink("d/made"));
    /* attribute changes on our own d/victim (the root-only dir has a victim too) */
    tally(chmod("d/victim", (iters & 1) ? 0666 : 0644));
    tally(chown("d/victim", getuid(), getgid()));
    tally(truncate("d/victim", 3));
    tally(utimes("d/victim", NULL));
    /* names */
    tally(mkdir("d/sub", 0755));
    tally(rmdir("d/sub"));
    tally(symlink("x", "d/lnk"));
    tally(unlink("d/lnk"));
    if (rename("d/ren1", "d/ren2") == 0) {
      eok++;
      tally(rename("d/ren2", "d/ren1"));
    } else {
      tally(-1);
      touch("d/ren1");
    }
    tally(link("d/victim", "d/hard"));
    tally(unlink("d/hard"));
  }
  printf("{\"iterations\":%ld,\"reads_mine\":%ld,\"leaks\":%ld,\"ok\":%ld,\"ENOENT\":%ld,"
         "\"EACCES\":%ld,\"ELOOP\":%ld,\"EPERM\":%ld,\"ENOTDIR\":%ld,\"EEXIST\":%ld,\"other\":%ld}\n",
         iters, reads_mine, leaks, eok, enoent, eacces, eloop, eperm, enotdir, eexist, eother);
  return 0;
}

static int swap(const char *dir, double secs, const char *target) {
  if (chdir(dir) < 0) return perror("chdir"), 2;
  unlink("d.lnk");
  if (symlink(target, "d.lnk") < 0) return perror("symlink"), 2;
  long swaps = 0;
  double end = now() + secs;
  while (now() < end) {
    /* atomic: d becomes the symlink, d.lnk the real directory; then back */
    if (syscall(SYS_renameat2, AT_FDCWD, "d", AT_FDCWD, "d.lnk", 2 /* RENAME_EXCHANGE */) < 0) {
      return perror("renameat2"), 2;
    }
    swaps++;
    for (volatile int i = 0; i < 2000; i++) {}
    if (syscall(SYS_renameat2, AT_FDCWD, "d", AT_FDCWD, "d.lnk", 2) < 0) {
      return perror("renameat2"), 2;
    }
    /* longer as a directory: the client's walks mostly see one, and its requests then meet the
     * symlink in the daemon */
    for (volatile int i = 0; i < 20000; i++) {}
  }
  printf("{\"swaps\":%ld}\n", swaps);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5) return fprintf(stderr, "usage: race_probe client|swap DIR SECONDS ARG\n"), 2;
  double secs = atof(argv[3]);
  if (!strcmp(argv[1], "client")) return client(argv[2], secs, argv[4]);
  if (!strcmp(argv[1], "swap")) return swap(argv[2], secs, argv[4]);
  return 2;
}
