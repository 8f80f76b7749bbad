import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Files of the tiers that take longest (seconds to minutes each: processes, real servers,
 * browsers) start first, the quick unit and integration files fill in at the end, so the
 * workers finish together instead of one running a long e2e file that started last. Within a
 * tier, the order vitest chose: the longest first when its cache has an earlier run's timings,
 * else the largest file first (a clean clone has no timings).
 */
const SLOW_TIERS = ["property", "e2e", "runner", "serverless", "browser", "reliability", "cli"];

class SlowTiersFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const tier = (f: TestSpecification) => {
      const m = /\/test\/([^/]+)\//.exec(f.moduleId);
      const i = SLOW_TIERS.indexOf(m?.[1] ?? "");
      return i < 0 ? SLOW_TIERS.length : i;
    };
    // A stable sort: within a tier, the order vitest chose.
    return sorted
      .map((f, i) => ({ f, i, t: tier(f) }))
      .sort((a, b) => a.t - b.t || a.i - b.i)
      .map((x) => x.f);
  }
}

const UNIT = ["test/unit/**/*.test.ts", "test/unit/**/*.test.tsx"];
const INTEGRATION = ["test/integration/**/*.test.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Integration suites start their own sshd / HTTP servers on ephemeral loopback ports.
    fileParallelism: true,
    // Four files at a time on 2 cores: the slow tiers spend much of their time waiting (gates
    // baking in real time, health checks, control-plane timeouts, processes starting); one
    // run's files add up to about 1,860 s of wall time for about 800 CPU seconds.
    maxWorkers: 4,
    sequence: { sequencer: SlowTiersFirst },
    // BATON_TEST_CPU_LOG=FILE: one line per test file with its CPU and wall time.
    setupFiles: process.env.BATON_TEST_CPU_LOG ? ["test/support/cpu-meter.ts"] : [],
    projects: [
      // Unit files share one module graph per worker (they start no process and no server):
      // the engine's modules load once per worker instead of once per file.
      { extends: true, test: { name: "unit", include: UNIT, isolate: false } },
      // Integration files too (in-process engines, servers they close, no module mocks): what
      // a file sets in process.env is restored after it (test/support/env-restore.ts; the
      // project's setup files come after the root's).
      {
        extends: true,
        test: {
          name: "integration",
          include: INTEGRATION,
          isolate: false,
          setupFiles: ["test/support/env-restore.ts"],
        },
      },
      {
        extends: true,
        // The slow tiers as well: each file's processes and servers are its own, and sharing
        // the module graph saves each file's import of the engine (about 2 s of CPU a file).
        test: {
          name: "tiers",
          include: ["test/**/*.test.ts", "test/**/*.test.tsx"],
          exclude: [...UNIT, ...INTEGRATION],
          isolate: false,
          setupFiles: ["test/support/env-restore.ts"],
        },
      },
    ],
  },
});
