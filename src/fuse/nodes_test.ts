/** The node table's child lists: a listed child's path is always its parent's path plus its name. */
import { assertEquals } from "../../tests/assert.ts";
import { nameHash, type Node, Nodes } from "./nodes.ts";

/** A tree a/b/x looked up the way LOOKUP does it: each node referenced, then adopted by its parent. */
function tree(): { nodes: Nodes; root: Node; a: Node; b: Node; x: Node } {
  const nodes = new Nodes();
  const root = nodes.get(1)!;
  const look = (parent: Node, name: string, path: string) => {
    const n = nodes.ref(path);
    nodes.adopt(parent, name, path);
    return n;
  };
  const a = look(root, "a", "a");
  const b = look(a, "b", "a/b");
  const x = look(b, "x", "a/b/x");
  return { nodes, root, a, b, x };
}

Deno.test("a looked-up name is found again as its parent's child, the same node", () => {
  const { nodes, a, b, x } = tree();
  assertEquals(nodes.child(a, "b"), b);
  assertEquals(nodes.child(b, "x"), x);
  assertEquals(nodes.child(b, "y"), undefined);
});

Deno.test("a renamed node leaves its old parent's list; its own children stay its children, at their new paths", () => {
  const { nodes, root, a, b, x } = tree();
  nodes.move("a/b", "c");
  assertEquals(nodes.child(a, "b"), undefined);
  assertEquals(nodes.child(root, "c"), undefined); // listed again at its next LOOKUP
  assertEquals(nodes.child(b, "x"), x);
  assertEquals(x.path, "c/x");
  nodes.adopt(root, "c", "c");
  assertEquals(nodes.child(root, "c"), b);
});

Deno.test("a rename over a listed name takes the replaced node out of the list", () => {
  const { nodes, b, x } = tree();
  const y = nodes.ref("a/b/y");
  nodes.adopt(b, "y", "a/b/y");
  nodes.move("a/b/y", "a/b/x");
  assertEquals(nodes.child(b, "x"), undefined);
  assertEquals(nodes.child(b, "y"), undefined);
  assertEquals([x.path, y.path], [null, "a/b/x"]);
});

Deno.test("unlink, FORGET to zero and an exchange take a node out of its parent's list", () => {
  const { nodes, a, b } = tree();
  nodes.drop("a/b/x");
  assertEquals(nodes.child(b, "x"), undefined);
  const t = tree();
  t.nodes.forget(t.x.id, 1);
  assertEquals(t.nodes.child(t.b, "x"), undefined);
  t.nodes.exchange("a/b", "a");
  assertEquals(t.nodes.child(t.root, "a"), undefined);
  assertEquals(t.nodes.child(t.a, "b"), undefined);
  assertEquals(nodes.child(a, "b"), b); // the first tree is untouched
});

Deno.test("a node with a second name (a hard link) is not listed: its path is not one parent's", () => {
  const { nodes, b, x } = tree();
  nodes.alias(x, "a/b/x2", "77");
  assertEquals(nodes.child(b, "x"), undefined);
  nodes.adopt(b, "x2", "a/b/x2");
  assertEquals(nodes.child(b, "x2"), undefined);
  const t = tree();
  t.nodes.ref("a/b/x", "78"); // found to have nlink > 1
  t.nodes.ref("a/b/x3", "78"); // its other name: the same node, now with two names
  assertEquals(t.nodes.child(t.b, "x"), undefined);
});

Deno.test("two names with one hash: the child list answers only the name it holds, the other is not listed", () => {
  const seen = new Map<number, string>();
  let pair: [string, string] | undefined;
  for (let i = 0; !pair; i++) {
    const name = `n${i}`;
    const other = seen.get(nameHash(name));
    if (other !== undefined) pair = [other, name];
    else seen.set(nameHash(name), name);
  }
  const [first, second] = pair;
  const { nodes, b } = tree();
  const one = nodes.ref(`a/b/${first}`), two = nodes.ref(`a/b/${second}`);
  nodes.adopt(b, first, `a/b/${first}`);
  nodes.adopt(b, second, `a/b/${second}`);
  assertEquals(nodes.child(b, first), one);
  assertEquals(nodes.child(b, second), undefined);
  nodes.drop(`a/b/${first}`);
  assertEquals(nodes.child(b, first), undefined);
  nodes.adopt(b, second, `a/b/${second}`);
  assertEquals(nodes.child(b, second), two);
});

Deno.test("get() of a forgotten node is undefined, even right after it was the one asked for", () => {
  const { nodes, a, b, x } = tree();
  assertEquals([nodes.get(x.id), nodes.get(b.id), nodes.get(x.id)], [x, b, x]);
  nodes.forget(x.id, 1);
  assertEquals(nodes.get(x.id), undefined);
  assertEquals(nodes.get(b.id), b);
  nodes.forget(b.id, 1);
  assertEquals([nodes.get(b.id), nodes.get(a.id), nodes.get(1)?.id], [undefined, a, 1]);
});
