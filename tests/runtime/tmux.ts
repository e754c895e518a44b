/** A tmux server for terminal tests: run commands in a real pty, read the screen, wait for it. */

/** One private tmux server (its own socket) with one session `t`. */
export class Tmux {
  constructor(readonly sock: string) {}

  /** Runs a tmux command against this server. */
  async run(...args: string[]): Promise<{ code: number; out: string }> {
    const o = await new Deno.Command("tmux", {
      args: ["-S", this.sock, ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: o.code, out: new TextDecoder().decode(o.stdout) };
  }

  /** The visible screen (with `escapes`, the attribute escape sequences too). */
  async screen(options: { escapes?: boolean } = {}): Promise<string> {
    return (await this.run("capture-pane", "-p", ...(options.escapes ? ["-e"] : []), "-t", "t"))
      .out;
  }

  /** Polls the screen until `pred` holds; fails after 15 s, showing the screen. */
  async wait(pred: (s: string) => boolean, what: string): Promise<string> {
    let s = "";
    for (let i = 0; i < 600; i++) {
      s = await this.screen();
      if (pred(s)) return s;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`timed out waiting for ${what}; screen:\n${s}`);
  }

  /** The screen's non-empty lines, trailing blanks trimmed. */
  lines(s: string): string[] {
    return s.split("\n").map((l) => l.trimEnd()).filter((l) => l !== "");
  }

  /** Waits (bounded) until the session `t` has ended. */
  async ended(): Promise<boolean> {
    for (let i = 0; i < 200 && (await this.run("has-session", "-t", "t")).code === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
    }
    return (await this.run("has-session", "-t", "t")).code !== 0;
  }
}
