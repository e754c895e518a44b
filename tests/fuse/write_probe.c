/* Test client: one process's exact syscalls on a file, one step per argument; prints one result line per step. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Steps: t (open O_WRONLY|O_TRUNC), a (open O_WRONLY|O_APPEND), o (open O_RDWR), w:TEXT (write TEXT in one
 * write(2) on the newest fd), d (dup the newest fd), c (close the newest fd), m (mmap the newest
 * fd MAP_SHARED, PROT_WRITE), r (read the whole file through a fresh O_RDONLY open). */
static const char *name(int e) {
  switch (e) {
    case EINVAL: return "EINVAL";
    case EMSGSIZE: return "EMSGSIZE";
    case ENODEV: return "ENODEV";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    default: return strerror(e);
  }
}

static void result(const char *step, long r) {
  if (r < 0) printf("%s=-1 %s\n", step, name(errno));
  else printf("%s=%ld\n", step, r);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PATH STEP...\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  int fds[16], n = 0;
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "t") == 0 || strcmp(s, "a") == 0 || strcmp(s, "o") == 0) {
      int flags = s[0] == 't' ? O_WRONLY | O_TRUNC : s[0] == 'a' ? O_WRONLY | O_APPEND : O_RDWR;
      int fd = open(path, flags);
      result(s, fd < 0 ? -1 : 0);
      if (fd >= 0 && n < 16) fds[n++] = fd;
    } else if (strncmp(s, "w:", 2) == 0 && n > 0) {
      result("w", write(fds[n - 1], s + 2, strlen(s + 2)));
    } else if (strcmp(s, "d") == 0 && n > 0 && n < 16) {
      int fd = dup(fds[n - 1]);
      result("d", fd < 0 ? -1 : 0);
      if (fd >= 0) fds[n++] = fd;
    } else if (strcmp(s, "c") == 0 && n > 0) {
      result("c", close(fds[--n]));
    } else if (strcmp(s, "m") == 0 && n > 0) {
      void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[n - 1], 0);
      result("m", p == MAP_FAILED ? -1 : 0);
      if (p != MAP_FAILED) munmap(p, 4096);
    } else if (strcmp(s, "r") == 0) {
      char buf[65536];
      int fd = open(path, O_RDONLY);
      ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof buf);
      if (len < 0) {
        result("r", -1);
      } else {
        printf("r=");
        for (ssize_t k = 0; k < len; k++) putchar(buf[k] == '\n' ? '|' : buf[k]);
        printf("\n");
      }
      if (fd >= 0) close(fd);
    } else {
      fprintf(stderr, "bad step %s\n", s);
      return 2;
    }
  }
  return 0;
}
