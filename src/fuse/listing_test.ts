import { assertEquals } from "../../tests/assert.ts";
import { decode, DIRENT } from "../abi/fuse.ts";
import { Listing } from "./listing.ts";

const enc = new TextEncoder();

/** Decodes the records READDIR would send: [name, off, type, ino]. */
function records(buf: Uint8Array, n: number): [string, number, number, number][] {
  const v = new DataView(buf.buffer, buf.byteOffset);
  const out: [string, number, number, number][] = [];
  for (let at = 0; at < n;) {
    const d = decode(DIRENT, v, at);
    const name = new TextDecoder().decode(
      buf.subarray(at + DIRENT.size, at + DIRENT.size + d.namelen),
    );
    out.push([name, d.off, d.type, d.ino]);
    at += (DIRENT.size + d.namelen + 7) & ~7;
  }
  return out;
}

Deno.test("Listing pages whole fuse_dirent records; offsets resume after the last one sent", () => {
  const l = new Listing();
  l.addName(enc.encode("."), 4, 7);
  l.addName(enc.encode(".."), 4, 1);
  const raw = enc.encode("xxfile-with-a-longer-namexx");
  l.add(raw, 2, raw.length - 2, 8, 99);
  assertEquals(l.size, 3);
  const out = new Uint8Array(4096);
  const all = l.page(0, 4096, out);
  assertEquals(records(out, all), [[".", 1, 4, 7], ["..", 2, 4, 1], [
    "file-with-a-longer-name",
    3,
    8,
    99,
  ]]);
  // 64 bytes hold the two 32-byte dot records only: the next page starts at offset 2
  const first = l.page(0, 64, out);
  assertEquals(records(out, first).map((r) => r[0]), [".", ".."]);
  const rest = l.page(2, 4096, out);
  assertEquals(records(out, rest).map((r) => r[0]), ["file-with-a-longer-name"]);
  assertEquals([l.page(3, 4096, out), l.page(0, 8, out)], [0, 0]);
});
