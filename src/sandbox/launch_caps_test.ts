/** launch() and reapInit() in a process with only the instance's capabilities (no CAP_KILL): a uid's sandbox init is killed as that uid (asSender), real bwrap, uid 65534. */
import { assert, assertEquals } from "../../tests/assert.ts";
import { gone } from "../../tests/fixture/proc.ts";
import { until } from "../../tests/fixture/wait.ts";
import { sandboxDirs, sandboxSpec } from "../../tests/fixture/sandbox.ts";
import { dropArgv, INSTANCE_CAPS } from "../host/caps.ts";
import { launch } from "./launch.ts";
import { procUid, type Receipt, receiptLive } from "./receipt.ts";
import { ignore } from "../abi/errno.ts";

const UID = 65534;

/** A child deno running `code` as an instance runs: root, with exactly the instance's capabilities (dropArgv). */
interface Instance {
  child: Deno.ChildProcess;
  /** Its exit, once seen. */
  status(): Deno.CommandStatus | undefined;
  /** Its stdout so far, by line, and its stderr so far. */
  lines(): string[];
  stderr(): string;
}

function instance(code: string): Instance {
  const [cmd, ...args] = dropArgv({ uid: 0 });
  const child = new Deno.Command(cmd, {
    args: [...args, Deno.execPath(), "eval", "--quiet", code],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "", err = "";
  let status: Deno.CommandStatus | undefined;
  const read = async (s: ReadableStream<Uint8Array>, add: (t: string) => void) => {
    for await (const t of s.pipeThrough(new TextDecoderStream())) add(t);
  };
  const done = Promise.all([
    read(child.stdout, (t) => out += t),
    read(child.stderr, (t) => err += t),
    child.status,
  ]);
  done.then(([, , s]) => status = s);
  return {
    child,
    status: () => status,
    lines: () => out.split("\n").filter((l) => l),
    stderr: () => err,
  };
}

/** The instance's capabilities as /proc decodes them: `CapEff` of the child, printed by its code. */
const EFFECTIVE = [...INSTANCE_CAPS].sort();
const CAPS = `(await import("${import.meta.resolve("../../tests/fixture/proc.ts")}"))
  .capsAt("/proc/self").eff.sort()`;

/**
 * Ends what the test started and is left: the sandbox init (if `r` still names it; the instance's
 * own launch() then ends and cleans up), then the instance if it still runs.
 */
async function end(inst: Instance, r?: Receipt): Promise<void> {
  if (r && receiptLive(r)) {
    try {
      Deno.kill(r.pid, "SIGKILL"); // root here, with CAP_KILL
    } catch (e) {
      ignore(e, Deno.errors.NotFound); /* ended */
    }
  }
  await until(() => !!inst.status(), "the instance to end").catch(() => {
    try {
      inst.child.kill("SIGKILL");
    } catch (e) {
      ignore(e, TypeError); /* ended */
    }
  });
  await inst.child.status;
}

Deno.test({
  name:
    "launch() in a process without CAP_KILL (an instance): an abort while a uid's sandbox runs kills its init as that uid, and launch() ends cancelled",
  ignore: Deno.uid() !== 0,
  async fn() {
    const base = await sandboxDirs(UID);
    // The command signals that it runs (a file in the workspace), then would sleep its 600 s:
    // only the abort's SIGKILL of the init ends it.
    const command = ["/bin/bash", "-c", "touch /workspace/up; exec sleep 600"];
    const code = `const { launch } = await import("${import.meta.resolve("./launch.ts")}");
      const { procUid, receiptLive } = await import("${import.meta.resolve("./receipt.ts")}");
      const { until } = await import("${import.meta.resolve("../../tests/fixture/wait.ts")}");
      const ac = new AbortController();
      let receipt;
      const ran = launch(${JSON.stringify(sandboxSpec(base, command, UID))}, {
        signal: ac.signal,
        onReceipt(r) {
          receipt = r;
          console.log(JSON.stringify({ receipt: r, uid: procUid(r.pid) }));
        },
      }).then(() => "resolved", (e) => e?.errno ?? String(e));
      await until(() => { try { Deno.statSync(${JSON.stringify(`${base}/ws/up`)}); return true; }
        catch (e) { if (!(e instanceof Deno.errors.NotFound)) throw e; return false; } }, "the sandboxed command to run");
      ac.abort();
      const errno = await ran;
      console.log(JSON.stringify({ errno, live: receiptLive(receipt), caps: ${CAPS} }));`;
    const inst = instance(code);
    let receipt: Receipt | undefined;
    try {
      await until(() => inst.lines().length > 0 || !!inst.status(), "the sandbox's receipt");
      const first = JSON.parse(inst.lines()[0] ?? "null");
      assert(first, inst.stderr());
      receipt = first.receipt as Receipt;
      assertEquals(first.uid, UID, "the sandbox init runs as the agent's uid");
      await until(() => !!inst.status(), `the instance's launch() to end at its abort`, 30_000);
      assert(inst.status()?.success, inst.stderr());
      assertEquals(JSON.parse(inst.lines()[1]), {
        errno: "ECANCELED",
        live: false,
        caps: EFFECTIVE,
      });
      assert(gone(receipt.pid), "the sandbox init is gone");
    } finally {
      await end(inst, receipt);
      await Deno.remove(base, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "reapInit() in a process without CAP_KILL (an instance) SIGKILLs a uid's sandbox init that outlives its bound, as that uid, and sees it end",
  ignore: Deno.uid() !== 0,
  async fn() {
    const base = await sandboxDirs(UID);
    // A real sandbox of uid 65534, launched here (root): its command would sleep its 600 s.
    const ac = new AbortController();
    let receipt: Receipt | undefined;
    let ended: { code?: number; errno?: string } | undefined;
    launch(sandboxSpec(base, ["/bin/sleep", "600"], UID), {
      signal: ac.signal,
      onReceipt: (r) => receipt = r,
    })
      .then((r) => ended = { code: r.code }, (e) => ended = { errno: e?.errno ?? String(e) });
    let inst: Instance | undefined;
    try {
      await until(() => !!receipt || !!ended, "the sandbox's receipt");
      assert(receipt, JSON.stringify(ended));
      const r = receipt;
      assertEquals(procUid(r.pid), UID, "the sandbox init runs as the agent's uid");
      // exitMs 0: the init outlives the bound at once; the SIGKILL's end is an event (its pidfd).
      const receiptText = JSON.stringify(r);
      inst = instance(`const { reapInit } = await import("${import.meta.resolve("./launch.ts")}");
        const end = await reapInit(${receiptText}, { exitMs: 0, killMs: 20_000, uid: ${UID} });
        console.log(JSON.stringify({ end, caps: ${CAPS} }));`);
      const i = inst;
      await until(() => !!i.status(), "the instance's reapInit() to end", 30_000);
      assert(i.status()?.success, i.stderr());
      assertEquals(JSON.parse(i.lines()[0]), { end: "killed", caps: EFFECTIVE });
      assert(!receiptLive(r), "the sandbox init is gone");
      // bwrap saw its init die: the launch here ends, with the SIGKILL's status.
      await until(() => !!ended, "the launch of the killed sandbox to end");
      assertEquals(ended, { code: 128 + 9 });
    } finally {
      if (!ended) ac.abort(); // root here: the abort's SIGKILL reaches the init
      if (inst) await end(inst);
      await until(() => !!ended, "the aborted launch to end");
      await Deno.remove(base, { recursive: true });
    }
  },
});
