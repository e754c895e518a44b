/** Inspects a workspace for what must stay read-only inside it: `.git` and a worktree's gitdir. */

/** The protected parts of a workspace. */
export interface WorkspaceGit {
  /** `<workspace>/.git` exists (directory or worktree file). */
  git: boolean;
  /** For a worktree, the absolute gitdir its `.git` file names (when it exists). */
  gitdir?: string;
}

/** Finds `.git` and, for a worktree (`.git` is a file `gitdir: PATH`), the gitdir it points at. */
export function workspaceGit(workspace: string): WorkspaceGit {
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(`${workspace}/.git`);
  } catch {
    return { git: false };
  }
  if (!st.isFile) return { git: true };
  const m = /^gitdir: (.+)$/m.exec(Deno.readTextFileSync(`${workspace}/.git`));
  if (!m) return { git: true };
  const dir = m[1].startsWith("/") ? m[1] : `${workspace}/${m[1]}`;
  try {
    return Deno.statSync(dir).isDirectory ? { git: true, gitdir: Deno.realPathSync(dir) } : {
      git: true,
    };
  } catch {
    return { git: true };
  }
}
