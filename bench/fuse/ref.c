/* bench/fuse/ref.c: the C reference for the /ctx benchmark: a minimal libfuse3 low-level, single-threaded
 * passthrough of one flat backing directory (the bench tree). Written for this benchmark.
 * usage: ref BACKING_DIR MOUNTPOINT TIMEOUT_SECONDS */
#define FUSE_USE_VERSION 34
#define _GNU_SOURCE
#include <fuse_lowlevel.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char **names; static size_t count, cap; static int dirfd_; static double tmo;

static fuse_ino_t find(const char *name) {
  ENTRY q = { (char *)name, NULL }, *r = hsearch(q, FIND);
  return r ? (fuse_ino_t)(uintptr_t)r->data : 0;
}
static fuse_ino_t add(const char *name) {
  fuse_ino_t ino = find(name);
  if (ino) return ino;
  if (count == cap) { cap = cap ? cap * 2 : 1024; names = realloc(names, cap * sizeof *names); }
  names[count++] = strdup(name);
  ENTRY e = { names[count - 1], (void *)(uintptr_t)(count + 1) };
  hsearch(e, ENTER);
  return count + 1;
}
static int st_of(fuse_ino_t ino, struct stat *st) {
  int r = ino == 1 ? fstat(dirfd_, st) : fstatat(dirfd_, names[ino - 2], st, AT_SYMLINK_NOFOLLOW);
  if (r < 0) return errno;
  st->st_ino = ino;
  return 0;
}
static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  struct fuse_entry_param e; memset(&e, 0, sizeof e);
  if (parent != 1) { fuse_reply_err(req, ENOENT); return; }
  struct stat st;
  if (fstatat(dirfd_, name, &st, AT_SYMLINK_NOFOLLOW) < 0) { fuse_reply_err(req, errno); return; }
  e.ino = add(name); st.st_ino = e.ino; e.attr = st; e.attr_timeout = tmo; e.entry_timeout = tmo;
  fuse_reply_entry(req, &e);
}
static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)fi; struct stat st; int r = st_of(ino, &st);
  if (r) fuse_reply_err(req, r); else fuse_reply_attr(req, &st, tmo);
}
static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int valid, struct fuse_file_info *fi) {
  if (valid & FUSE_SET_ATTR_SIZE) {
    int r = fi ? ftruncate(fi->fh, a->st_size) : truncate(names[ino - 2], a->st_size);
    if (r < 0) { fuse_reply_err(req, errno); return; }
  }
  ll_getattr(req, ino, fi);
}
static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)fi; if (ino != 1) { fuse_reply_err(req, ENOTDIR); return; }
  char *buf = malloc(size); size_t at = 0;
  for (size_t i = off; i < count; i++) {
    if (!names[i][0]) continue;
    struct stat st = {0}; st.st_ino = i + 2; st.st_mode = S_IFREG;
    size_t n = fuse_add_direntry(req, buf + at, size - at, names[i], &st, i + 1);
    if (n > size - at) break;
    at += n;
  }
  fuse_reply_buf(req, buf, at); free(buf);
}
static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  int fd = openat(dirfd_, names[ino - 2], fi->flags & ~O_NOFOLLOW);
  if (fd < 0) { fuse_reply_err(req, errno); return; }
  fi->fh = fd; fuse_reply_open(req, fi);
}
static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  (void)parent; int fd = openat(dirfd_, name, fi->flags | O_CREAT, mode);
  if (fd < 0) { fuse_reply_err(req, errno); return; }
  fi->fh = fd; struct fuse_entry_param e; memset(&e, 0, sizeof e);
  e.ino = add(name); fstat(fd, &e.attr); e.attr.st_ino = e.ino; e.attr_timeout = tmo; e.entry_timeout = tmo;
  fuse_reply_create(req, &e, fi);
}
static char rbuf[1 << 20];
static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)ino; if (size > sizeof rbuf) size = sizeof rbuf;
  ssize_t n = pread(fi->fh, rbuf, size, off);
  if (n < 0) fuse_reply_err(req, errno); else fuse_reply_buf(req, rbuf, n);
}
static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *b, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)ino; ssize_t n = pwrite(fi->fh, b, size, off);
  if (n < 0) fuse_reply_err(req, errno); else fuse_reply_write(req, n);
}
static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void)ino; close(fi->fh); fuse_reply_err(req, 0);
}
static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  (void)parent; fuse_ino_t ino = find(name);
  if (unlinkat(dirfd_, name, 0) < 0) { fuse_reply_err(req, errno); return; }
  if (ino) names[ino - 2][0] = '\0'; /* a tombstone: readdir skips it, lookups miss it */
  fuse_reply_err(req, 0);
}
static void ll_init(void *u, struct fuse_conn_info *c) {
  (void)u; c->max_write = 1 << 20; c->max_readahead = 1 << 20;
  c->want &= ~FUSE_CAP_READDIRPLUS; c->want &= ~FUSE_CAP_WRITEBACK_CACHE; c->want &= ~FUSE_CAP_SPLICE_READ;
  c->want &= ~FUSE_CAP_SPLICE_WRITE; c->want &= ~FUSE_CAP_SPLICE_MOVE;
}
static const struct fuse_lowlevel_ops ops = {
  .init = ll_init, .lookup = ll_lookup, .getattr = ll_getattr, .setattr = ll_setattr, .readdir = ll_readdir,
  .open = ll_open, .create = ll_create, .read = ll_read, .write = ll_write, .release = ll_release, .unlink = ll_unlink,
};
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: ref BACKING MNT TIMEOUT\n"); return 2; }
  dirfd_ = open(argv[1], O_RDONLY | O_DIRECTORY); if (dirfd_ < 0) { perror(argv[1]); return 1; }
  if (fchdir(dirfd_) < 0) return 1;
  tmo = atof(argv[3]);
  hcreate(65536);
  DIR *d = fdopendir(dup(dirfd_)); struct dirent *de;
  while ((de = readdir(d))) if (de->d_name[0] != '.') add(de->d_name);
  closedir(d);
  char *fargv[] = { argv[0], "-o", "allow_other,default_permissions", NULL };
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (!se || fuse_session_mount(se, argv[2]) != 0) return 1;
  fprintf(stderr, "ref: serving\n");
  int r = fuse_session_loop(se);
  fuse_session_unmount(se); fuse_session_destroy(se);
  return r ? 1 : 0;
}
