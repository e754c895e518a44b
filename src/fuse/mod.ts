/** The FUSE layer's public face: serve /ctx (own worker or in-thread), protocol pieces for tests. */
export { type MountHandle, type MountServeOptions, startMount } from "./serve.ts";
export {
  type MountEnd,
  type MountThread,
  type MountThreadOptions,
  startMountThread,
} from "./thread.ts";
export { BINARIES, launchers } from "./launcher.ts";
export {
  type Answer,
  Conn,
  type FileSystem,
  type Handler,
  HEADER_SIZES,
  type Request,
} from "./conn.ts";
export { CtxFs, type CtxFsOptions } from "./ctxfs.ts";
export { mountedType, mountFuse, prepareMountpoint, unmountFuse } from "./mount.ts";
export { statusText } from "./status.ts";
