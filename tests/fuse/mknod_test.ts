/** mknod in home/: unix sockets (bind) and FIFOs for every user; device nodes only with CAP_MKNOD, and never usable (nodev). */
import { assertEquals, assertMatch } from "../assert.ts";
import { PYTHON, sh, UIDS, withMount } from "../fixture/mod.ts";

// bind() makes the socket inode with mknod(S_IFSOCK); a client connects through the mount.
const SCRIPT = `
import os, socket, stat, sys
d = sys.argv[1]
s = socket.socket(socket.AF_UNIX)
s.bind(d + "/sock")
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.settimeout(5)
c.connect(d + "/sock")
a, _ = s.accept()
c.sendall(b"ok")
print(a.recv(2).decode())
os.mkfifo(d + "/fifo", 0o600)
print(stat.S_ISSOCK(os.lstat(d + "/sock").st_mode), stat.S_ISFIFO(os.lstat(d + "/fifo").st_mode))
os.unlink(d + "/sock")
`;

Deno.test({
  name:
    "mknod: bind() of a unix socket and mkfifo work for root and uid 1000; devices need CAP_MKNOD and stay unusable (nodev)",
  ignore: PYTHON === null,
  fn: () =>
    withMount(async ({ tree, home }) => {
      for (const uid of UIDS) {
        const h = await home(uid);
        const r = await sh(`${PYTHON} -c '${SCRIPT}' ${h}`, { uid });
        assertEquals([r.code, r.stdout], [0, "ok\nTrue True\n"], r.stderr);
        // the FIFO is the backing tree's, born the caller's; a FIFO reader and writer meet
        const st = Deno.lstatSync(`${tree.root}/home/${uid}/fifo`);
        assertEquals([st.isFifo, st.uid], [true, uid]);
        const f = await sh(`cd ${h} && (echo through > fifo &) && timeout 5 cat fifo`, { uid });
        assertEquals([f.code, f.stdout], [0, "through\n"], f.stderr);
      }
      // a device node: EPERM without CAP_MKNOD; root may make one, but the mount is nodev
      const u = await sh(`mknod ${tree.mount}/home/1000/null c 1 3`, { uid: 1000 });
      assertEquals(u.code, 1);
      assertMatch(u.stderr, /Operation not permitted/);
      const r = await sh(
        `mknod ${tree.mount}/home/0/null c 1 3 && stat -c '%F %t,%T' ${tree.mount}/home/0/null && ` +
          `(cat ${tree.mount}/home/0/null 2>&1; echo "cat=$?")`,
      );
      assertEquals(r.stdout.split("\n")[0], "character special file 1,3", r.stderr);
      assertMatch(r.stdout, /Permission denied\ncat=1\n$/);
    }),
});
