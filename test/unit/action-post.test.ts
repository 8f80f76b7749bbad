/**
 * The action's post step (actions/release-step/src/post-main.ts) says why it sends nothing:
 * the main step reported already, no preflight was accepted, or it got no state at all.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { runPost } from "../../actions/release-step/src/post-main.ts";

const KEYS = ["STATE_main_started", "STATE_callback", "STATE_callback_acked", "STATE_key_dir"];

async function postSays(state: Record<string, string>): Promise<string> {
  for (const k of KEYS) delete process.env[k];
  for (const [k, v] of Object.entries(state)) process.env[`STATE_${k}`] = v;
  let out = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    out += String(chunk);
    return true;
  });
  try {
    await runPost();
  } finally {
    spy.mockRestore();
  }
  return out;
}

afterEach(() => {
  for (const k of KEYS) delete process.env[k];
});

describe("post step with nothing to send", () => {
  it("after an acknowledged callback: the main step reported already", async () => {
    const out = await postSays({
      main_started: "true",
      callback: JSON.stringify({ step_run_id: "sr_1_1_f" }),
      callback_acked: "true",
    });
    expect(out).toContain("the main step reported already");
    expect(out).not.toContain("no accepted preflight");
  });

  it("no preflight accepted in the main step", async () => {
    const out = await postSays({ main_started: "true" });
    expect(out).toContain("the main step had no preflight accepted: nothing to report");
  });

  it("no state at all: says so instead of claiming no preflight was accepted", async () => {
    const out = await postSays({});
    expect(out).toContain("the post step got no state from the main step");
    expect(out).not.toContain("no accepted preflight");
  });
});
