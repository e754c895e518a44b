/** The capability table against util-linux setpriv, the decoding of /proc masks, and the setpriv prefix of an instance. */
import { assertEquals } from "../../tests/assert.ts";
import { CAP_NAMES, capNames, dropArgv, INSTANCE_CAPS, setprivPath } from "./caps.ts";

Deno.test("CAP_NAMES numbers the capabilities as setpriv --list-caps does (the kernel's order)", () => {
  const out = new Deno.Command(setprivPath(), { args: ["--list-caps"], stdout: "piped" })
    .outputSync();
  const listed = new TextDecoder().decode(out.stdout).trim().split("\n");
  assertEquals(CAP_NAMES.slice(0, listed.length), listed);
});

Deno.test("capNames() decodes a /proc/<pid>/status mask by bit number", () => {
  assertEquals(capNames("0000000000000000"), []);
  assertEquals(capNames("00000000800800e1"), [
    "chown",
    "kill",
    "setgid",
    "setuid",
    "sys_ptrace",
    "setfcap",
  ]);
  assertEquals(capNames("000001ffffffffff"), [...CAP_NAMES]);
});

Deno.test("dropArgv() is setpriv at a fixed path with the kept bounding set for a root host, nothing otherwise", () => {
  assertEquals(INSTANCE_CAPS, ["setgid", "setuid", "setfcap"]);
  assertEquals(dropArgv({ uid: 0 }), [
    setprivPath(),
    "--bounding-set=-all,+setgid,+setuid,+setfcap",
    "--inh-caps=-all",
    "--no-new-privs",
    "--",
  ]);
  assertEquals(setprivPath().startsWith("/usr/bin/") || setprivPath().startsWith("/bin/"), true);
  assertEquals(dropArgv({ uid: 1000 }), []);
  assertEquals(dropArgv({ uid: null }), []);
});
