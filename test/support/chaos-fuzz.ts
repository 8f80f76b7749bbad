/**
 * Hostile and malformed input, as fast-check properties over the engine's real HTTP
 * app on a real SQLite store (test/integration/service-harness.ts): recipes (JSON and YAML),
 * preflight and callback bodies and headers, `checks` (huge, deeply nested, not JSON), logs
 * (10 MB, binary, invalid UTF-8), dispatch payloads as the action validates them, and forged,
 * replayed and expired credentials. Used by test/reliability/fuzz.test.ts and by
 * `npm run test:chaos` (which reports the number of cases).
 *
 * Every case must get a clear 4xx (a JSON error body with a code and a message) or a clean
 * accepted result, never a 5xx or a thrown error; afterwards the store must hold no half-written
 * record: every release reads back whole, and no attempt result exists without its callback.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { stringify as toYaml } from "yaml";
import { PayloadError, readDispatch } from "../../actions/release-step/src/event.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  type Harness,
  makeHarness,
  OPERATOR,
  preflightBody,
  preflightUrl,
  recipe,
  SECRET,
  signedPost,
} from "../integration/service-harness.ts";

export interface FuzzReport {
  cases: number;
  problems: string[];
  /** Answers with a 5xx status. */
  serverErrors: number;
  /** Releases or attempt results that did not read back whole after the run. */
  halfWritten: number;
}

/** Hostile string values for every string field. */
export const HOSTILE_STRINGS: readonly string[] = [
  "a\u0000b",
  "lone \ud800 high",
  "lone \udc00 low",
  "\u001b[31mred\u001b[0m\u001b]0;title\u0007",
  "x".repeat(1024 * 1024),
];

const ALLOWED = new Set([200, 201, 400, 401, 404, 409, 413, 415, 422]);

let serverErrors = 0;

