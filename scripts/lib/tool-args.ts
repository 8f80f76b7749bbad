/**
 * Command line and arguments file of a release tool (docs/runner.md, shared decisions):
 *   <tool> --args <args.json> --key <ssh key path> --result-dir <dir> --operation-key <key>
 *          [--release-id <id> --generation <n>]
 * with the SSH passphrase in env BATON_SSH_PASSPHRASE. The release id and generation (for the
 * target's generation fence, docs/state-machine.md rule 7) may also come from env BATON_RELEASE_ID and
 * BATON_RELEASE_GENERATION, which is how the action passes them; flags win over env.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import * as z from "zod";
import {
  HealthUrl,
  HostKeyPin,
  imageRef,
  LaneId,
  QueueName,
  SshHost,
  SshPort,
  SshUser,
} from "../../engine/src/protocol/fields.ts";

/** Digest-pinned image reference `name[:tag]@sha256:<64 hex>` (the recipe's own schema). */
export const ImageRef = imageRef("image");

// The lane's fields take the schemas the contract check applies to the recipe
// (engine/src/protocol/fields.ts): what the check passed, the tool accepts.
const Host = SshHost;
const Port = SshPort.default(22);
const User = SshUser;
const HostKey = HostKeyPin;

/** A bastion (OpenSSH ProxyJump) in front of a lane: the tool reaches the lane through it. */
export const JumpHost = z
  .object({ host: Host, port: Port, user: User, host_key: HostKey })
  .strict();
export type JumpHost = z.infer<typeof JumpHost>;

/** `args` of a runner step: the lane, the image it must run after the step, and before it. */
export const ToolArgs = z.object({
  lane: z.object({
    id: LaneId,
    host: Host,
    port: Port,
    user: User,
    host_key: HostKey,
    jump: JumpHost.optional(),
    queue: QueueName.optional(),
    health_url: HealthUrl,
  }),
  image: ImageRef,
  previous_image: imageRef("previous_image").optional(),
  /** Declared environment for the new container (a shadow-safe lane's), passed as `--env`. */
  env: z
    .record(
      z.string().regex(/^BATON_[A-Z_]{1,58}$/, "env names are BATON_ and capitals or '_'"),
      z
        .string()
        .regex(
          /^[A-Za-z0-9._:-]{1,64}$/,
          "env values are 1-64 letters, digits, '.', '_', ':', '-'",
        ),
    )
    .optional(),
});
export type ToolArgs = z.infer<typeof ToolArgs>;

/** The writer's release and generation, sent to deploy.sh for its generation fence. */
export interface ReleaseStamp {
  id: string;
  generation: number;
}

/** Parsed command line. `release` is absent when neither flags nor env name one (unfenced). */
export interface ToolCli {
  argsPath: string;
  keyPath: string;
  resultDir: string;
  operationKey: string;
  release?: ReleaseStamp;
}

const RELEASE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// No leading zeros and at most 9 digits: deploy.sh compares generations with sh arithmetic.
const GENERATION_RE = /^(0|[1-9][0-9]{0,8})$/;

/**
 * Release id and generation from `--release-id`/`--generation`, else env BATON_RELEASE_ID /
 * BATON_RELEASE_GENERATION. Both or neither; throws `Error("[tool] …")` naming the bad one.
 */
export function releaseStamp(
  flagId: string | undefined,
  flagGeneration: string | undefined,
  env: NodeJS.ProcessEnv,
): ReleaseStamp | undefined {
  const id = flagId ?? env.BATON_RELEASE_ID ?? "";
  const gen = flagGeneration ?? env.BATON_RELEASE_GENERATION ?? "";
  if (!id && !gen) return undefined;
  if (!RELEASE_ID_RE.test(id))
    throw new Error(
      "[tool] --release-id (or BATON_RELEASE_ID) must be the release id such as r12, given together with --generation",
    );
  if (!GENERATION_RE.test(gen))
    throw new Error(
      "[tool] --generation (or BATON_RELEASE_GENERATION) must be the release generation, a whole number without leading zeros, given together with --release-id",
    );
  return { id, generation: Number(gen) };
}

/**
 * Parses the tool command line (release stamp falling back to `env`). Throws
 * `Error("[tool] …")` naming the missing or bad option.
 */
export function parseToolCli(argv: readonly string[], env: NodeJS.ProcessEnv = {}): ToolCli {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      args: { type: "string" },
      key: { type: "string" },
      "result-dir": { type: "string" },
      "operation-key": { type: "string" },
      "release-id": { type: "string" },
      generation: { type: "string" },
    },
    strict: true,
  });
  for (const name of ["args", "key", "result-dir", "operation-key"] as const) {
    if (!values[name])
      throw new Error(
        `[tool] --${name} is required; usage: <tool> --args <args.json> --key <key> --result-dir <dir> --operation-key <key>`,
      );
  }
  if (!/^[A-Za-z0-9._:=/@+-]{1,512}$/.test(values["operation-key"] as string)) {
    throw new Error("[tool] --operation-key may contain only letters, digits and ._:=/@+-");
  }
  const release = releaseStamp(values["release-id"], values.generation, env);
  return {
    argsPath: values.args as string,
    keyPath: values.key as string,
    resultDir: values["result-dir"] as string,
    operationKey: values["operation-key"] as string,
    ...(release ? { release } : {}),
  };
}

/** Reads and validates args.json. Throws `Error("[tool] …")` listing each bad field and its fix. */
export function readToolArgs(path: string): ToolArgs {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new Error(`[tool] cannot read the arguments file ${path}: ${(e as Error).message}`);
  }
  const parsed = ToolArgs.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `args.${i.path.join(".")}: ${i.message}`)
      .join("; ");
    throw new Error(`[tool] bad step arguments: ${problems}`);
  }
  return parsed.data;
}
