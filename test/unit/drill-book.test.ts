/**
 * The drill book keeps each model's last DRILLS_KEPT drills, and never lets failed drills push
 * out the newest passed one, which the drill policy and the schedule read (docs/recovery-actions.md
 * "Drill records and the drill policy").
 */
import { describe, expect, it } from "vitest";
import {
  DRILLS_KEPT,
  type DrillBook,
  type DrillRecord,
  drillsOf,
  withDrill,
} from "../../engine/src/domain/drills.ts";

const MODEL = "summarizer-v7";

function drill(id: string, at: number, passed: boolean, model = MODEL): DrillRecord {
  return {
    drill: id,
    model,
    passed,
    rto_ms: passed ? 40 : null,
    rpo_ms: passed ? 0 : null,
    rows_lost: passed ? 0 : null,
    restored: passed,
    verified: passed,
    problems: passed ? [] : ["a check failed"],
    by: "operator:dana",
    at,
  } as DrillRecord;
}

describe("the drill book", () => {
  it("keeps the last DRILLS_KEPT drills of a model, the oldest recorded going first", () => {
    let book: DrillBook = { drills: [drill("other", 0, false, "other-model")] };
    for (let i = 0; i < DRILLS_KEPT + 5; i++)
      book = withDrill(book, drill(`f${i}`, 1000 + i, false));
    const mine = drillsOf(book, MODEL);
    expect(mine).toHaveLength(DRILLS_KEPT);
    expect(mine.at(-1)?.drill).toBe("f5");
    expect(drillsOf(book, "other-model")).toHaveLength(1);
  });

  it("failed drills never push out the newest passed drill", () => {
    let book: DrillBook = { drills: [] };
    book = withDrill(book, drill("old-pass", 500, true));
    book = withDrill(book, drill("pass", 1000, true));
    for (let i = 0; i < DRILLS_KEPT * 2; i++)
      book = withDrill(book, drill(`f${i}`, 2000 + i, false));
    const mine = drillsOf(book, MODEL);
    expect(mine).toHaveLength(DRILLS_KEPT);
    expect(mine.filter((d) => d.passed).map((d) => d.drill)).toEqual(["pass"]);
    // A newer passed drill takes over: the older one may go like any other.
    book = withDrill(book, drill("new-pass", 9000, true));
    for (let i = 0; i < DRILLS_KEPT; i++) book = withDrill(book, drill(`g${i}`, 9500 + i, false));
    expect(
      drillsOf(book, MODEL)
        .filter((d) => d.passed)
        .map((d) => d.drill),
    ).toEqual(["new-pass"]);
  });
});
