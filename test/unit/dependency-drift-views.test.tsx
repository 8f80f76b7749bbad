/**
 * Where a mutable dependency's drift is shown (docs/drift.md "Mutable dependencies"): the release
 * page's banner and `baton status`, while the release's history holds a current
 * `dependency_drift`; neither once a `dependency_drift_cleared` entry follows.
 */
import { describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import {
  DEPENDENCY_CLEARED_KIND,
  DEPENDENCY_DRIFT_KIND,
  type ModelDependencyDrift,
} from "../../engine/src/domain/dependency-drift.ts";
import type { HistoryEntry } from "../../engine/src/domain/types.ts";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { defaultRecords, releasePageHtml, visibleText } from "../support/dashboard-fixtures.ts";

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);

const drift: ModelDependencyDrift = {
  model: "chat-model",
  release: "r2",
  observed_at: Date.UTC(2026, 10, 29, 11, 0, 0),
  dependencies: [
    {
      name: "chat-api",
      kind: "hosted_model",
      owner: "ml-platform",
      declared: "2026-11-01",
      observed: "2026-12-01",
      observed_at: Date.UTC(2026, 10, 29, 11, 0, 0),
      expired: false,
      contract_expires: "2027-03-31",
      checks: ["task-set"],
      fallback: "start recipe chat-selfhosted",
    },
  ],
};

const entry = (kind: string, at: number): HistoryEntry => ({
  release_id: "r2",
  at,
  kind,
  step_run_id: null,
  outcome: "accepted",
  message: "[drift] model chat-model: mutable dependency chat-api …",
  data: (kind === DEPENDENCY_DRIFT_KIND ? drift : {}) as unknown as HistoryEntry["data"],
});

function records(...extra: HistoryEntry[]): ReleaseRecord[] {
  const all = defaultRecords();
  all[0]?.history.push(...extra);
  return all;
}

/** A record as `GET /v1/releases/:id` answers it (what `baton status` reads). */
const asJson = (r: ReleaseRecord | undefined) =>
  ({ ...r?.release, history: r?.history, attempt_results: r?.attempt_results }) as never;

async function page(rs: ReleaseRecord[]): Promise<string> {
  return visibleText(await releasePageHtml(rs, "r2", NOW));
}

describe("a mutable dependency's drift is shown", () => {
  it("on the release page: declared vs observed, the checks that requalify, the fallback", async () => {
    const t = await page(records(entry(DEPENDENCY_DRIFT_KIND, drift.observed_at)));
    expect(t).toContain("Drift: model chat-model&#39;s mutable dependencies need requalification");
    expect(t).toContain(
      "chat-api (hosted_model) ml-platform 2026-11-01 2026-12-01 through 2027-03-31 task-set start recipe chat-selfhosted",
    );
  });

  it("by baton status, until it is cleared", () => {
    const [withDrift] = records(entry(DEPENDENCY_DRIFT_KIND, drift.observed_at));
    const lines = releaseSummary(asJson(withDrift), NOW);
    expect(lines.find((l) => l.startsWith("  DEPENDENCY DRIFT since "))).toMatch(
      /mutable dependency chat-api \(hosted_model, owner ml-platform\): provider revision changed: the recipe declares "2026-11-01", its probe observed "2026-12-01"/,
    );
    const [cleared] = records(
      entry(DEPENDENCY_DRIFT_KIND, drift.observed_at),
      entry(DEPENDENCY_CLEARED_KIND, drift.observed_at + 60_000),
    );
    expect(releaseSummary(asJson(cleared), NOW).some((l) => l.includes("DEPENDENCY DRIFT"))).toBe(
      false,
    );
  });

  it("on no page once it is cleared", async () => {
    const t = await page(
      records(
        entry(DEPENDENCY_DRIFT_KIND, drift.observed_at),
        entry(DEPENDENCY_CLEARED_KIND, drift.observed_at + 60_000),
      ),
    );
    expect(t).not.toContain("mutable dependencies need requalification");
  });
});
