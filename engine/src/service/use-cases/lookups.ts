/**
 * What the lifecycle verbs depend on in the store (docs/lifecycle.md): the earlier admitted
 * manifest a rollback would run again, a later release that has replaced one on its lanes, and
 * refusal texts that name what a release accepts with those lookups. Reads only.
 */

import { oldEnvironment } from "../../domain/blue-green.ts";
import {
  acceptedActionsPhrase,
  LIFECYCLE_STATES,
  type LifecycleLookups,
} from "../../domain/lifecycle.ts";
import {
  closedReleaseAccepts,
  lifecycleBlocked,
  supersededWords,
} from "../../domain/lifecycle-states.ts";
import { rollbackWindowClosed } from "../../domain/rollback-window.ts";
import { definesLanes } from "../../domain/source-order.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { RecipelessPredecessor } from "../../domain/switch-back-words.ts";
import type { Json, Release } from "../../domain/types.ts";
import { suggestedCommand } from "../../domain/verbs.ts";
import type { ReleaseSummary, Store } from "../../ports/store.ts";
import type { Refusal } from "../api.ts";

/** How many of the latest succeeded releases a rollback looks through for the previous manifest. */
export const ROLLBACK_SCAN = 200;

/** The `image` a kept recipe names, or null. */
function recipeImage(recipe: Json): string | null {
  const image = (recipe as { image?: unknown } | null)?.image;
  return typeof image === "string" ? image : null;
}

/** How many newer releases (any model) the supersede check reads before it gives up (none found). */
export const SUPERSEDE_SCAN = 2000;

/** The release a rollback runs again, with the recipe and bundles it was admitted with. */
export interface PreviousAdmitted {
  prev: { id: string };
  data: { recipe: Json; bundle?: Json; attestations?: Json };
}

export class LifecycleReads {
  /** `now`: the engine's clock (epoch ms), for the rollback window. */
  constructor(
    private readonly store: Store,
    private readonly now: () => number,
  ) {}

  /**
   * What `lifecycleActions` needs from the store for `release` (docs/lifecycle.md): for a
   * succeeded release the release a rollback would run again (`rollbackTo`, null when none),
   * and for a finished one the later release of its model that has replaced it on the lanes
   * (`supersededBy`, null when none). `{}` for a release in flight.
   */
  async lifecycleLookups(release: Release): Promise<LifecycleLookups> {
    if (!TERMINAL_RELEASE_STATES.has(release.state)) return {};
    const later = await this.supersededBy(release);
    const supersededBy = later?.id ?? null;
    const supersededState = later?.state ?? null;
    if (!LIFECYCLE_STATES.rollback.has(release.state)) return { supersededBy, supersededState };
    // A blue-green release's old environment, until a later release defines its lanes.
    const env = supersededBy ? null : oldEnvironment(release, this.now());
    const old = env ? { oldEnvironment: env } : {};
    const closed = rollbackWindowClosed(release, this.now());
    if (closed) return { rollbackClosed: closed, supersededBy, supersededState, ...old };
    // Its rollback is a switch back to that environment: no earlier manifest is needed.
    if (release.manifest.strategy === "blue_green")
      return { supersededBy, supersededState, ...old };
    const target = await this.rollbackTarget(release);
    return {
      rollbackTo: target.found?.prev.id ?? null,
      ...(target.gap ? { rollbackGap: target.gap } : {}),
      supersededBy,
      supersededState,
    };
  }

  /** The release `id`, or null when there is none. */
  release(id: string): Promise<Release | null> {
    return this.store.getRelease(id);
  }

