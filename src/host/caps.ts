/** The capabilities an agent's runtime instance keeps, and the setpriv prefix that fixes them at its exec (every thread of the instance starts with them; none is dropped in-process). */
import { CtxError } from "../abi/errno.ts";
import { systemTool } from "../sandbox/launch.ts";

/** Linux capability names by number (linux/capability.h; `setpriv --list-caps` lists them in this order). */
export const CAP_NAMES = [
  "chown",
  "dac_override",
  "dac_read_search",
  "fowner",
  "fsetid",
  "kill",
  "setgid",
  "setuid",
  "setpcap",
  "linux_immutable",
  "net_bind_service",
  "net_broadcast",
  "net_admin",
  "net_raw",
  "ipc_lock",
  "ipc_owner",
  "sys_module",
  "sys_rawio",
  "sys_chroot",
  "sys_ptrace",
  "sys_pacct",
  "sys_admin",
  "sys_boot",
  "sys_nice",
  "sys_resource",
  "sys_time",
  "sys_tty_config",
  "mknod",
  "lease",
  "audit_write",
  "audit_control",
  "setfcap",
  "mac_override",
  "mac_admin",
  "syslog",
  "wake_alarm",
  "block_suspend",
  "audit_read",
  "perfmon",
  "bpf",
  "checkpoint_restore",
] as const;

/** A capability's name, without the `cap_` prefix. */
export type CapName = typeof CAP_NAMES[number];

/**
 * What an instance of a root host keeps: its bounding, permitted and effective sets are exactly
 * these (inheritable and ambient empty). Each is needed by one operation (spec/runtime.md "What
 * still needs root"); every other capability is gone for good from the instance and from
 * everything it starts. A peer's `/proc` reads (sys_ptrace) and giving a uid its directories
 * (chown) are asked of the host instead (src/host/broker.ts); a non-root agent's steps are
 * signalled as their uid (asSender in src/sys/fsid.ts: setuid, not kill).
 */
export const INSTANCE_CAPS: readonly CapName[] = [
  "setgid", // setfsgid/setgroups per session owner; setpriv --regid/--groups for a step
  "setuid", // setfsuid per session owner; setpriv --reuid for a step
  "setfcap", // bwrap mapping uid 0 into its user namespace: a step of an agent whose uid is 0
];

/** The names of the capabilities set in a `/proc/<pid>/status` mask (`CapEff:` etc., hex). */
export function capNames(hex: string): string[] {
  const mask = BigInt(`0x${hex}`);
  const out: string[] = [];
  for (let bit = 0n; mask >> bit; bit++) {
    if ((mask >> bit) & 1n) out.push(CAP_NAMES[Number(bit)] ?? `cap_${bit}`);
  }
  return out;
}

/** util-linux `setpriv` at a fixed system path, never through PATH (ENOSYS when absent). */
export function setprivPath(): string {
  const p = systemTool("setpriv");
  if (p) return p;
  throw new CtxError("ENOSYS", "setpriv (util-linux) is not installed (/usr/bin, /bin)");
}

/**
 * The argv prefix that execs an instance with only {@link INSTANCE_CAPS}: setpriv limits the
 * bounding set, clears the inheritable (and so the ambient) set and sets no_new_privs, then execs
 * in place (the pid stays: LISTEN_PID still names the instance). uid 0's exec then grants exactly
 * the bounding set as permitted and effective. A host that is not root has nothing to drop: [].
 */
export function dropArgv(options: { uid: number | null }): string[] {
  if (options.uid !== 0) return [];
  return [
    setprivPath(),
    `--bounding-set=-all${INSTANCE_CAPS.map((c) => `,+${c}`).join("")}`,
    "--inh-caps=-all",
    "--no-new-privs",
    "--",
  ];
}
