/** The `mount` control: `source<TAB>target<TAB>mode<TAB>options` lines (spec-digest 7.3). */
import { checkAbsolute, invalid, joinLines, listLines, quote } from "./text.ts";

/** The mount options policy accepts; `-` alone means none. */
export const MOUNT_OPTIONS = ["bind", "rbind", "nosuid", "nodev", "noexec"] as const;

/** One mount option word. */
export type MountOption = typeof MOUNT_OPTIONS[number];

/** One line of `mount`. */
export interface MountEntry {
  source: string;
  target: string;
  mode: "ro" | "rw";
  options: MountOption[];
}

/**
 * Parses `mount`. Source and target are canonical absolute paths, mode `ro|rw`, options a comma
 * list of distinct words (bind and rbind exclusive) or `-`; a target appears once. Empty = none.
 */
export function parseMount(text: string): MountEntry[] {
  const targets = new Set<string>();
  return listLines("mount", text).map(({ no, text: line }) => {
    const f = line.split("\t");
    if (f.length !== 4) {
      throw invalid(
        "mount",
        `line ${no} ${
          quote(line)
        } has ${f.length} tab-separated fields (source, target, mode, options)`,
      );
    }
    const [source, target, mode, opts] = f;
    checkAbsolute("mount", source);
    checkAbsolute("mount", target);
    if (mode !== "ro" && mode !== "rw") {
      throw invalid("mount", `line ${no}: mode ${quote(mode)} is not ro or rw`);
    }
    const options: MountOption[] = [];
    if (opts !== "-") {
      for (const o of opts.split(",")) {
        if (!(MOUNT_OPTIONS as readonly string[]).includes(o)) {
          throw invalid(
            "mount",
            `line ${no}: option ${quote(o)} is not one of ${
              MOUNT_OPTIONS.join(" ")
            } (or "-" alone)`,
          );
        }
        if (options.includes(o as MountOption)) {
          throw invalid("mount", `line ${no}: option ${quote(o)} is repeated`);
        }
        options.push(o as MountOption);
      }
      if (options.includes("bind") && options.includes("rbind")) {
        throw invalid("mount", `line ${no}: options "bind" and "rbind" are exclusive`);
      }
    }
    if (targets.has(target)) throw invalid("mount", `line ${no}: target ${quote(target)} repeats`);
    targets.add(target);
    return { source, target, mode, options };
  });
}

/** Serializes `mount`. */
export function formatMount(entries: readonly MountEntry[]): string {
  return joinLines(
    entries.map((e) =>
      [e.source, e.target, e.mode, e.options.length ? e.options.join(",") : "-"].join("\t")
    ),
  );
}
