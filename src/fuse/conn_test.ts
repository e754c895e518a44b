/** The protocol layer fed raw request bytes over a SOCK_SEQPACKET pair (no kernel involved). */
import { assertEquals } from "../../tests/assert.ts";
import {
  ATTR,
  ATTR_OUT,
  BACKING_MAP,
  decode,
  encode,
  ENTRY_OUT,
  IN_HEADER,
  INIT,
  INIT2,
  INIT_IN,
  INIT_OUT,
  OPCODES,
  OPEN_OUT,
  OUT_HEADER,
  READ_IN,
  SETATTR_IN,
  WRITE_IN,
} from "../abi/fuse.ts";
import { ERRNO } from "../abi/errno.ts";
import * as libc from "../sys/libc.ts";
import { Conn, type FileSystem } from "./conn.ts";

Deno.test("kernel structs have the sizes of include/uapi/linux/fuse.h", () => {
  assertEquals(
    [
      IN_HEADER,
      OUT_HEADER,
      ATTR,
      ENTRY_OUT,
      ATTR_OUT,
      SETATTR_IN,
      READ_IN,
      WRITE_IN,
      INIT_IN,
      INIT_OUT,
      OPEN_OUT,
      BACKING_MAP,
    ]
      .map((s) => [s.name, s.size]),
    [
      ["fuse_in_header", 40],
      ["fuse_out_header", 16],
      ["fuse_attr", 88],
      ["fuse_entry_out", 40],
      ["fuse_attr_out", 16],
      ["fuse_setattr_in", 88],
      ["fuse_read_in", 40],
      ["fuse_write_in", 40],
      ["fuse_init_in", 64],
      ["fuse_init_out", 64],
      ["fuse_open_out", 16],
      ["fuse_backing_map", 16],
    ],
  );
});

Deno.test("a field table round-trips through encode/decode", () => {
  const v = new DataView(new ArrayBuffer(64));
  const value = {
    len: 56,
    opcode: 15,
    unique: 2 ** 40 + 6,
    nodeid: 7,
    uid: 1000,
    gid: 100,
    pid: 42,
    total_extlen: 0,
    padding: 0,
  };
  encode(IN_HEADER, v, 8, value);
  assertEquals(decode(IN_HEADER, v, 8), value);
});

function request(opcode: number, body: Uint8Array, unique: number, len?: number): Uint8Array {
  const b = new Uint8Array(IN_HEADER.size + body.length);
  encode(IN_HEADER, new DataView(b.buffer), 0, {
    len: len ?? b.length,
    opcode,
    unique,
    nodeid: 1,
    uid: 0,
    gid: 0,
    pid: 1,
  });
  b.set(body, IN_HEADER.size);
  return b;
}

