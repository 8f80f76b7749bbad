/**
 * The stand-ins of `bench:engines` in a process of their own, so that their CPU time is
 * measured apart from the engines', Postgres's and the driver's: the reference control plane
 * (in memory, over HTTP) with the one-lane fleet's lanes declared, and the GitHub stand-in
 * (no effective rate limit). Started by `fork` with an IPC channel:
 *
 *   environment   STANDINS_FLEET (JSON `OneLaneFleet`), STANDINS_LANES (lanes to declare),
 *                 STANDINS_TOKEN (the token the GitHub stand-in accepts)
 *   → parent      `{ ready: { cpUrl, cpWriteToken, githubBaseUrl } }` once both listen, then
 *                 `{ dispatch: <client_payload> }` for each accepted dispatch
 *   ← parent      `"close"`: both stop and the process exits 0
 */
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import { startGitHubStandin } from "../../test/support/github-standin.ts";
import { type OneLaneFleet, oneLaneSeed } from "../../test/support/one-lane-fleet.ts";

const send = (m: unknown) => process.send?.(m);
const fleet = JSON.parse(process.env.STANDINS_FLEET ?? "{}") as OneLaneFleet;
const lanes = Number(process.env.STANDINS_LANES ?? 0);
const { handle: cp } = await startEmbeddedControlPlane({ dataDir: ":memory:" });
cp.core.seed(oneLaneSeed(fleet, lanes));
const github = await startGitHubStandin({
  rateLimits: { perMinute: 1_000_000, perHour: 10_000_000, maxConcurrent: 1_000 },
  tokens: [process.env.STANDINS_TOKEN ?? ""],
  onAccepted: (d) => {
    send({ dispatch: d.client_payload });
  },
});
process.on("message", async (m) => {
  if (m !== "close") return;
  await github.close();
  await cp.close();
  process.exit(0);
});
process.on("disconnect", () => process.exit(0));
send({ ready: { cpUrl: cp.url, cpWriteToken: cp.writeToken, githubBaseUrl: github.baseUrl } });
