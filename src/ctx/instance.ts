/** `ctx agent start|stop|status|ps`: the supervisor's view of agent instances, through the host control socket `<run>/control.sock`. */
import net from "node:net";
import type { Command } from "commander";
import { CtxError, ignore, isErrno } from "../abi/errno.ts";
import type { AgentContext } from "./agent.ts";
import { guarded } from "./fail.ts";
import { START_HINT } from "./root.ts";

type Frame = { type: string; code?: string; message?: string; [k: string]: unknown };

/**
 * The run dir of the host serving `root`, from an agent's alias `agent/<n>.sock` (a symlink to
 * `<run>/agent/<n>.sock`): `name`'s own, else the first alias found.
 */
export function runDirOf(root: string, name?: string): string {
  const aliases = name !== undefined ? [`${name}.sock`] : (() => {
    try {
      return [...Deno.readDirSync(`${root}/agent`)]
        .filter((e) => e.isSymlink && e.name.endsWith(".sock")).map((e) => e.name).sort();
    } catch (e) {
      ignore(e, Deno.errors.NotFound);
      return [];
    }
  })();
  for (const a of aliases) {
    let target: string;
    try {
      target = Deno.readLinkSync(`${root}/agent/${a}`);
    } catch (e) {
      ignore(e, Deno.errors.NotFound, "EINVAL");
      continue;
    }
    const m = /^(\/.+)\/agent\/[^/]+\.sock$/.exec(target);
    if (m) return m[1];
  }
  throw new CtxError(
    "EHOSTDOWN",
    `no agent socket alias leads to a host here${
      name ? ` (agent/${name}.sock)` : ""
    }: ${START_HINT}`,
    { path: `${root}/agent` },
  );
}

/** Sends one frame to `<run>/control.sock` and reads its one answer line. */
export function askHost(run: string, frame: unknown): Promise<Frame> {
  const path = `${run}/control.sock`;
  return new Promise((resolve, reject) => {
    const s = net.connect(path);
    let buf = "";
    s.setEncoding("utf8");
    s.once("connect", () => s.write(JSON.stringify(frame) + "\n"));
    s.on("data", (c: string) => {
      buf += c;
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      s.destroy();
      try {
        resolve(JSON.parse(buf.slice(0, nl)));
      } catch {
        reject(new CtxError("EPROTO", "the host sent a non-JSON line", { path }));
      }
    });
    s.once("error", (e: Error & { code?: string }) => {
      const code = e.code === "ENOENT" || e.code === "ECONNREFUSED" ? "EHOSTDOWN" : e.code ?? "";
      reject(
        new CtxError(isErrno(code) ? code : "EIO", `cannot reach the host: ${e.message}`, { path }),
      );
    });
    s.once("end", () => reject(new CtxError("EPROTO", "the host closed without an answer")));
  });
}

/** The frame, or its error as a CtxError. */
function ok(f: Frame): Frame {
  if (f.type !== "error") return f;
  const code = f.code ?? "EIO";
  throw new CtxError(isErrno(code) ? code : "EIO", f.message ?? "host error");
}

type Receipt = {
  unit: string;
  invocation: string;
  pid: number;
  start_time: string;
  boot_id: string;
  uid: number;
};

type Terminal = {
  agent: string;
  session: string;
  id: string;
  state: string;
  pid: number;
  owner: number;
  socket: string;
  receipt: Receipt;
};

/** One supervised terminal as a line: `terminal id=.. session=.. pid=.. state=.. unit=.. ...`. */
function terminalLine(t: Terminal): string {
  return `terminal id=${t.id} session=${t.session} pid=${t.pid} state=${t.state} owner=${t.owner} ` +
    `unit=${t.receipt.unit} invocation=${t.receipt.invocation}`;
}

function receiptLine(r: Receipt | null | undefined): string {
  if (!r) return "";
  return `unit=${r.unit} invocation=${r.invocation} pid=${r.pid} start_time=${r.start_time} ` +
    `boot_id=${r.boot_id} uid=${r.uid}`;
}

