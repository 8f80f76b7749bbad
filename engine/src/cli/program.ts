/**
 * The `baton` command line (commander). Global options: `--engine <url>` (env
 * BATON_ENGINE_URL), `--token <token>` (env BATON_TOKEN). Read commands take `--json`.
 * Exit codes: 0 ok, 1 failed or refused, 2 usage (docs/cli.md).
 */

import { dirname, resolve } from "node:path";
import { Command, CommanderError, Option } from "commander";
import { VERBS, type VerbName } from "../domain/verbs.ts";
import { type Connection, connection } from "./client.ts";
import * as cmd from "./commands.ts";
import { type DrillOptions, drillCommand } from "./drill.ts";
import { CliError, EXIT, type ExitCode, errorLines, usage } from "./errors.ts";
import { gitSource } from "./git-source.ts";
import {
  changeIncident,
  declareIncident,
  type DeclareOptions as IncidentDeclareOptions,
  listIncidents,
  showIncident,
} from "./incident.ts";
import { type KillSwitchOptions, killSwitch } from "./kill-switch.ts";
import { type RevokeOptions, revokeCredential } from "./revoke-credential.ts";
import { demo, serve } from "./serve.ts";
import { startPending } from "./start-pending.ts";
import { runVerify } from "./verify.ts";

type Globals = { engine?: string; token?: string };

/**
 * The action of a verb declared `cli: "own"` (domain/verbs.ts): the id and the flags as
 * commander parsed them; resolves to the exit code.
 */
