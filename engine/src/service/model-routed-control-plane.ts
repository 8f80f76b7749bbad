/**
 * The ControlPlane port addresses traffic by model, but its ops carry none: the model is the
 * release's (`manifest.model`). This wrapper picks, per write, the adapter for the model of the
 * release named in the write context, so releases of different models share one engine.
 */
import type { ControlPlaneOp } from "../domain/types.ts";
import type {
  ApplyResult,
  ControlPlane,
  ObserveResult,
  WriteContext,
} from "../ports/control-plane.ts";

export class ModelRoutedControlPlane implements ControlPlane {
  private readonly byModel = new Map<string, ControlPlane>();

  /**
   * @param forModel builds the adapter of one model (called once per model).
   * @param modelOf the model of a release id, or null when the release is unknown.
   */
  constructor(
    private readonly forModel: (model: string) => ControlPlane,
    private readonly modelOf: (releaseId: string) => Promise<string | null>,
  ) {}

  private async target(ctx: WriteContext): Promise<ControlPlane | string> {
    const model = await this.modelOf(ctx.release_id).catch(() => null);
    if (!model) return `[engine] release ${ctx.release_id} is unknown; cannot address its model`;
    let cp = this.byModel.get(model);
    if (!cp) {
      cp = this.forModel(model);
      this.byModel.set(model, cp);
    }
    return cp;
  }

  async apply(op: ControlPlaneOp, ctx: WriteContext): Promise<ApplyResult> {
    const t = await this.target(ctx);
    return typeof t === "string" ? { outcome: "unknown", message: t } : t.apply(op, ctx);
  }

  async observe(op: ControlPlaneOp, ctx: WriteContext): Promise<ObserveResult> {
    const t = await this.target(ctx);
    return typeof t === "string" ? { ok: false, message: t } : t.observe(op, ctx);
  }
}
