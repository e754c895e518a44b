/* Test client: one getxattr(2) or listxattr(2) with a caller-chosen buffer size; prints "<result> <errno name|value>". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PATH NAME|--list SIZE\n", argv[0]);
    return 2;
  }
  size_t size = (size_t)atol(argv[3]);
  char *buf = malloc(size + 1);
  ssize_t r = strcmp(argv[2], "--list") == 0 ? llistxattr(argv[1], size ? buf : NULL, size)
                                             : lgetxattr(argv[1], argv[2], size ? buf : NULL, size);
  if (r < 0) {
    printf("-1 %s\n", errno == ERANGE ? "ERANGE" : errno == ENODATA ? "ENODATA"
                      : errno == ENOTSUP ? "ENOTSUP" : strerror(errno));
    return 0;
  }
  printf("%zd", r);
  if (size) {
    for (ssize_t i = 0; i < r; i++) if (buf[i] == 0) buf[i] = ',';
    printf(" %.*s", (int)r, buf);
  }
  printf("\n");
  return 0;
}
