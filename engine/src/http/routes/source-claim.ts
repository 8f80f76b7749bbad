/**
 * The recipe workflow's commit as the API takes it (docs/lifecycle.md "Merge order is release
 * order"): in a start's `source`, and in the body of `POST /v1/models/:model/source-mark`.
 */
import * as z from "zod";
import { COMMIT_PATTERN } from "../../domain/source-order.ts";
import { lazySchema } from "../../protocol/lazy-schema.ts";

const Commit = lazySchema(() =>
  z
    .string({ error: "must be a full commit id (40 or 64 lowercase hex digits)" })
    .regex(
      COMMIT_PATTERN,
      "must be a full commit id (40 or 64 lowercase hex digits), e.g. from `git rev-parse HEAD`",
    ),
);

/** `{commit, committed_at, after}`: the commit, its committer time, the mark checked against. */
export const SourceClaimBody = lazySchema(() =>
  z
    .object({
      commit: Commit,
      committed_at: z
        .number({ error: "must be the commit's committer time in epoch milliseconds" })
        .int("must be a whole number of epoch milliseconds (`git show -s --format=%ct` × 1000)")
        .nonnegative("must be 0 or more epoch milliseconds"),
      after: Commit.nullable().describe(
        "the model's source mark commit that `commit` was checked (with git) to descend from; null when the model had none",
      ),
    })
    .strict(),
);
