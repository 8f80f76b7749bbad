/**
 * Command line and arguments file of a release tool (docs/runner.md, shared decisions):
 *   <tool> --args <args.json> --key <ssh key path> --result-dir <dir> --operation-key <key>
 * with the SSH passphrase in env BATON_SSH_PASSPHRASE.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { z } from "zod";

/** Digest-pinned image reference `name@sha256:<64 hex>`. */
export const ImageRef = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._/:-]{0,254}@sha256:[0-9a-f]{64}$/,
    "must be pinned by digest: name@sha256:<64 hex>",
  );

/** `args` of a runner step: the lane, the image it must run after the step, and before it. */
export const ToolArgs = z.object({
  lane: z.object({
    id: z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, "must be a lane id such as lane-a"),
    host: z.string().regex(/^[A-Za-z0-9.:_-]{1,253}$/, "must be a host name or IP address"),
    port: z.number().int().min(1).max(65535).default(22),
    user: z.string().regex(/^[a-z_][a-z0-9_.-]{0,31}$/, "must be a login user name"),
    host_key: z.string().min(1, "must be the pinned host key (SHA256:… or a known_hosts line)"),
    queue: z.string().optional(),
    health_url: z
      .string()
      .regex(/^https?:\/\/[A-Za-z0-9._~:/?&=%+-]{1,400}$/, "must be an http(s) URL"),
  }),
  image: ImageRef,
  previous_image: ImageRef.optional(),
});
export type ToolArgs = z.infer<typeof ToolArgs>;

/** Parsed command line. */
export interface ToolCli {
  argsPath: string;
  keyPath: string;
  resultDir: string;
  operationKey: string;
}

/** Parses the tool command line. Throws `Error("[tool] …")` naming the missing option. */
export function parseToolCli(argv: readonly string[]): ToolCli {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      args: { type: "string" },
      key: { type: "string" },
      "result-dir": { type: "string" },
      "operation-key": { type: "string" },
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
  return {
    argsPath: values.args as string,
    keyPath: values.key as string,
    resultDir: values["result-dir"] as string,
    operationKey: values["operation-key"] as string,
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
