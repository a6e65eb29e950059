import { execFileSync } from "node:child_process";
import path from "node:path";
import { childEnv } from "./process.js";

/**
 * The go command as a user without network runs it: module mode, the go.mod
 * files as written, no proxy, no checksum database, and every cache under
 * `tmp`, none in the repository or $HOME.
 */
export function goEnv(tmp: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = childEnv({
    GO111MODULE: "on",
    GOFLAGS: "-mod=mod",
    GOPROXY: "off",
    GOSUMDB: "off",
    GOWORK: "off",
    GOENV: "off",
    GOTOOLCHAIN: "local",
    GOPATH: path.join(tmp, "gopath"),
    GOCACHE: path.join(tmp, "cache"),
    ...extra,
  });
  delete env["GOMODCACHE"];
  return env;
}

/** Builds the Go program `pkg` (e.g. "./examples/sloppyagent") of the module in `dir` into `tmp`; returns the executable. */
export function goBuild(dir: string, pkg: string, tmp: string): string {
  const exe = path.join(tmp, path.basename(pkg));
  execFileSync("go", ["build", "-o", exe, pkg], { cwd: dir, env: goEnv(tmp), stdio: ["ignore", "ignore", "inherit"], timeout: 600_000 });
  return exe;
}
