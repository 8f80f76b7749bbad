/**
 * The `baton` command line (commander). Global options: `--engine <url>` (env
 * BATON_ENGINE_URL), `--token <token>` (env BATON_TOKEN). Read commands take `--json`.
 * Exit codes: 0 ok, 1 failed or refused, 2 usage (docs/cli.md).
 */
import { Command, CommanderError, Option } from "commander";
import { connection } from "./client.ts";
import * as cmd from "./commands.ts";
import { CliError, EXIT, type ExitCode, errorLines, usage } from "./errors.ts";
import { startPending } from "./start-pending.ts";
import { verifyCommand } from "./verify.ts";

type Globals = { engine?: string; token?: string };

/** Where a keyless signature goes (with --keyless; docs/trust.md "Signing from the recipe workflow"). */
const keylessFlags = {
  sigstore: () =>
    new Option("--sigstore <instance>", "Sigstore for --keyless: public-good (default) or github"),
  fulcio: () =>
    new Option("--fulcio-url <url>", "Fulcio CA URL for --keyless (overrides --sigstore)"),
  rekor: () =>
    new Option(
      "--rekor-url <url>",
      "Rekor transparency log URL for --keyless (overrides --sigstore)",
    ),
  tsa: () =>
    new Option(
      "--tsa-url <url>",
      "timestamp authority URL for --keyless; without --rekor-url, no transparency log entry",
    ),
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: matches ANSI colour escapes
const ANSI = /\x1b\[[0-9;]*m/g;

function oneLine(s: string): string {
  return s
    .replace(ANSI, "")
    .replace(/^error: /, "")
    .replace(/\s*\n\s*/g, " ")
    .trim();
}

/**
 * Runs the CLI on `argv` (without node and script). Resolves to the exit code; never throws.
 * `serve` resolves once the server listens (the process then stays up).
 */
export async function runCli(
  argv: string[],
  io: cmd.Io = { out: process.stdout, err: process.stderr },
): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  const program = new Command("baton")
    .description("Baton: roll a model out to a fleet from GitHub, one durable step at a time.")
    .option("--engine <url>", "engine URL (env BATON_ENGINE_URL, default http://127.0.0.1:8787)")
    .option("--token <token>", "operator or viewer token (env BATON_TOKEN)")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out.write(s),
      writeErr: (s) => io.err.write(s),
      // One line, no colour codes: commander's suggestions come on a second line, inverted.
      outputError: (s, write) => write(`[cli] ${oneLine(s)} (see baton --help)\n`),
    });
  const conn = (c: Command) => connection(c.optsWithGlobals<Globals>());
  const json = () => new Option("--json", "print JSON instead of text");
  type VerbOptions = { json: boolean; reason?: string; actor?: string };
  /**
   * An operator verb on one id with `--reason` (required when `reason.required`), `--actor`
   * (default $USER) and `--json`; `run` gets the connection, the id and those options.
   */
  const operatorVerb = (
    name: string,
    description: string,
    argument: [string, string],
    reason: { required: boolean; help: string },
    run: (conn: ReturnType<typeof connection>, id: string, o: VerbOptions) => Promise<ExitCode>,
  ) => {
    const verb = program
      .command(name)
      .description(description)
      .argument(...argument);
    if (reason.required) verb.requiredOption("--reason <text>", reason.help);
    else verb.option("--reason <text>", reason.help);
    verb
      .option("--actor <name>", "who you are (kept in the history; default $USER)")
      .addOption(json())
      .action(async (id: string, o: Omit<VerbOptions, "json"> & { json?: boolean }, c: Command) => {
        code = await run(conn(c), id, { ...o, json: Boolean(o.json) });
      });
  };
  /** `--bundle` and repeatable `--attestation`: what admission checks with a recipe. */
  const admissionOptions = (c: Command, bundleHelp: string) =>
    c
      .option("--bundle <file>", bundleHelp)
      .option(
        "--attestation <file>",
        "an image attestation bundle (provenance, SBOM); repeatable",
        (v: string, prev: string[] = []) => [...prev, v],
      );

  program
    .command("check")
    .description("contract-check and compile recipe files locally (no engine needed)")
    .argument("<recipe...>", "recipe YAML files")
    .addOption(json())
    .action(async (files: string[], o: { json?: boolean }) => {
      code = await cmd.check(files, { json: Boolean(o.json) }, io);
    });

  admissionOptions(
    program
      .command("start")
      .description("start a release of a recipe")
      .argument("<recipe>", "recipe YAML (or .json) file")
      .option("--hold", "create the release but keep it pending until `baton resume`"),
    "the manifest's Sigstore bundle (baton sign)",
  )
    .option("--rollback", "an explicit rollback: admit a manifest older than the last admitted")
    .addOption(json())
    .action(
      async (
        file: string,
        o: {
          json?: boolean;
          hold?: boolean;
          bundle?: string;
          attestation?: string[];
          rollback?: boolean;
        },
        c: Command,
      ) => {
        code = await cmd.start(
          conn(c),
          file,
          {
            json: Boolean(o.json),
            hold: Boolean(o.hold),
            ...(o.bundle ? { bundle: o.bundle } : {}),
            ...(o.attestation ? { attestation: o.attestation } : {}),
            rollback: Boolean(o.rollback),
          },
          io,
        );
      },
    );

  admissionOptions(
    program
      .command("deploy")
      .description(
        "dark launch: start a release that deploys the candidate at 0% exposure and waits before the first traffic write until `baton release` (docs/lifecycle.md)",
      )
      .argument("<recipe>", "recipe YAML (or .json) file"),
    "the manifest's Sigstore bundle (baton sign)",
  )
    .addOption(json())
    .action(
      async (
        file: string,
        o: { json?: boolean; bundle?: string; attestation?: string[] },
        c: Command,
      ) => {
        code = await cmd.start(
          conn(c),
          file,
          {
            json: Boolean(o.json),
            hold: false,
            exposure: "dark",
            ...(o.bundle ? { bundle: o.bundle } : {}),
            ...(o.attestation ? { attestation: o.attestation } : {}),
          },
          io,
        );
      },
    );

  operatorVerb(
    "release",
    "a release deployed dark waits at 0% exposure: expose it to its first wave; the rollout goes on",
    ["<id>", "release id"],
    { required: false, help: "why it is ready (kept in the history)" },
    (cn, id, o) => cmd.holdVerb(cn, "release", id, o, io),
  );

  operatorVerb(
    "pause",
    "pause a running release: nothing new starts, step runs in flight settle; `baton resume` continues",
    ["<id>", "release id"],
    { required: true, help: "why (kept in the history and shown on the release)" },
    (cn, id, o) => cmd.holdVerb(cn, "pause", id, o, io),
  );

  operatorVerb(
    "confirm-restore",
    "a recoverable release waits after its traffic rollback: confirm you ran its restore action; it ends rolled_back",
    ["<id>", "release id"],
    { required: true, help: "what you ran and what it showed (kept in the record)" },
    (cn, id, o) => cmd.holdVerb(cn, "confirm-restore", id, o, io),
  );

  program
    .command("verify")
    .description(
      "read every lane of a release again (control plane, and the lanes' machines) and compare it with what it should be; exit 0 when it passed",
    )
    .argument(
      "<id>",
      "release id (succeeded, rolled_back, or needs_operator after a failed verification)",
    )
    .option("--actor <name>", "who you are (kept in the history; default $USER)")
    .option("--interval <ms>", "poll interval in ms while the engine reads", "1000")
    .option("--timeout <s>", "give up waiting for the verdict after this many seconds", "120")
    .addOption(json())
    .action(
      async (
        id: string,
        o: { json?: boolean; actor?: string; interval: string; timeout: string },
        c: Command,
      ) => {
        code = await verifyCommand(conn(c), id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("sign")
    .description("sign a recipe's compiled manifest (Sigstore bundle) for admission")
    .argument("<recipe>", "recipe YAML (or .json) file")
    .option("--key <file>", "PEM private key (baton keygen)")
    .option("--key-id <id>", "the key's id in the engine's trust policy")
    .option("--keyless", "sign with the GitHub Actions OIDC identity (Fulcio)")
    .option("--valid-for <duration>", "validity, e.g. 12h or 7d (default 7d)")
    .option("--out <file>", "write the bundle here instead of stdout")
    .addOption(keylessFlags.sigstore())
    .addOption(keylessFlags.fulcio())
    .addOption(keylessFlags.rekor())
    .addOption(keylessFlags.tsa())
    .action(
      async (
        file: string,
        o: {
          key?: string;
          keyId?: string;
          keyless?: boolean;
          out?: string;
          validFor?: string;
        } & cmd.KeylessFlags,
      ) => {
        code = await cmd.sign(file, o, io);
      },
    );

  program
    .command("keygen")
    .description("write a new signing key pair: <prefix>.key and <prefix>.pub")
    .argument("<prefix>", "file name prefix, e.g. release-key")
    .action(async (prefix: string) => {
      code = await cmd.keygen(prefix, io);
    });

  program
    .command("start-pending")
    .description(
      "start every recipe whose manifest digest has no release yet (the recipe workflow's start)",
    )
    .argument("<recipe...>", "recipe YAML (or .json) files, e.g. every file in recipes/")
    .option("--dry-run", "only print what would be started")
    .option("--key <file>", "sign each started manifest with this PEM private key (baton keygen)")
    .option("--key-id <id>", "the key's id in the engine's trust policy (with --key)")
    .option(
      "--keyless",
      "sign each started manifest with the CI's OIDC identity (GitHub Actions: id-token: write)",
    )
    .addOption(keylessFlags.sigstore())
    .addOption(keylessFlags.fulcio())
    .addOption(keylessFlags.rekor())
    .addOption(keylessFlags.tsa())
    .option(
      "--attestation <file>",
      "an image attestation bundle (provenance, SBOM) sent with every started recipe; repeatable",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option(
      "--github-attestations <repository>",
      "also send the attestations GitHub holds for each recipe's image digest, attested in owner/name (GITHUB_TOKEN, GITHUB_API_URL)",
    )
    .addOption(json())
    .action(
      async (
        files: string[],
        o: {
          json?: boolean;
          dryRun?: boolean;
          key?: string;
          keyId?: string;
          keyless?: boolean;
          attestation?: string[];
          githubAttestations?: string;
        } & cmd.KeylessFlags,
        c: Command,
      ) => {
        if (o.key && o.keyless)
          throw usage("[cli] give --key (with --key-id) or --keyless, not both");
        const attestations = cmd.readAttestations(o.attestation);
        code = await startPending(
          conn(c),
          files,
          {
            json: Boolean(o.json),
            dryRun: Boolean(o.dryRun),
            ...(o.key ? { key: cmd.readSigningKey(o.key, o.keyId) } : {}),
            ...(o.keyless ? { keyless: cmd.keylessOptions(o) } : {}),
            ...(attestations.length ? { attestations } : {}),
            ...(o.githubAttestations
              ? { github: cmd.githubAttestationSource(o.githubAttestations) }
              : {}),
          },
          io,
        );
      },
    );

  program
    .command("accept")
    .description("accept a closed release's final state as its owner")
    .argument("<id>", "release id")
    .requiredOption("--by <owner>", "who accepts (e.g. email or GitHub login)")
    .option("--expires <time>", "acceptance valid until (ISO 8601)")
    .option("--note <text>", "why, kept in the record")
    .option("--digest <sha256>", "the record digest you reviewed (refused if it changed)")
    .addOption(json())
    .action(
      async (
        id: string,
        o: { by: string; expires?: string; note?: string; digest?: string; json?: boolean },
        c: Command,
      ) => {
        code = await cmd.accept(conn(c), id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("status")
    .description("list releases, or show one release's step runs")
    .argument("[id]", "release id, e.g. r17")
    .option("--state <state>", "only releases in this state (list)")
    .option("--limit <n>", "at most n releases (list, 1..200)")
    .addOption(json())
    .action(
      async (
        id: string | undefined,
        o: { json?: boolean; state?: string; limit?: string },
        c: Command,
      ) => {
        code = await cmd.status(conn(c), id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("watch")
    .description("follow a release: each step as it happens; exit 0 when it succeeds")
    .argument("<id>", "release id")
    .option("--interval <ms>", "poll interval in ms", "1000")
    .option("--timeout <s>", "give up after this many seconds", "21600")
    .addOption(json())
    .action(
      async (id: string, o: { json?: boolean; interval: string; timeout: string }, c: Command) => {
        code = await cmd.watchCommand(conn(c), id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("abort")
    .description("abort a release (compensates whatever may have taken effect)")
    .argument("<id>", "release id")
    .requiredOption("--reason <text>", "why (kept in the history and the release record)")
    .option("--actor <name>", "who you are (kept in the history; default $USER)")
    .addOption(json())
    .action(
      async (id: string, o: { json?: boolean; reason: string; actor?: string }, c: Command) => {
        code = await cmd.act(conn(c), "abort", id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("resume")
    .description("resume a release paused by an operator or on a failure (or held pending)")
    .argument("<id>", "release id")
    .addOption(json())
    .action(async (id: string, o: { json?: boolean }, c: Command) => {
      code = await cmd.act(conn(c), "resume", id, { json: Boolean(o.json) }, io);
    });

  program
    .command("retry")
    .description("retry the step run a paused release waits on")
    .argument("<step-run>", "step run id, e.g. sr_17_6_f")
    .addOption(json())
    .action(async (id: string, o: { json?: boolean }, c: Command) => {
      code = await cmd.act(conn(c), "retry", id, { json: Boolean(o.json) }, io);
    });

  operatorVerb(
    "resolve",
    "needs_operator: record that you did the waited-on backward step run's effect by hand; compensation continues",
    ["<step-run>", "the backward step run the release waits on, e.g. sr_17_3_b"],
    { required: true, help: "what you did, by hand, and why (kept in the history)" },
    (cn, id, o) => cmd.resolve(cn, id, { ...o, reason: o.reason ?? "" }, io),
  );

  operatorVerb(
    "promote",
    "widen to the next wave: past a manual promotion (recipe `promotion: manual`), or accepting the risk of an inconclusive gate (docs/gate.md)",
    ["<id>", "release id"],
    { required: false, help: "why the risk is acceptable (kept in the history)" },
    (cn, id, o) => cmd.promote(cn, id, o, io),
  );

  operatorVerb(
    "rollback",
    "succeeded: start a new release that runs the previous admitted manifest of the model again (docs/lifecycle.md)",
    ["<id>", "the succeeded release to roll back"],
    { required: false, help: "why (kept in the history)" },
    (cn, id, o) => cmd.rollback(cn, id, o, io),
  );

  admissionOptions(
    program
      .command("roll-forward")
      .description(
        "rolled_back, aborted or abandoned: start a fixed recipe of the same model in its place (docs/lifecycle.md)",
      )
      .argument("<id>", "the release to roll forward from")
      .argument("<recipe>", "the fixed recipe YAML (or .json) file"),
    "the fixed manifest's Sigstore bundle (baton sign)",
  )
    .addOption(json())
    .action(
      async (
        id: string,
        file: string,
        o: { json?: boolean; bundle?: string; attestation?: string[] },
        c: Command,
      ) => {
        code = await cmd.rollForward(
          conn(c),
          id,
          file,
          {
            json: Boolean(o.json),
            ...(o.bundle ? { bundle: o.bundle } : {}),
            ...(o.attestation ? { attestation: o.attestation } : {}),
          },
          io,
        );
      },
    );

  program
    .command("abandon")
    .description(
      "needs_operator: end the release as abandoned, confirming what every lane runs now; its lanes become free",
    )
    .argument("<id>", "release id")
    .requiredOption("--reason <text>", "why (kept in the history)")
    .option(
      "--lane <lane=image>",
      "what a lane runs now: <lane id>=<image@sha256:…> or <lane id>=none; once per lane of the release",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option("--actor <name>", "who you are (kept in the history; default $USER)")
    .addOption(json())
    .action(
      async (
        id: string,
        o: { json?: boolean; reason: string; lane?: string[]; actor?: string },
        c: Command,
      ) => {
        code = await cmd.abandon(conn(c), id, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("record")
    .description("print a release's record (docs/record.md) as JSON")
    .argument("<id>", "release id")
    .option("--out <file>", "write it to this file")
    .option("--raw", "the engine's full state instead (release, history, attempt results)")
    .action(async (id: string, o: { out?: string; raw?: boolean }, c: Command) => {
      code = await cmd.record(conn(c), id, o, io);
    });

  program
    .command("sign-record")
    .description("sign a closed release record (baton record --out) like a manifest")
    .argument("<record>", "the record JSON file")
    .option("--key <file>", "PEM private key (baton keygen)")
    .option("--key-id <id>", "the key's id in the trust policy")
    .option("--keyless", "sign with the GitHub Actions OIDC identity (Fulcio)")
    .option("--out <file>", "write the bundle here instead of stdout")
    .action(
      async (
        file: string,
        o: { key?: string; keyId?: string; keyless?: boolean; out?: string },
      ) => {
        code = await cmd.signRecordFile(file, o, io);
      },
    );

  program
    .command("verify-record")
    .description("check a record is unchanged and signed by an allowed signer")
    .argument("<record>", "the record JSON file")
    .requiredOption("--bundle <file>", "the bundle sign-record wrote")
    .option("--public-key <file>", "the signer's PEM public key (with --key-id)")
    .option("--key-id <id>", "the key's id")
    .option("--policy <file>", "a trust policy file; its manifest.signers are allowed")
    .addOption(json())
    .action(
      async (
        file: string,
        o: { bundle: string; publicKey?: string; keyId?: string; policy?: string; json?: boolean },
      ) => {
        code = await cmd.verifyRecordFile(file, o, io);
      },
    );

  program
    .command("serve")
    .description(
      "run the engine (HTTP API, dashboard, reconciler), configured from the environment",
    )
    .option("--port <port>", "listen port (overrides PORT)")
    .option("--host <host>", "listen address (overrides BATON_HOST; default 127.0.0.1)")
    .action(async (o: { port?: string; host?: string }) => {
      code = await cmd.serve(o);
    });

  program
    .command("demo")
    .description("run the local demo (engine, runner and fleet stand-ins)")
    .allowExcessArguments(true)
    .allowUnknownOption(true)
    .helpOption(false) // `baton demo --help` shows the demo's own usage
    .action(async (_o: unknown, c: Command) => {
      code = await cmd.demo(c.args);
    });

  try {
    if (argv.length === 0) {
      program.outputHelp();
      return EXIT.usage;
    }
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (
        err.code === "commander.helpDisplayed" ||
        err.code === "commander.help" ||
        err.code === "commander.version"
      ) {
        return EXIT.ok;
      }
      return EXIT.usage;
    }
    const e =
      err instanceof CliError
        ? err
        : new CliError(
            // A message that already names its part (`[engine] …`, `[store] …`) keeps it.
            String((err as Error)?.message ?? err)
              .split("\n")[0]!
              .replace(/^(?!\[[a-z-]+\] )/, "[cli] "),
            EXIT.failed,
          );
    io.err.write(`${errorLines(e).join("\n")}\n`);
    return e.exitCode;
  }
}