async function replies(
  fs: FileSystem,
  reqs: Uint8Array[],
  options: { passthrough?: boolean } = {},
): Promise<{ error: number; unique: number; len: number; body: Uint8Array }[]> {
  const pair = libc.socketpair({ seqpacket: true });
  if (typeof pair === "number") throw new Error(`socketpair: ${pair}`);
  const [kernel, daemon] = pair;
  const conn = new Conn(daemon, fs, { log: () => {}, ...options });
  const served = conn.serve();
  for (const r of reqs) libc.write(kernel, r);
  const out: { error: number; unique: number; len: number; body: Uint8Array }[] = [];
  const buf = new Uint8Array(4096);
  const fl = libc.fcntl(kernel, libc.F.GETFL);
  libc.fcntl(kernel, libc.F.SETFL, fl | libc.O.NONBLOCK);
  const end = Date.now() + 5000;
  while (
    out.length < reqs.filter((r) => OPCODES[r[4]]?.reply !== false).length && Date.now() < end
  ) {
    const n = libc.read(kernel, buf);
    if (n < 0) {
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    const h = decode(OUT_HEADER, new DataView(buf.buffer));
    out.push({ error: h.error, unique: h.unique, len: h.len, body: buf.slice(16, n) });
  }
  conn.stop();
  libc.close(kernel); // the daemon's read now sees EOF-like errors or the stop flag
  await served.catch(() => {});
  libc.close(daemon);
  return out;
}

Deno.test("unknown opcode and STATX answer ENOSYS; short input EIO; a throwing handler EIO and serving goes on", async () => {
  const fs: FileSystem = {
    handlers: {
      3: () => {
        throw new Error("boom");
      },
      17: () => 0,
    },
    forget: () => {},
  };
  const out = await replies(fs, [
    request(99, new Uint8Array(0), 2),
    request(52, new Uint8Array(24), 4),
    request(15, new Uint8Array(8), 6), // READ needs 40 bytes of fuse_read_in
    request(3, new Uint8Array(16), 8), // GETATTR handler throws
    request(2, new Uint8Array(8), 10), // FORGET: no reply
    request(17, new Uint8Array(0), 12), // STATFS still served
  ]);
  assertEquals(out.map(({ body: _, ...h }) => h), [
    { error: -ERRNO.ENOSYS, unique: 2, len: 16 },
    { error: -ERRNO.ENOSYS, unique: 4, len: 16 },
    { error: -ERRNO.EIO, unique: 6, len: 16 },
    { error: -ERRNO.EIO, unique: 8, len: 16 },
    { error: 0, unique: 12, len: 16 },
  ]);
});

Deno.test("INIT negotiates 7.x with max_write 1 MiB", async () => {
  const body = new Uint8Array(INIT_IN.size);
  encode(INIT_IN, new DataView(body.buffer), 0, {
    major: 7,
    minor: 41,
    max_readahead: 131072,
    flags: 0xffffffff,
  });
  const out = await replies({ handlers: {}, forget: () => {} }, [request(26, body, 2)]);
  assertEquals(out.map(({ body: _, ...h }) => h), [
    { error: 0, unique: 2, len: 16 + INIT_OUT.size },
  ]);
  const init = decode(INIT_OUT, new DataView(out[0].body.buffer));
  assertEquals(
    {
      major: init.major,
      minor: init.minor,
      max_write: init.max_write,
      max_pages: init.max_pages,
      flags: init.flags,
    },
    {
      major: 7,
      minor: 40,
      max_write: 1 << 20,
      max_pages: 256,
      flags: INIT.ASYNC_READ | INIT.ATOMIC_O_TRUNC | INIT.BIG_WRITES | INIT.AUTO_INVAL_DATA |
        INIT.PARALLEL_DIROPS | INIT.MAX_PAGES | INIT.CACHE_SYMLINKS | INIT.HANDLE_KILLPRIV_V2 |
        INIT.DO_READDIRPLUS | INIT.READDIRPLUS_AUTO,
    },
  );
});

Deno.test("INIT asks for passthrough (flags2, max_stack_depth 1) only when a 7.40+ kernel offers it", async () => {
  const negotiate = async (minor: number, flags2: number, options: { passthrough?: boolean }) => {
    const body = new Uint8Array(INIT_IN.size);
    encode(INIT_IN, new DataView(body.buffer), 0, { major: 7, minor, flags: 0xffffffff, flags2 });
    let told: boolean | null = null;
    const fs: FileSystem = {
      handlers: {},
      forget: () => {},
      init: (_f, o) => (told = o.passthrough),
    };
    const out = await replies(fs, [request(26, body, 2)], options);
    const init = decode(INIT_OUT, new DataView(out[0].body.buffer));
    return [!!(init.flags & INIT.INIT_EXT), init.flags2, init.max_stack_depth, told];
  };
  assertEquals(await negotiate(45, INIT2.PASSTHROUGH, {}), [true, INIT2.PASSTHROUGH, 1, true]);
  assertEquals(await negotiate(45, 0, {}), [false, 0, 0, false]);
  assertEquals(await negotiate(39, INIT2.PASSTHROUGH, {}), [false, 0, 0, false]);
  assertEquals(await negotiate(45, INIT2.PASSTHROUGH, { passthrough: false }), [
    false,
    0,
    0,
    false,
  ]);
});

Deno.test("names reach the handler as sent: repeated, colliding in the name cache's hash, non-ASCII, long; u64 ids above 2^30 stay exact", async () => {
  const seen: { name: string; nodeid: number; unique: number }[] = [];
  const fs: FileSystem = {
    handlers: {
      1: (r) => {
        seen.push({ name: r.names[0], nodeid: r.nodeid, unique: r.unique });
        return -ERRNO.ENOENT;
      },
    },
    forget: () => {},
  };
  // two ASCII names whose 30-bit FNV-1a of the bytes is the same (the cache keeps one of them)
  const fnv = (s: string) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    return h & 0x3fffffff;
  };
  const by = new Map<number, string>();
  let pair: [string, string] | undefined;
  for (let i = 0; !pair; i++) {
    const n = `c${i}`, o = by.get(fnv(n));
    if (o !== undefined) pair = [o, n];
    else by.set(fnv(n), n);
  }
  const names = ["a.txt", "a.txt", pair[0], pair[1], pair[0], "é", "é", "x".repeat(40), "a.txt"];
  const enc = new TextEncoder();
  const reqs = names.map((n, i) => {
    const b = request(1, enc.encode(`${n}\0`), 2 * i + 2);
    const v = new DataView(b.buffer);
    if (i === 1) v.setUint32(20, 3, true); // nodeid 3 * 2^32 + 1
    if (i === 2) v.setUint32(16, 0x4000_0001, true); // just above the small-integer range
    return b;
  });
  await replies(fs, reqs);
  assertEquals(seen.map((s) => s.name), names);
  assertEquals(seen.map((s) => s.nodeid).slice(0, 3), [1, 3 * 2 ** 32 + 1, 0x4000_0001]);
  assertEquals(seen.map((s) => s.unique), names.map((_, i) => 2 * i + 2));
});