type OwnVerbAction = (
  conn: Connection,
  id: string,
  o: Readonly<Record<string, unknown>> & { json: boolean },
  io: cmd.Io,
) => Promise<ExitCode>;

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
 * Runs the CLI on `argv` (without node and script), printing to `io` and reading the
 * environment `io.env` (default the process's): tests call it in process with their own.
 * Resolves to the exit code; never throws. `serve` resolves once its server has closed.
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
  const conn = (c: Command) => connection(c.optsWithGlobals<Globals>(), cmd.envOf(io));
  const json = () => new Option("--json", "print JSON instead of text");
  /**
   * The command of an operator verb, built from its declaration (domain/verbs.ts): the id,
   * any further arguments, every flag (required ones enforced, repeatable ones collected,
   * defaults set) and `--json`. Its action is the generic `cmd.verb`, or `own` for a verb
   * declared `cli: "own"` (which must be given it).
   */
  const verbCommand = (name: VerbName, own?: OwnVerbAction) => {
    const v = VERBS[name];
    if ((v.cli === "own") !== (own !== undefined))
      throw new Error(
        `[cli] ${v.command}: ${v.cli === "own" ? "declared with its own action, but none was given" : "an own action was given, but the verb table does not declare cli: own"}`,
      );
    const c = program
      .command(v.command)
      .description(v.summary)
      .argument(v.on === "step_run" ? "<step-run>" : "<id>", v.idHelp);
    for (const a of v.args) c.argument(a.name, a.help);
    for (const f of v.flags) {
      const opt = new Option(`${f.flag} ${f.value}`, f.help);
      if (f.repeatable) opt.argParser((x: string, prev: string[] = []) => [...prev, x]);
      if (f.required && !f.repeatable) opt.makeOptionMandatory();
      if (f.default !== undefined) opt.default(f.default);
      c.addOption(opt);
    }
    c.addOption(json()).action(async (...a: unknown[]) => {
      const command = a.at(-1) as Command;
      const o = a.at(-2) as Record<string, unknown>;
      const [id, ...rest] = a.slice(0, -2) as string[];
      const flags = { ...o, json: Boolean(o.json) };
      code = own
        ? await own(conn(command), id ?? "", flags, io)
        : await cmd.verb(conn(command), name, id ?? "", rest, flags, io);
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
    .addOption(json())
    .action(
      async (
        file: string,
        o: {
          json?: boolean;
          hold?: boolean;
          bundle?: string;
          attestation?: string[];
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

  verbCommand("release");
  verbCommand("pause");
  verbCommand("confirm_restore");
  verbCommand("restore_state");

  verbCommand("verify", runVerify);

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
    .command("attest")
    .description(
      "sign a SLSA provenance attestation for an image with a local key (what --attestation sends; a real build attests in its build job)",
    )
    .argument("<image>", "an image pinned by digest (name@sha256:…), or a recipe file (its image)")
    .option("--key <file>", "PEM private key (baton keygen)")
    .option("--key-id <id>", "the key's id in the engine's trust policy")
    .option(
      "--repository <url>",
      "the source repository the build came from (the trust policy's images.source_repositories)",
    )
    .option(
      "--builder <id>",
      "the builder id (default https://github.com/actions/runner/github-hosted)",
    )
    .option("--out <file>", "write the bundle here instead of stdout")
    .action(
      async (
        subject: string,
        o: { key?: string; keyId?: string; repository?: string; builder?: string; out?: string },
      ) => {
        code = await cmd.attest(subject, o, io);
      },
    );

  program
    .command("keygen")
    .description("write a new signing key pair: <prefix>.key and <prefix>.pub")
    .argument("<prefix>", "file name prefix, e.g. release-key")
    .option("--force", "replace <prefix>.key and <prefix>.pub when they exist")
    .action(async (prefix: string, o: { force?: boolean }) => {
      code = await cmd.keygen(prefix, o, io);
    });

  program
    .command("start-pending")
    .description(
      "start every recipe whose content is not what stands for its model (the recipe workflow's start)",
    )
    .argument("<recipe...>", "recipe YAML (or .json) files, e.g. every file in recipes/")
    .option("--dry-run", "only print what would be started")
    .option(
      "--commit <rev>",
      "the commit the recipe files come from (e.g. HEAD): a commit older than the newest one a model's releases came from starts nothing (superseded)",
    )
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
          commit?: string;
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
            ...(o.keyless ? { keyless: cmd.keylessOptions(o, cmd.envOf(io)) } : {}),
            ...(attestations.length ? { attestations } : {}),
            ...(o.githubAttestations
              ? { github: cmd.githubAttestationSource(o.githubAttestations, cmd.envOf(io)) }
              : {}),
            // Git is asked where the recipes are (the checkout they come from).
            ...(o.commit !== undefined
              ? { git: gitSource(o.commit, dirname(resolve(files[0] ?? "."))) }
              : {}),
          },
          io,
        );
      },
    );

  verbCommand("accept");

  program
    .command("status")
    .description("list releases, or show one release's step runs")
    .argument("[id]", "release id, e.g. r17")
    .option("--state <state>", "only releases in this state (list)")
    .option("--limit <n>", "at most n releases (list, 1..200)")
    .option(
      "-w, --watch",
      "one release: redraw its screen as it changes (state, step, lanes set vs observed, gate); ends when it ends",
    )
    .option("--interval <ms>", "with -w: poll interval in ms", "1000")
    .option("--timeout <s>", "with -w: give up after this many seconds", "21600")
    .addOption(json())
    .action(
      async (
        id: string | undefined,
        o: {
          json?: boolean;
          state?: string;
          limit?: string;
          watch?: boolean;
          interval: string;
          timeout: string;
        },
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

  const incident = program
    .command("incident")
    .description(
      "incidents: while one is open, releases of models it does not name are frozen (docs/incidents.md)",
    );
  const actorOption = () =>
    new Option("--actor <name>", "who acts, recorded in the timeline (default: $USER)");
  incident
    .command("declare")
    .description("open an incident: name its models and its commander; other models freeze")
    .requiredOption("--severity <sev>", "sev1 (worst) … sev4")
    .requiredOption("--summary <text>", "what is wrong, in a sentence")
    .requiredOption(
      "--model <model>",
      "an affected model (its releases go on); repeatable",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .requiredOption("--commander <name>", "the incident commander (only they may allow releases)")
    .option("--operations <name>", "operations lead")
    .option("--communications <name>", "communications lead")
    .option("--release-owner <name>", "owner of the release involved")
    .option("--recorder <name>", "who keeps the timeline")
    .addOption(actorOption())
    .addOption(json())
    .action(async (o: IncidentDeclareOptions, c: Command) => {
      code = await declareIncident(conn(c), { ...o, json: Boolean(o.json) }, io);
    });
  incident
    .command("list")
    .description("every incident, newest first")
    .addOption(json())
    .action(async (o: { json?: boolean }, c: Command) => {
      code = await listIncidents(conn(c), { json: Boolean(o.json) }, io);
    });
  incident
    .command("show")
    .description("one incident with its timeline (its events and its models' release history)")
    .argument("<id>", "incident id, e.g. inc3")
    .addOption(json())
    .action(async (id: string, o: { json?: boolean }, c: Command) => {
      code = await showIncident(conn(c), id, { json: Boolean(o.json) }, io);
    });
  incident
    .command("note")
    .description("add a note to an open incident's timeline")
    .argument("<id>", "incident id")
    .requiredOption("--text <text>", "the note")
    .addOption(actorOption())
    .addOption(json())
    .action(async (id: string, o: { text: string; actor?: string; json?: boolean }, c: Command) => {
      code = await changeIncident(
        conn(c),
        id,
        "note",
        { text: o.text },
        { ...o, json: Boolean(o.json) },
        io,
      );
    });
  incident
    .command("allow")
    .description("the commander lets one more model release while the incident is open")
    .argument("<id>", "incident id")
    .requiredOption("--model <model>", "the model to allow")
    .option("--reason <text>", "why", "")
    .addOption(actorOption())
    .addOption(json())
    .action(
      async (
        id: string,
        o: { model: string; reason: string; actor?: string; json?: boolean },
        c: Command,
      ) => {
        code = await changeIncident(
          conn(c),
          id,
          "allow",
          { model: o.model, reason: o.reason },
          { ...o, json: Boolean(o.json) },
          io,
        );
      },
    );
  incident
    .command("resolve")
    .description("close an incident with what was found and done; frozen models thaw")
    .argument("<id>", "incident id")
    .requiredOption("--summary <text>", "what was found and done")
    .addOption(actorOption())
    .addOption(json())
    .action(
      async (id: string, o: { summary: string; actor?: string; json?: boolean }, c: Command) => {
        code = await changeIncident(
          conn(c),
          id,
          "resolve",
          { summary: o.summary },
          { ...o, json: Boolean(o.json) },
          io,
        );
      },
    );

  program
    .command("kill-switch")
    .description(
      "withdraw one capability from every lane of a model at the control plane (--restore gives it back); without a capability, list the model's kill switches (docs/recovery-actions.md)",
    )
    .argument("<model>", "the model, e.g. ranker")
    .argument("[capability]", "the capability, e.g. chat")
    .option("--reason <text>", "why (required to withdraw or restore; kept in the record)")
    .option("--restore", "give the capability back to the lanes the kill switch took it from")
    .addOption(actorOption())
    .addOption(json())
    .action(
      async (
        model: string,
        capability: string | undefined,
        o: Omit<KillSwitchOptions, "json"> & { json?: boolean },
        c: Command,
      ) => {
        code = await killSwitch(conn(c), model, capability, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("revoke-credential")
    .description(
      "run the tool a model's recipe names to revoke (or --rotate) a credential, by its reference, through the runner; without a reference, list the model's revocations (docs/recovery-actions.md)",
    )
    .argument("<model>", "the model, e.g. ranker")
    .argument(
      "[ref]",
      "the credential's reference as the recipe lists it, e.g. vault://kv/ranker/api-key",
    )
    .option("--reason <text>", "why (required; kept in the record)")
    .option("--rotate", "ask the tool to rotate the credential instead of revoking it")
    .addOption(actorOption())
    .addOption(json())
    .action(
      async (
        model: string,
        ref: string | undefined,
        o: Omit<RevokeOptions, "json"> & { json?: boolean },
        c: Command,
      ) => {
        code = await revokeCredential(conn(c), model, ref, { ...o, json: Boolean(o.json) }, io);
      },
    );

  program
    .command("drill")
    .description(
      "list a model's recovery drills, newest first; --record <file> records one (the JSON npm run drill writes to BATON_DRILL_RECORD); --rehearse --reason <why> has the engine rehearse an evacuation of the drill lanes and record it (docs/recovery-actions.md)",
    )
    .argument("<model>", "the model, e.g. ranker")
    .option("--record <file>", "a drill record (JSON) to record")
    .option(
      "--rehearse",
      "rehearse now: take the drill lanes out of routing, verify, put them back, verify, and record the drill",
    )
    .option(
      "--reason <text>",
      "with --record or --rehearse: why the drill was run (kept with the record)",
    )
    .addOption(actorOption())
    .addOption(json())
    .action(
      async (model: string, o: Omit<DrillOptions, "json"> & { json?: boolean }, c: Command) => {
        code = await drillCommand(conn(c), model, { ...o, json: Boolean(o.json) }, io);
      },
    );

  verbCommand("abort");
  verbCommand("resume");
  verbCommand("retry");
  verbCommand("resolve");
  verbCommand("promote");
  verbCommand("rollback");
  verbCommand("roll_forward");
  verbCommand("abandon");

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
      code = await serve(o);
    });

  program
    .command("demo")
    .description("run the local demo (engine, runner and fleet stand-ins)")
    .allowExcessArguments(true)
    .allowUnknownOption(true)
    .helpOption(false) // `baton demo --help` shows the demo's own usage
    .action(async (_o: unknown, c: Command) => {
      code = await demo(c.args);
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
