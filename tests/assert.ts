/** The few assertions the tests use (JSR's @std/assert is unreachable here); built on node:assert. */
import nodeAssert from "node:assert";

/** Asserts `cond` is truthy. */
export function assert(cond: unknown, msg?: string): asserts cond {
  nodeAssert.ok(cond, msg);
}

/** Deep, strict equality of whole values. */
export function assertEquals<T>(actual: T, expected: T, msg?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, msg);
}

/** Deep, strict inequality. */
export function assertNotEquals<T>(actual: T, expected: T, msg?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, msg);
}

/** Asserts `s` matches `re`. */
export function assertMatch(s: string, re: RegExp, msg?: string): void {
  nodeAssert.match(s, re, msg);
}

/** Asserts `s` contains `part`. */
export function assertStringIncludes(s: string, part: string, msg?: string): void {
  if (!s.includes(part)) {
    throw new nodeAssert.AssertionError({
      message: msg ?? `expected ${JSON.stringify(s)} to include ${JSON.stringify(part)}`,
    });
  }
}

/** Asserts `fn` throws an instance of `cls` (default Error) and returns it. */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  // deno-lint-ignore no-explicit-any
  cls?: new (...args: any[]) => E,
  msg?: string,
): E {
  try {
    fn();
  } catch (e) {
    if (cls && !(e instanceof cls)) {
      throw new nodeAssert.AssertionError({ message: msg ?? `expected ${cls.name}, got ${e}` });
    }
    return e as E;
  }
  throw new nodeAssert.AssertionError({ message: msg ?? "expected the function to throw" });
}

/** Asserts the promise rejects with an instance of `cls` (default Error) and returns the error. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  cls?: new (...args: any[]) => E,
  msg?: string,
): Promise<E> {
  try {
    await fn();
  } catch (e) {
    if (cls && !(e instanceof cls)) {
      throw new nodeAssert.AssertionError({ message: msg ?? `expected ${cls.name}, got ${e}` });
    }
    return e as E;
  }
  throw new nodeAssert.AssertionError({ message: msg ?? "expected the promise to reject" });
}
