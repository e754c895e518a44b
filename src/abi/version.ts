/** The CortexFS release version: the one source `ctx --version`, `cortexfsd --version` and packaging read. */
export const VERSION = "0.1.0";
