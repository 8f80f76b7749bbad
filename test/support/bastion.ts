/**
 * Two real sshd for jump-host tests: a bastion on 127.0.0.1 and a target on 127.0.0.2 that is
 * reachable ONLY through the bastion. How "only" is enforced (root, CI): an iptables rule on the
 * loopback interface rejects every TCP connection to the target's address and port except those
 * opened by processes of the bastion's login user, i.e. the bastion's session process that
 * serves the `direct-tcpip` channel. The test process (root) connecting directly gets a reset.
 * Without root the rule cannot be set and `enforced` is false (the tests then require CI unset).
 */
import { execFileSync } from "node:child_process";
import { type Sshd, type SshdOptions, startSshd } from "./sshd.ts";

/** A bastion and the target behind it. The target's authorized key is the bastion's client key. */
export interface BastionPair {
  bastion: Sshd;
  target: Sshd;
  /** True when a firewall rule makes the target unreachable except through the bastion. */
  enforced: boolean;
  stop(): Promise<void>;
}

function iptables(args: string[]): boolean {
  try {
    execFileSync("iptables", ["-w", "5", ...args], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts both. `targetEnv`/`targetOpts` configure the target (e.g. deploy.sh environment,
 * extra host key types); the target always listens on 127.0.0.2.
 */
export async function startBastionPair(
  targetEnv: Record<string, string> = {},
  targetOpts: SshdOptions = {},
): Promise<BastionPair> {
  const bastion = await startSshd({}, { extraConfig: ["AllowTcpForwarding yes"] });
  let target: Sshd;
  try {
    target = await startSshd(targetEnv, { ...targetOpts, listenAddress: "127.0.0.2" });
  } catch (e) {
    await bastion.stop();
    throw e;
  }
  // One client key for both hops, as with `ssh -J`.
  target.authorize(
    execFileSync("ssh-keygen", ["-y", "-f", bastion.clientKeyPath], { encoding: "utf8" }).trim(),
  );
  let rule: string[] | undefined;
  if (process.getuid?.() === 0) {
    const uid = execFileSync("id", ["-u", bastion.user], { encoding: "utf8" }).trim();
    const candidate = [
      "OUTPUT",
      "-o",
      "lo",
      "-p",
      "tcp",
      "-d",
      "127.0.0.2",
      "--dport",
      String(target.port),
      "-m",
      "owner",
      "!",
      "--uid-owner",
      uid,
      "-m",
      "comment",
      "--comment",
      `baton-test-bastion-${process.pid}`,
      "-j",
      "REJECT",
      "--reject-with",
      "tcp-reset",
    ];
    if (iptables(["-I", ...candidate])) rule = candidate;
  }
  return {
    bastion,
    target,
    enforced: rule !== undefined,
    stop: async () => {
      if (rule) iptables(["-D", ...rule]);
      await Promise.all([bastion.stop(), target.stop()]);
    },
  };
}