  /**
   * The latest later release of `release`'s model that now defines its lanes, or null: one in
   * flight, succeeded, abandoned (an operator confirmed what the lanes run), or aborted with
   * effects left in place (a roll_forward_only release closed past its unsafe point). A later
   * release that rolled back, or was aborted before anything took effect, put the lanes back
   * and does not count. Reads newest first, at most `SUPERSEDE_SCAN` releases of any model.
   */
  async supersededBy(release: Release): Promise<ReleaseSummary | null> {
    const model = release.manifest.model;
    const number = Number(release.id.slice(1));
    let before: number | undefined;
    for (let read = 0; read < SUPERSEDE_SCAN; ) {
      const page = await this.store.listReleases({
        limit: 200,
        ...(before !== undefined ? { before } : {}),
      });
      for (const r of page) {
        if (Number(r.id.slice(1)) <= number) return null;
        if (r.model !== model) continue;
        if (definesLanes(r)) return r;
      }
      read += page.length;
      const last = page[page.length - 1];
      if (page.length < 200 || !last) return null;
      before = last.created_at;
    }
    return null;
  }

  /**
   * The recipe, bundle and attestations `release` itself was admitted with (its `created`
   * history entry), or null when it did not keep them.
   */
  async ownAdmitted(release: Release): Promise<PreviousAdmitted["data"] | null> {
    const created = (await this.store.getHistory(release.id, { limit: 8 })).find(
      (h) => h.kind === "created",
    );
    const data = created?.data as { recipe?: Json; bundle?: Json; attestations?: Json } | null;
    return data && data.recipe !== undefined ? (data as PreviousAdmitted["data"]) : null;
  }

  /**
   * The release a rollback of `release` would run again: the latest earlier succeeded release
   * of its model (among the latest `ROLLBACK_SCAN` succeeded ones) that kept its recipe in its
   * `created` history entry, with that entry's recipe, bundle and attestations; null when none,
   * or when that release's kept recipe deploys another image than the one it ran (a switch back
   * that found no kept recipe of the image it returned to, `keptRecipeOf`): running it would
   * not put back what served, and an older one would skip what served.
   */
  async previousAdmitted(release: Release): Promise<PreviousAdmitted | null> {
    return (await this.rollbackTarget(release)).found;
  }

  /**
   * `previousAdmitted` with why it is null when the release before `release` is why (`gap`):
   * that release kept a recipe deploying another image than the one it ran (a switch back
   * admitted with the recipe of the release it undid). `gap` is null when `found` is set or
   * no earlier release kept a recipe.
   */
  async rollbackTarget(
    release: Release,
  ): Promise<{ found: PreviousAdmitted | null; gap: RecipelessPredecessor | null }> {
    for await (const found of this.keptRecipes(release)) {
      const prev = await this.store.getRelease(found.prev.id);
      const ran = prev?.manifest.image;
      const kept = recipeImage(found.data.recipe);
      if (kept === ran) return { found, gap: null };
      const lineage = prev?.lineage;
      return {
        found: null,
        gap: ran
          ? {
              id: found.prev.id,
              of: lineage?.verb === "rollback" && lineage.switch_back ? lineage.of : null,
              image: ran,
              recipe: kept,
            }
          : null,
      };
    }
    return { found: null, gap: null };
  }

  /**
   * The recipe, bundle and attestations of the latest release of `release`'s model before it
   * (succeeded, among the latest `ROLLBACK_SCAN`) whose kept recipe deploys `image`; null when
   * none. A switch back is admitted with it: its record then names a recipe of what it put
   * back, so a later rollback to it redeploys that image.
   */
  async keptRecipeOf(release: Release, image: string): Promise<PreviousAdmitted["data"] | null> {
    for await (const found of this.keptRecipes(release)) {
      if (recipeImage(found.data.recipe) === image) return found.data;
    }
    return null;
  }