async function call(ctx: AgentContext, name: string | undefined, frame: unknown) {
  const root = ctx.root();
  return ok(await askHost(runDirOf(root, name), frame));
}

/** Adds `start`, `stop`, `status` and `ps` to the `ctx agent` group. */
export function register(agent: Command, ctx: AgentContext): void {
  agent
    .command("start")
    .description(
      "start the agent's runtime instance and the session's persistent terminal, in the current " +
        "directory (what already runs is reported, not doubled)",
    )
    .argument("<agent>", "agent name")
    .option("-s, --session <name>", "the terminal's session", "default")
    .option("--json", "print the host's frame")
    .action((name: string, o: { json?: boolean; session: string }) =>
      guarded(`agent/${name}`, async () => {
        // No cwd in the frame: the host opens this process's own cwd (SO_PEERCRED pid).
        const f = await call(ctx, name, { op: "start", agent: name, session: o.session });
        if (o.json) return console.log(JSON.stringify(f));
        console.log(
          `${f.already ? "running" : "started"} ${name} ${receiptLine(f.receipt as Receipt)}`,
        );
        if (f.terminal) console.log(terminalLine(f.terminal as Terminal));
      })
    );
  agent
    .command("stop")
    .description(
      "stop the agent's terminals and instance (SIGTERM, SIGKILL after the grace; live runs cancelled)",
    )
    .argument("<agent>", "agent name")
    .option("--json", "print the host's frame")
    .action((name: string, o: { json?: boolean }) =>
      guarded(`agent/${name}`, async () => {
        const f = await call(ctx, name, { op: "stop", agent: name });
        if (o.json) return console.log(JSON.stringify(f));
        const terms = (f.terminals ?? []) as {
          session: string;
          id: string;
          pid: number;
          result: string;
        }[];
        for (const t of terms) {
          console.log(
            `stopped terminal id=${t.id} session=${t.session} pid=${t.pid} (${t.result})`,
          );
        }
        if (f.result === "none") return console.log(`${name}: no instance`);
        console.log(`stopped ${name} (${f.result}) ${receiptLine(f.receipt as Receipt)}`);
      })
    );
  agent
    .command("status")
    .description(
      "print the agent's state, then its live instance's receipt facts, then one line per terminal",
    )
    .argument("<agent>", "agent name")
    .option("--json", "print the host's frame")
    .action((name: string, o: { json?: boolean }) =>
      guarded(`agent/${name}`, async () => {
        const f = await call(ctx, name, { op: "status", agent: name });
        if (o.json) return console.log(JSON.stringify(f));
        console.log(String(f.state));
        console.log(`pid=${f.pid ?? ""} ${receiptLine(f.receipt as Receipt)}`.trimEnd());
        for (const t of (f.terminals ?? []) as Terminal[]) console.log(terminalLine(t));
      })
    );
  agent
    .command("ps")
    .description(
      "list live agent instances (agent, state, pid, unit, invocation), then their terminals",
    )
    .option("--json", "print the host's frame")
    .action((o: { json?: boolean }) =>
      guarded("agent", async () => {
        const f = await call(ctx, undefined, { op: "ps" });
        if (o.json) return console.log(JSON.stringify(f));
        console.log("AGENT\tSTATE\tPID\tUNIT\tINVOCATION");
        for (
          const i of f.instances as {
            agent: string;
            state: string;
            pid: number | null;
            receipt: Receipt | null;
          }[]
        ) {
          if (!i.receipt) continue; // terminals only
          console.log(
            [i.agent, i.state, i.pid ?? "", i.receipt?.unit ?? "", i.receipt?.invocation ?? ""]
              .join("\t"),
          );
        }
        const terms = (f.instances as { terminals?: Terminal[] }[]).flatMap((i) =>
          i.terminals ?? []
        );
        if (terms.length === 0) return;
        console.log("\nTERMINAL\tAGENT\tSESSION\tSTATE\tPID\tUNIT");
        for (const t of terms) {
          console.log([t.id, t.agent, t.session, t.state, t.pid, t.receipt.unit].join("\t"));
        }
      })
    );
}
