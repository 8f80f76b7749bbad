/**
 * The Prometheus templates' variables: the control arm is the observed baseline's lanes
 * serving any image but the candidate's, values are escaped for PromQL strings and lane ids
 * for regexes, and without an observed baseline the control is the recipe's previous_image.
 */
import { describe, expect, it } from "vitest";
import {
  armVars,
  DEFAULT_BUCKETS,
  fillTemplate,
  UNITS_TEMPLATE,
} from "../../../engine/src/adapters/prometheus/templates.ts";

const q = {
  model: "summarizer",
  releaseId: "rel_1",
  candidateImage: "img:new",
  controlImage: "img:old",
  lanes: ["lane-a", "lane-b", "lane-c"],
  controlLanes: ["lane-b", "lane.c"],
};

describe("prometheus template variables", () => {
  it("selects the candidate by its image and the control by the baseline lanes", () => {
    expect(fillTemplate(UNITS_TEMPLATE, armVars("candidate", q, "30s"))).toBe(
      'sum(increase(baton_arm_units_total{model="summarizer",image="img:new"}[30s]))',
    );
    expect(fillTemplate(UNITS_TEMPLATE, armVars("control", q, "30s"))).toBe(
      'sum(increase(baton_arm_units_total{model="summarizer",lane=~"lane-b|lane\\\\.c",image!="img:new"}[30s]))',
    );
    expect(fillTemplate(DEFAULT_BUCKETS, armVars("control", q, "5s"))).toContain(
      'lane=~"lane-b|lane\\\\.c",image!="img:new"}[5s]',
    );
  });

  it("without an observed baseline, the control is previous_image", () => {
    const { controlLanes: _, ...none } = q;
    expect(fillTemplate(UNITS_TEMPLATE, armVars("control", none, "30s"))).toContain(
      '{model="summarizer",image="img:old"}',
    );
    expect(armVars("control", none, "30s").baseline_lanes).toBe("lane-a|lane-b|lane-c");
  });

  it("regex-escapes each lane id in $lane, so lane.a matches only itself", () => {
    const v = armVars("candidate", { ...q, lanes: ["lane.a", "b+c"] }, "9s");
    expect(v.lane).toBe("lane\\.a|b\\+c");
    const filled = fillTemplate('x{lane=~"$lane"}', v);
    // As Prometheus reads the string: `lane\.a|b\+c`, anchored.
    expect(filled).toBe('x{lane=~"lane\\\\.a|b\\\\+c"}');
    const re = new RegExp(`^(?:${v.lane})$`);
    expect(re.test("lane.a")).toBe(true);
    expect(re.test("laneXa")).toBe(false);
    expect(re.test("b+c")).toBe(true);
    expect(re.test("bbc")).toBe(false);
  });

  it("fills every variable, escaping quotes, and keeps $arm apart from $arm_selector", () => {
    const v = armVars("control", { ...q, candidateImage: 'x"y' }, "9s");
    expect(
      fillTemplate(
        "$model $release $arm $image $candidate_image $lane $baseline_lanes $window {$arm_selector}",
        v,
      ),
    ).toBe(
      'summarizer rel_1 control img:old x\\"y lane-a|lane-b|lane-c lane-b|lane\\\\.c 9s {lane=~"lane-b|lane\\\\.c",image!="x\\"y"}',
    );
  });
});
