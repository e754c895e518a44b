/** The public face of src/abi: errno, names, every control-file format and the control tables. */
export * from "./errno.ts";
export * from "./text.ts";
export * from "./names.ts";
export * from "./identity.ts";
export * from "./view.ts";
export * from "./mount.ts";
export * from "./rlimit.ts";
export * from "./window.ts";
export * from "./choice.ts";
export * from "./tools.ts";
export * from "./policy.ts";
export * from "./model.ts";
export * from "./doc.ts";
export * from "./projection.ts";
export * from "./controls.ts";
