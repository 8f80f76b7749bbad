/**
 * Manifests by release id, kept by the store after it wrote or read them. A manifest never
 * changes after `createRelease` (release ids are never reused), so a cached copy is always
 * right and `getRelease` then reads only the small `releases.doc`.
 */
import type { Manifest } from "../../domain/types.ts";

/** Default number of manifests kept (each ~20 KB as JSON; parsed, a few times that). */
export const MANIFEST_CACHE_MAX = 500;

export class ManifestCache {
  /** Insertion order is recency: a hit moves the entry to the end. */
  private readonly map = new Map<string, Manifest>();

  constructor(private readonly max = MANIFEST_CACHE_MAX) {}

  get(releaseId: string): Manifest | undefined {
    const m = this.map.get(releaseId);
    if (m !== undefined) {
      this.map.delete(releaseId);
      this.map.set(releaseId, m);
    }
    return m;
  }

  set(releaseId: string, manifest: Manifest): void {
    this.map.delete(releaseId);
    this.map.set(releaseId, manifest);
    if (this.map.size > this.max) {
      const oldest = this.map.keys().next().value;
      if (oldest !== undefined) this.map.delete(oldest);
    }
  }

  /** Forgets everything (the store was closed). */
  clear(): void {
    this.map.clear();
  }
}