  /** The earlier succeeded releases of `release`'s model that kept their recipe, newest first. */
  private async *keptRecipes(release: Release): AsyncGenerator<PreviousAdmitted> {
    const model = release.manifest.model;
    const number = Number(release.id.slice(1));
    const earlier = (await this.store.listReleases({ state: "succeeded", limit: ROLLBACK_SCAN }))
      .filter((s) => s.model === model && Number(s.id.slice(1)) < number)
      .sort((a, b) => Number(b.id.slice(1)) - Number(a.id.slice(1)));
    for (const prev of earlier) {
      const created = (await this.store.getHistory(prev.id, { limit: 8 })).find(
        (h) => h.kind === "created",
      );
      const data = created?.data as { recipe?: Json; bundle?: Json; attestations?: Json } | null;
      if (!data || data.recipe === undefined) continue;
      yield { prev, data: data as PreviousAdmitted["data"] };
    }
  }

  /**
   * 409 `superseded` when a later release has replaced `release` on its model's lanes: a
   * rollback or roll forward from it would act on lanes it no longer defines. Null otherwise.
   */
  async supersededRefusal(
    release: Release,
    verb: "rollback" | "roll forward" | "verify",
  ): Promise<Refusal | null> {
    const later = await this.supersededBy(release);
    if (!later) return null;
    // A succeeded later release's rollback is advised only when it can be taken: else what
    // that release accepts (e.g. its own rollback is refused, so roll forward).
    const laterRelease =
      verb !== "verify" && later.state === "succeeded"
        ? await this.store.getRelease(later.id)
        : null;
    const laterBlocked = laterRelease
      ? lifecycleBlocked(
          { id: later.id, state: later.state, model: release.manifest.model },
          await this.lifecycleLookups(laterRelease),
        )
      : null;
    const words = supersededWords(
      { id: release.id, state: release.state, model: release.manifest.model },
      later.id,
      later.state,
      // Its lanes are the later release's to judge now.
      verb === "verify"
        ? `verify ${later.id} instead (\`${suggestedCommand("verify", { target: later.id })}\`)`
        : laterBlocked
          ? `act on ${later.id} instead: ${laterBlocked}`
          : undefined,
    );
    return {
      ok: false,
      status: 409,
      code: "superseded",
      reason: `[engine] ${verb} of ${release.id} refused: ${words}`,
    };
  }

  /**
   * `acceptedActionsPhrase` with the store's lookups: rollback and roll forward named only
   * when they can be taken, and why not (superseded, no earlier admitted manifest) when not.
   */
  async acceptedPhrase(release: Release): Promise<string> {
    return acceptedActionsPhrase(release, await this.lifecycleLookups(release));
  }

  /**
   * A 409 refusal that ends with what the release accepts now (`It accepts: abort, pause`), as
   * the rollback and roll-forward refusals do; unchanged when it already says so or the release
   * is gone.
   */
  async withAccepted(id: string, r: Refusal): Promise<Refusal> {
    if (/\baccepts[: ]/.test(r.reason)) return r;
    const release = await this.store.getRelease(id);
    if (!release) return r;
    // "none; <why>": the why is not said twice when the refusal says it already.
    const phrase = await this.acceptedPhrase(release);
    const [head = phrase, ...why] = phrase.split("; ");
    const said = why.length > 0 && r.reason.includes(why.join("; "));
    return { ...r, reason: `${r.reason}. It accepts: ${said ? head : phrase}` };
  }

  /**
   * The transition's refusals of a finished release name its lifecycle verb by state alone
   * (`closedReleaseAccepts`, pure); with the store's lookups that phrase is said again by the
   * same function, which names why a verb cannot be taken (superseded, no earlier admitted
   * manifest) and what to do instead.
   */
  async withRollbackOffer(id: string, r: Refusal): Promise<Refusal> {
    const release = await this.store.getRelease(id);
    if (!release) return r;
    const byState = closedReleaseAccepts(id, release.state);
    if (!r.reason.includes(byState)) return r;
    const o = await this.lifecycleLookups(release);
    return {
      ...r,
      reason: r.reason.replace(
        byState,
        closedReleaseAccepts(id, release.state, { model: release.manifest.model, o }),
      ),
    };
  }
}
