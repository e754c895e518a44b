/** The system layer's public face: the only module that opens libc through FFI. */
export * as libc from "./libc.ts";
export { Dir } from "./dir.ts";
