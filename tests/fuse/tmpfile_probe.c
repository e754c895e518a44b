/* Test client: O_TMPFILE + linkat, fallocate (allocate, punch a hole, zero a range) and SEEK_DATA/SEEK_HOLE in DIR; one result line per step. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void result(const char *step, long long r) {
  if (r < 0) printf("%s=-1 %s\n", step, strerrorname_np(errno));
  else printf("%s=%lld\n", step, r);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  char path[4096], proc[64];
  const char *dir = argv[1];
  struct stat st;

  /* an unnamed file in DIR, then given a name */
  int t = open(dir, O_TMPFILE | O_RDWR, 0640);
  result("tmpfile", t < 0 ? -1 : 0);
  if (t >= 0) {
    result("write", write(t, "hello", 5));
    result("nlink", fstat(t, &st) < 0 ? -1 : (long long)st.st_nlink);
    result("mode", fstat(t, &st) < 0 ? -1 : (long long)(st.st_mode & 07777));
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", t);
    snprintf(path, sizeof path, "%s/named", dir);
    result("link", linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW));
    result("nlink", fstat(t, &st) < 0 ? -1 : (long long)st.st_nlink);
    char buf[16] = {0};
    int n = open(path, O_RDONLY);
    result("read", n < 0 ? -1 : read(n, buf, sizeof buf - 1));
    printf("content=%s\n", buf);
    if (n >= 0) close(n);
    close(t);
  }

  /* fallocate and holes */
  snprintf(path, sizeof path, "%s/sparse", dir);
  int f = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
  result("open", f < 0 ? -1 : 0);
  if (f < 0) return 0;
  const long long M = 1 << 20;
  result("fallocate", fallocate(f, 0, 0, M));
  result("size", fstat(f, &st) < 0 ? -1 : (long long)st.st_size);
  result("allocated", fstat(f, &st) < 0 ? -1 : (long long)(st.st_blocks * 512 >= M));
  result("keep_size", fallocate(f, FALLOC_FL_KEEP_SIZE, M, M));
  result("size", fstat(f, &st) < 0 ? -1 : (long long)st.st_size);
  result("pwrite", pwrite(f, "x", 1, 4 * M));
  result("punch", fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 2 * M));
  result("zero", fallocate(f, FALLOC_FL_ZERO_RANGE, 4 * M + 1, 4096));
  result("size", fstat(f, &st) < 0 ? -1 : (long long)st.st_size);
  result("seek_data", lseek(f, 0, SEEK_DATA));
  result("seek_hole", lseek(f, 0, SEEK_HOLE));
  result("seek_hole_4m", lseek(f, 4 * M, SEEK_HOLE));
  result("seek_data_end", lseek(f, 8 * M, SEEK_DATA));
  close(f);
  return 0;
}
