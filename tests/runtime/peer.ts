/** A bare client (node: built-ins only, so it runs as another uid without the npm cache): writes argv[1], prints replies. */
import net from "node:net";

const [path, frame] = Deno.args;
const s = net.connect(path);
s.setEncoding("utf8");
s.on("connect", () => s.write(frame + "\n"));
s.on("data", (d: string) => {
  Deno.stdout.writeSync(new TextEncoder().encode(d));
  if (d.includes('"done"') || d.includes('"error"')) s.end();
});
s.on("error", (e: Error) => {
  console.error(e.message);
  Deno.exit(1);
});
