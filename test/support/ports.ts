/**
 * Ports for child processes that must be told their port before they bind it (sshd, Prometheus,
 * the registry, an engine process): a port is proposed, the child started on it, and when the
 * child reports the port taken (another process bound it between the proposal and the child's
 * bind), the start is tried again on another port. Servers in the test's own process listen on
 * port 0 and never need this; a child that can bind port 0 and report its port should do that.
 */
import { createServer } from "node:net";

/** What a start function throws when its child found its port taken (EADDRINUSE). */
export class PortTaken extends Error {
  constructor(
    readonly port: number,
    detail: string,
  ) {
    super(`[test] port ${port} was taken: ${detail}`);
  }
}

/** True when a child's output says it could not bind because the address is in use. */
export function saysPortTaken(output: string): boolean {
  // "Address already in use" (sshd, Postgres, Go servers), "the address is already in use" (the
  // engine), EADDRINUSE (Node).
  return /EADDRINUSE|address (is )?already in use/i.test(output);
}

/**
 * A port to propose to a child: one the kernel gave a socket bound to port 0 on 127.0.0.1, then
 * released. Anything else may bind it before the child does: use it through `onFreshPort`, or
 * for an address fixed in advance (an engine restarted on the same URL) whose starts wait out
 * EADDRINUSE (test/support/chaos-process.ts `spawnEngine`).
 */
export function proposePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      const port = typeof a === "object" && a ? a.port : 0;
      s.close(() => ok(port));
    });
  });
}

/**
 * Runs `start(port)` on a proposed port, and again on another (at most `attempts` times in all)
 * while it throws `PortTaken`. Any other error is thrown at once.
 * @throws Error naming `what` when every attempt found its port taken.
 */
export async function onFreshPort<T>(
  what: string,
  start: (port: number) => Promise<T>,
  attempts = 5,
): Promise<T> {
  let last = "";
  for (let i = 0; i < attempts; i++) {
    const port = await proposePort();
    try {
      return await start(port);
    } catch (e) {
      if (!(e instanceof PortTaken)) throw e;
      last = e.message;
    }
  }
  throw new Error(`[test] ${what}: ${attempts} proposed ports in a row were taken (${last})`);
}