async function expectClean(res: Response, what: string, problems: string[]): Promise<number> {
  const text = await res.text();
  if (res.status >= 500) serverErrors++;
  if (!ALLOWED.has(res.status)) {
    problems.push(`${what}: HTTP ${res.status} ${text.slice(0, 300)}`);
    return res.status;
  }
  if (res.status >= 400) {
    try {
      const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      if (typeof body.error?.code !== "string" || typeof body.error?.message !== "string")
        problems.push(
          `${what}: HTTP ${res.status} without {error: {code, message}}: ${text.slice(0, 200)}`,
        );
    } catch {
      problems.push(
        `${what}: HTTP ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
      );
    }
  }
  return res.status;
}

/** A release whose first runner step run is dispatched, and that step run's payload. */
async function runnerStepReady(h: Harness): Promise<DispatchPayload> {
  const before = h.dispatcher.accepted.length;
  await createRelease(h, recipe(2));
  for (let i = 0; i < 20 && h.dispatcher.accepted.length === before; i++) {
    await h.engine.tick();
  }
  const p = h.dispatcher.accepted.at(-1);
  if (!p || h.dispatcher.accepted.length === before) throw new Error("[chaos] no dispatch came");
  return p;
}

let runSeq = 5000;

/** Runs every fuzz property with `numRuns` cases each (plus fixed hostile cases). */
export async function fuzzEngine(
  numRuns: number,
  kind: "sqlite" | "postgres" = "sqlite",
): Promise<FuzzReport> {
  const problems: string[] = [];
  let cases = 0;
  let halfWritten = 0;
  serverErrors = 0;
  // The fuzz cases need a fresh dispatched runner step each, so they stack releases of one
  // recipe on the same lanes; the one-release-per-lane rule has its own tests
  // (test/integration/lane-claims.test.ts).
  process.env.BATON_EXCLUSIVE_LANES = "off";
  const h = await makeHarness({ kind, seed: recipe(2) });
  const dir = mkdtempSync(join(tmpdir(), "baton-fuzz-"));
  try {
    const op = (method: string, url: string, body: string | Uint8Array, type: string) =>
      Promise.resolve(
        h.engine.app.request(url, {
          method,
          headers: { authorization: `Bearer ${OPERATOR}`, "content-type": type },
          body: body as BodyInit,
        }),
      );
    let created = 0;
    let hostileReleases = 0;

    // 1. Recipes: any JSON value, a valid recipe with one field replaced, any YAML text.
    const valid = recipe(2) as unknown as Record<string, unknown>;
    const mutated = fc
      .tuple(fc.constantFrom(...Object.keys(valid)), fc.jsonValue())
      .map(([k, v]) => ({ ...valid, [k]: v }));
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.jsonValue(), mutated), fc.boolean(), async (value, asYaml) => {
        cases++;
        const text = asYaml ? toYaml(value) : JSON.stringify(value);
        const res = await op(
          "POST",
          "/v1/releases?start=false",
          text ?? "null",
          asYaml ? "application/yaml" : "application/json",
        );
        if ((await expectClean(res, "recipe", problems)) === 201) created++;
        return true;
      }),
      { numRuns },
    );
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 400 }), async (text) => {
        cases++;
        await expectClean(
          await op("POST", "/v1/releases", text, "application/yaml"),
          "yaml",
          problems,
        );
        return true;
      }),
      { numRuns },
    );

    // 2. Preflight and callback bodies, correctly signed: any JSON, or a valid body with one
    //    field replaced by any JSON value. And raw bytes (binary, invalid UTF-8).
    const p = await runnerStepReady(h);
    const run = { run_id: String(++runSeq), run_attempt: 1 };
    const goodPre = JSON.parse(preflightBody(p, run)) as Record<string, unknown>;
    const goodCb = JSON.parse(callbackBody(p.step_run_id, run)) as Record<string, unknown>;
    const field = (good: Record<string, unknown>) =>
      fc
        .tuple(fc.constantFrom(...Object.keys(good)), fc.jsonValue())
        .map(([k, v]) => JSON.stringify({ ...good, [k]: v }));
    const resultsBefore = (await h.store.listAttemptResults(p.release.id)).length;
    for (const [name, url, good] of [
      ["preflight", preflightUrl(p.step_run_id), goodPre],
      ["callback", callbackUrl(p.step_run_id), goodCb],
    ] as const) {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.jsonValue().map((v) => JSON.stringify(v) ?? "null"),
            field(good),
            fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("latin1")),
          ),
          async (body) => {
            cases++;
            const status = await expectClean(await signedPost(h, url, body), name, problems);
            // A preflight of the real run may be accepted (200); nothing else may be.
            if (status === 200 && name === "callback" && body !== JSON.stringify(good))
              problems.push(`a mangled callback was accepted: ${body.slice(0, 200)}`);
            return true;
          },
        ),
        { numRuns },
      );
      // Raw bytes that are not UTF-8, signed over exactly those bytes.
      for (const bytes of [Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28]), Buffer.alloc(2048, 0x80)]) {
        cases++;
        await expectClean(
          await signedPost(h, url, new Uint8Array(bytes)),
          `${name} binary`,
          problems,
        );
      }
    }

    // 3. Headers: forged (wrong secret), replayed (another body's signature), expired,
    //    malformed, missing. All 401 with one identical body; nothing recorded as a result.
    const body = preflightBody(p, { run_id: String(++runSeq), run_attempt: 1 });
    const other = preflightBody(p, { run_id: String(++runSeq), run_attempt: 1 });
    const now = h.clock.now();
    const headerSets: Record<string, string>[] = [
      signBody("forged-secret-0123456789abcdef", body, now),
      signBody(SECRET, other, now),
      signBody(SECRET, body, now - 3_600_000),
      signBody(SECRET, body, now + 3_600_000),
      { "x-baton-signature": "sha256=zz", "x-baton-timestamp": String(Math.floor(now / 1000)) },
      { "x-baton-timestamp": "-1", "x-baton-signature": `sha256=${"0".repeat(64)}` },
      {},
    ];
    const arbHeaders = fc.record({
      "x-baton-signature": fc.oneof(
        fc.string(),
        fc
          .uint8Array({ minLength: 32, maxLength: 32 })
          .map((b) => `sha256=${Buffer.from(b).toString("hex")}`),
      ),
      "x-baton-timestamp": fc.oneof(fc.string(), fc.nat().map(String)),
    });
    const extra = fc.sample(arbHeaders, numRuns);
    const bodies = new Set<string>();
    for (const [i, headers] of [...headerSets, ...extra].entries()) {
      for (const url of [preflightUrl(p.step_run_id), callbackUrl(p.step_run_id)]) {
        cases++;
        const res = await Promise.resolve(
          h.engine.app.request(url, {
            method: "POST",
            headers: { "content-type": "application/json", ...headers },
            body: url.endsWith("preflight") ? body : callbackBody(p.step_run_id, run),
          }),
        );
        const text = await res.text();
        if (res.status !== 401)
          problems.push(`credential case ${i} on ${url}: HTTP ${res.status} ${text.slice(0, 200)}`);
        bodies.add(text);
      }
    }
    if (bodies.size !== 1)
      problems.push(
        `401 bodies differ between credential failures: ${[...bodies].join(" | ").slice(0, 400)}`,
      );
    const resultsAfter = (await h.store.listAttemptResults(p.release.id)).length;
    if (resultsAfter !== resultsBefore)
      problems.push(
        `attempt results changed from ${resultsBefore} to ${resultsAfter} under hostile callbacks`,
      );

    // 4. Hostile results on a running attempt: huge, deep and non-JSON checks; 10 MB, binary,
    //    invalid UTF-8 logs. Each gets 200 (stored verbatim / log capped) or a clean 4xx.
    const deep = `${"[".repeat(5_000)}${"]".repeat(5_000)}`;
    const hostile: [
      string,
      (sr: string, r: { run_id: string; run_attempt: number }) => string | Uint8Array,
    ][] = [
      [
        "checks huge",
        (sr, r) =>
          callbackBody(sr, r, "pass", {
            checks: Array.from({ length: 20_000 }, (_, i) => ({ name: `c${i}`, status: "passed" })),
          }),
      ],
      [
        "checks deep",
        (sr, r) =>
          callbackBody(sr, r, "pass").replace(/"checks":\[.*?\],"log"/, `"checks":${deep},"log"`),
      ],
      ["checks not JSON", (sr, r) => callbackBody(sr, r, "pass", { checks: "{not json" })],
      ["log 10 MB", (sr, r) => callbackBody(sr, r, "pass", { log: "x".repeat(10 * 1024 * 1024) })],
      [
        "log binary",
        (sr, r) => callbackBody(sr, r, "pass", { log: "\u0000\u0001\u00ff\ufffd".repeat(1000) }),
      ],
      [
        "log invalid UTF-8",
        (sr, r) => {
          const s = callbackBody(sr, r, "pass", { log: "@@LOG@@" });
          const [a, b] = s.split("@@LOG@@") as [string, string];
          return new Uint8Array(
            Buffer.concat([
              Buffer.from(a),
              Buffer.from([0xc3, 0x28, 0xff, 0xa0, 0xa1]),
              Buffer.from(b),
            ]),
          );
        },
      ],
    ];
    for (const [name, make] of hostile) {
      cases++;
      const q = await runnerStepReady(h);
      const r = { run_id: String(++runSeq), run_attempt: 1 };
      const pre = await signedPost(h, preflightUrl(q.step_run_id), preflightBody(q, r));
      if (pre.status !== 200) {
        problems.push(`${name}: preflight HTTP ${pre.status} ${await pre.text()}`);
        continue;
      }
      const status = await expectClean(
        await signedPost(h, callbackUrl(q.step_run_id), make(q.step_run_id, r)),
        name,
        problems,
      );
      const stored = await h.store.getAttemptResult(q.step_run_id, 1);
      if (status === 200 && !stored) problems.push(`${name}: accepted but no result stored`);
      if (status !== 200 && stored)
        problems.push(`${name}: refused (HTTP ${status}) but a result was stored`);
      if (status !== 200) {
        // Refused whole: the runner's next, sane callback still lands.
        const again = await signedPost(
          h,
          callbackUrl(q.step_run_id),
          callbackBody(q.step_run_id, r, "fail"),
        );
        if (again.status !== 200)
          problems.push(`${name}: the sane callback after it got HTTP ${again.status}`);
      }
    }

    // 4b. Every string field of a recipe (top level and lane fields) and of a callback with NUL,
    //     lone surrogates, ANSI and a 1 MiB value, and (below) invalid UTF-8 bytes, a 5,000-deep
    //     value and the key given twice. A clean answer each; an accepted callback must be
    //     stored, a refused one must store nothing (counted as half-written otherwise).
    const laneKeys = Object.keys((valid.lanes as Record<string, unknown>[])[0] ?? {});
    for (const bad of HOSTILE_STRINGS) {
      for (const key of Object.keys(valid)) {
        cases++;
        const res = await op(
          "POST",
          "/v1/releases?start=false",
          JSON.stringify({ ...valid, [key]: bad }),
          "application/json",
        );
        if ((await expectClean(res, `recipe ${key} hostile`, problems)) === 201) created++;
      }
      for (const key of laneKeys) {
        cases++;
        const lanes = (valid.lanes as Record<string, unknown>[]).map((l, i) =>
          i === 0 ? { ...l, [key]: bad } : l,
        );
        const res = await op(
          "POST",
          "/v1/releases?start=false",
          JSON.stringify({ ...valid, lanes }),
          "application/json",
        );
        if ((await expectClean(res, `recipe lanes.0.${key} hostile`, problems)) === 201) created++;
      }
    }
    // Per field, besides the strings above: invalid UTF-8 bytes inside the value, a deeply
    // nested value (5,000 levels) and the key given twice (duplicate keys are refused).
    const MARK = "@@HOSTILE@@";
    const invalidUtf8 = (text: string) => {
      const [a, b] = text.split(`"${MARK}"`) as [string, string];
      return new Uint8Array(
        Buffer.concat([
          Buffer.from(`${a}"x`),
          Buffer.from([0xc3, 0x28, 0xff, 0xa0]),
          Buffer.from(`"${b}`),
        ]),
      );
    };
    const DEEP = `${"[".repeat(5_000)}${"]".repeat(5_000)}`;
    const recipeBodies = (key: string, lane: boolean): [string, string | Uint8Array][] => {
      const withValue = (v: unknown) =>
        lane
          ? JSON.stringify({
              ...valid,
              lanes: (valid.lanes as Record<string, unknown>[]).map((l, i) =>
                i === 0 ? { ...l, [key]: v } : l,
              ),
            })
          : JSON.stringify({ ...valid, [key]: v });
      const marked = withValue(MARK);
      return [
        ["invalid UTF-8", invalidUtf8(marked)],
        ["deep", marked.replace(`"${MARK}"`, DEEP)],
        [
          "duplicate key",
          marked.replace(`"${key}":"${MARK}"`, `"${key}":"first","${key}":"second"`),
        ],
      ];
    };
    for (const [keys, lane] of [
      [Object.keys(valid), false],
      [laneKeys, true],
    ] as const) {
      for (const key of keys) {
        for (const [kind, body] of recipeBodies(key, lane)) {
          cases++;
          const res = await op("POST", "/v1/releases?start=false", body, "application/json");
          const status = await expectClean(
            res,
            `recipe ${lane ? "lanes.0." : ""}${key} ${kind}`,
            problems,
          );
          if (status === 201) created++;
        }
      }
    }
    const CALLBACK_FIELDS = [
      "step_run_id",
      "run_id",
      "status",
      "overall",
      "log",
      "checks",
    ] as const;
    for (const field of CALLBACK_FIELDS) {
      for (const kind of ["invalid UTF-8", "deep", "duplicate key"] as const) {
        cases++;
        const q = await runnerStepReady(h);
        hostileReleases++;
        const r = { run_id: String(++runSeq), run_attempt: 1 };
        const pre = await signedPost(h, preflightUrl(q.step_run_id), preflightBody(q, r));
        if (pre.status !== 200) {
          problems.push(`callback ${field} ${kind}: preflight HTTP ${pre.status}`);
          continue;
        }
        const good = JSON.parse(callbackBody(q.step_run_id, r, "pass")) as Record<string, unknown>;
        const marked = JSON.stringify({ ...good, [field]: MARK });
        const body =
          kind === "invalid UTF-8"
            ? invalidUtf8(marked)
            : kind === "deep"
              ? marked.replace(`"${MARK}"`, DEEP)
              : marked.replace(
                  `"${field}":"${MARK}"`,
                  `"${field}":"first","${field}":${JSON.stringify(good[field])}`,
                );
        const status = await expectClean(
          await signedPost(h, callbackUrl(q.step_run_id), body),
          `callback ${field} ${kind}`,
          problems,
        );
        const stored = await h.store.getAttemptResult(q.step_run_id, 1);
        if (status === 200 && !stored) {
          halfWritten++;
          problems.push(`callback ${field} ${kind}: accepted but no result stored`);
        }
        if (status !== 200 && stored) {
          halfWritten++;
          problems.push(
            `callback ${field} ${kind}: refused (HTTP ${status}) but a result was stored`,
          );
        }
      }
    }
    for (const bad of HOSTILE_STRINGS) {
      for (const field of CALLBACK_FIELDS) {
        cases++;
        const q = await runnerStepReady(h);
        hostileReleases++;
        const r = { run_id: String(++runSeq), run_attempt: 1 };
        const pre = await signedPost(h, preflightUrl(q.step_run_id), preflightBody(q, r));
        if (pre.status !== 200) {
          problems.push(`hostile ${field}: preflight HTTP ${pre.status}`);
          continue;
        }
        const over =
          field === "checks"
            ? { checks: [{ name: bad, status: "passed", [bad.slice(0, 64)]: bad }] }
            : { [field]: bad };
        const status = await expectClean(
          await signedPost(
            h,
            callbackUrl(q.step_run_id),
            callbackBody(q.step_run_id, r, "pass", over),
          ),
          `callback ${field} hostile`,
          problems,
        );
        const stored = await h.store.getAttemptResult(q.step_run_id, 1);
        if (status === 200 && !stored) {
          halfWritten++;
          problems.push(`callback ${field} hostile: accepted but no result stored`);
        }
      }
    }

    // 5. Dispatch payloads as the action receives them: its own validation (phase 2) must
    //    refuse with a PayloadError naming the field, never throw anything else.
    const engineUrl = "http://127.0.0.1:8787";
    const goodPayload = h.dispatcher.accepted[0] as unknown as Record<string, unknown>;
    await fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc
            .tuple(fc.constantFrom(...Object.keys(goodPayload)), fc.jsonValue())
            .map(([k, v]) => ({ ...goodPayload, [k]: v })),
        ),
        fc.constantFrom("release-step", "other", ""),
        (payload, action) => {
          cases++;
          const file = join(dir, "event.json");
          writeFileSync(file, JSON.stringify({ action, client_payload: payload }) ?? "null");
          try {
            readDispatch(
              { GITHUB_EVENT_NAME: "repository_dispatch", GITHUB_EVENT_PATH: file },
              engineUrl,
              engineUrl,
            );
          } catch (e) {
            if (!(e instanceof PayloadError)) problems.push(`action validation threw ${String(e)}`);
            else if (!e.message.startsWith("[action]"))
              problems.push(`unclear action error: ${e.message}`);
          }
          return true;
        },
      ),
      { numRuns },
    );

    // The store after all of it: every release reads back whole; attempt results only for
    // attempts that called back; as many releases as 201 answers (+ the set-up ones).
    const list = await h.store.listReleases({ limit: 10_000 });
    const expectedCount = created + 1 + hostile.length + hostileReleases;
    if (list.length !== expectedCount)
      problems.push(`${list.length} releases in the store, expected ${expectedCount}`);
    for (const s of list) {
      const r = await h.store.getRelease(s.id);
      if (!r || r.manifest.steps.length !== s.step_count) {
        halfWritten++;
        problems.push(`release ${s.id} does not read back whole`);
        continue;
      }
      const called = new Set(
        r.step_runs.flatMap((sr) =>
          sr.attempts.filter((a) => a.callback_at !== null).map((a) => `${sr.id}#${a.n}`),
        ),
      );
      for (const ar of await h.store.listAttemptResults(s.id)) {
        if (!called.has(`${ar.step_run_id}#${ar.attempt}`)) halfWritten++;
        if (!called.has(`${ar.step_run_id}#${ar.attempt}`))
          problems.push(
            `attempt result ${ar.step_run_id}#${ar.attempt} has no callback in the release`,
          );
      }
    }
  } finally {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { cases, problems, serverErrors, halfWritten };
}
