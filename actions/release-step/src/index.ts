import { run } from "./main.ts";

// The runner (or the engine's local runner) reads our output through pipes. If it dies, writes
// fail with EPIPE; that must not crash the step between provisioning the key and removing it:
// the step goes on, reports to the engine, and cleans up, with its log going nowhere.
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});

void run();
