/** Test helper: runs an accept/reject table against one parser and its serializer. */
import { CtxError, type Errno } from "../src/abi/errno.ts";
import { assertEquals, assertStringIncludes, assertThrows } from "./assert.ts";

/** One accepted input: the bytes, the parsed value, and the canonical bytes if they differ. */
export type Accept<T> = [input: string, value: T, canonical?: string];

/** One rejected input: the bytes, the errno, and a fragment of the reason. */
export type Reject = [input: string, errno: Errno, reason: string];

/** The rows of one format. */
export interface Table<T> {
  /** The control name every message starts with (`"window": ...`). */
  control: string;
  accept: Accept<T>[];
  reject: Reject[];
}

/**
 * Asserts every accepted row parses to its whole value and serializes back to its canonical bytes,
 * and every rejected row throws a CtxError with the errno, naming the control and the reason.
 */
export function checkTable<T>(
  parse: (text: string) => T,
  format: (value: T) => string,
  table: Table<T>,
): void {
  for (const [input, value, canonical] of table.accept) {
    const row = `accept ${JSON.stringify(input)}`;
    let got: T;
    try {
      got = parse(input);
    } catch (e) {
      throw new Error(`${row}: threw ${e}`);
    }
    assertEquals(got, value, row);
    assertEquals(format(got), canonical ?? input, `${row}: canonical bytes`);
    assertEquals(parse(format(got)), value, `${row}: round trip`);
  }
  for (const [input, errno, reason] of table.reject) {
    const row = `reject ${JSON.stringify(input)}`;
    const e = assertThrows(() => parse(input), CtxError, `${row}: did not throw`);
    assertEquals(e.errno, errno, `${row}: ${e.message}`);
    assertStringIncludes(e.message, `"${table.control}": `, row);
    assertStringIncludes(e.message, reason, row);
  }
}
