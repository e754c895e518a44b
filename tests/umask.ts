/**
 * Preloaded before every test module (deno.json `test`): the suite builds trees that other uids
 * (1000, 65534) must read, so it runs with umask 022 whatever the shell's (a 077 one made about 30
 * tests fail). Every test module shares one process under --parallel, and every preload sets the
 * same mask, so no module sees it change; no test may change it (a child process can).
 */
Deno.umask(0o022);
