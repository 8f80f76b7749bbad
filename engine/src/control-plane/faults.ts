/**
 * Fault injection for tests, OFF unless enabled (server option `faults: true`, or env
 * `BATON_CP_FAULTS=1` for `main.ts`). Arms the next K matching writes (or reads) to:
 * - `error`: answer 500 without applying;
 * - `hang`: apply nothing and answer only after `hang_ms` (past the client's timeout);
 * - `apply_then_hang`: apply, then answer only after `hang_ms` (the "applied but unknown" case);
 * - `lie`: answer 200 as if applied, but apply nothing and record nothing (a control plane or a
 *   proxy that acknowledges a write it drops; only a read-back catches it).
 * The test double turns `hang` / `apply_then_hang` into an immediate `unknown` outcome.
 */
import * as z from "zod";

export const FaultMode = z.enum(["error", "hang", "apply_then_hang", "lie"], {
  message: "mode must be one of: error, hang, apply_then_hang, lie",
});
export type FaultMode = z.infer<typeof FaultMode>;

/** One armed fault rule, as `POST /v1/admin/faults` accepts it. */
export const FaultRule = z.strictObject({
  mode: FaultMode,
  /** How many matching requests it applies to (then it is spent). */
  count: z.number().int().min(1).max(1000).default(1),
  /** Only requests whose operation key (writes) or path (reads) contains this text. */
  match: z.string().min(1).optional(),
  /** Writes (default) or reads. */
  on: z.enum(["write", "read"]).default("write"),
  /** How long a hang lasts, ms (bounded so nothing waits forever). */
  hang_ms: z.number().int().min(1).max(120_000).default(30_000),
});
export type FaultRule = z.output<typeof FaultRule>;
export type FaultRuleInput = z.input<typeof FaultRule>;

/** The armed rules; `take` consumes one use of the first rule that matches. */
export class FaultPlan {
  private rules: FaultRule[] = [];

  /** Adds a rule (validated; throws a zod error on bad input). */
  arm(rule: FaultRuleInput): FaultRule {
    const parsed = FaultRule.parse(rule);
    this.rules.push(parsed);
    return parsed;
  }

  /** The fault for this request, if any (consumes one use). `subject`: operation key or path. */
  take(on: "write" | "read", subject: string): FaultRule | undefined {
    const rule = this.rules.find(
      (r) => r.on === on && r.count > 0 && (r.match === undefined || subject.includes(r.match)),
    );
    if (!rule) return undefined;
    rule.count -= 1;
    this.rules = this.rules.filter((r) => r.count > 0);
    return { ...rule };
  }

  /** Rules still armed. */
  armed(): FaultRule[] {
    return this.rules.map((r) => ({ ...r }));
  }

  clear(): void {
    this.rules = [];
  }
}
