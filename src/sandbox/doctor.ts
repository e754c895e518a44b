/** ctx doctor's sandbox check: can bubblewrap create user and pid namespaces here? */
import { CtxError, ignore } from "../abi/errno.ts";

/** What the probe found. */
export interface DoctorReport {
  /** True when sandboxed work can run. */
  ok: boolean;
  /** `bwrap --version`, or null when bubblewrap is missing. */
  bwrap: string | null;
  /** A user namespace could be created. */
  userns: boolean;
  /** A pid namespace could be created (together with the user namespace). */
  pidns: boolean;
  /** AppArmor's `apparmor_restrict_unprivileged_userns` when the kernel has it. */
  apparmorRestrict: boolean | null;
  /** One line for humans: what works, or what is wrong and how to fix it. */
  message: string;
}

async function run(args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const o = await new Deno.Command(args[0], {
      args: args.slice(1),
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr);
    return { ok: o.success, out: out.trim() };
  } catch (e) {
    return { ok: false, out: String(e) };
  }
}

/** Probes bubblewrap: its version, then a user namespace, then user + pid namespaces. */
export async function doctor(): Promise<DoctorReport> {
  let apparmorRestrict: boolean | null = null;
  try {
    apparmorRestrict =
      Deno.readTextFileSync("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").trim() ===
        "1";
  } catch (e) {
    ignore(e, Deno.errors.NotFound); /* kernel without the knob */
  }
  const v = await run(["bwrap", "--version"]);
  if (!v.ok) {
    return {
      ok: false,
      bwrap: null,
      userns: false,
      pidns: false,
      apparmorRestrict,
      message: "bubblewrap (bwrap) is not installed: apt-get install bubblewrap",
    };
  }
  const base = ["bwrap", "--ro-bind", "/", "/", "--unshare-user"];
  const u = await run([...base, "--", "/bin/true"]);
  const p = u.ok ? await run([...base, "--unshare-pid", "--proc", "/proc", "--", "/bin/true"]) : u;
  const ok = u.ok && p.ok;
  const why = apparmorRestrict
    ? " (AppArmor restricts unprivileged user namespaces: kernel.apparmor_restrict_unprivileged_userns=1)"
    : "";
  return {
    ok,
    bwrap: v.out,
    userns: u.ok,
    pidns: p.ok,
    apparmorRestrict,
    message: ok
      ? `${v.out}: user and pid namespaces work; sandboxed tools can run`
      : `bubblewrap cannot create its namespaces here${why}: ${(u.ok ? p : u).out}`,
  };
}

let checked: Promise<DoctorReport> | undefined;

/** Throws ENOTSUP with doctor's message when sandboxed work cannot run (probed once per process). */
export async function requireSandbox(): Promise<void> {
  const r = await (checked ??= doctor());
  if (!r.ok) throw new CtxError("ENOTSUP", `refusing sandboxed work: ${r.message}`);
}
