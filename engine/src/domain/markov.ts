/**
 * The retry model: a two-state Markov chain for "has this step completed yet?".
 * State 0 = not completed, state 1 = completed; p = P(0→1) per attempt, q = P(1→0).
 * The chain starts with all probability in state 0. Everything here is exact (closed form),
 * never sampled. Source: the standard two-state chain, e.g. Norris, "Markov Chains" (1997),
 * §1.1: with λ = 1 - p - q, P(X_t = 1 | X_0 = 0) = p/(p+q) · (1 - λ^t) for p + q > 0.
 *
 * It is a liveness estimate only ("will it complete within n attempts?"); it says nothing
 * about whether an unsafe intermediate state was reached on the way.
 */

/** Kind of long-run behaviour of the chain; see `behaviour`. */
export type MarkovBehaviour =
  | "frozen"
  | "alternating"
  | "absorbing"
  | "absorbing_in_0"
  | "one_step"
  | "monotone"
  | "oscillating";

function checkProbability(name: string, v: number): void {
  if (!Number.isFinite(v) || v < 0 || v > 1) {
    throw new RangeError(`[markov] ${name} must be a probability between 0 and 1; got ${v}`);
  }
}

function checkParams(p: number, q: number): void {
  checkProbability("p", p);
  checkProbability("q", q);
}

/**
 * Exact probability of state 1 after `t` steps, starting in state 0.
 * `p`, `q` in [0, 1]; `t` a non-negative integer (steps = attempts).
 * p = q = 0: 0 for every t (nothing moves). Throws RangeError on bad input.
 */
export function probCompleted(p: number, q: number, t: number): number {
  checkParams(p, q);
  if (!Number.isInteger(t) || t < 0) {
    throw new RangeError(`[markov] t must be a whole number of steps ≥ 0; got ${t}`);
  }
  const s = p + q;
  if (s === 0) return 0;
  return (p / s) * (1 - (1 - s) ** t);
}

/**
 * Stationary probability of state 1, p/(p+q); `null` when p = q = 0 (every distribution is
 * stationary, so there is no single answer). Throws RangeError on bad input.
 */
export function stationary(p: number, q: number): number | null {
  checkParams(p, q);
  const s = p + q;
  return s === 0 ? null : p / s;
}

/** Classifies the chain's behaviour from the start state 0. Throws RangeError on bad input. */
export function behaviour(p: number, q: number): MarkovBehaviour {
  checkParams(p, q);
  if (p === 0 && q === 0) return "frozen";
  if (p === 1 && q === 1) return "alternating";
  if (q === 0) return "absorbing";
  if (p === 0) return "absorbing_in_0";
  const lambda = 1 - p - q;
  if (lambda === 0) return "one_step";
  return lambda > 0 ? "monotone" : "oscillating";
}

/** The behaviour in words for people, one sentence. Throws RangeError on bad input. */
export function behaviourWords(p: number, q: number): string {
  const kind = behaviour(p, q);
  switch (kind) {
    case "frozen":
      return "Every distribution is stationary: with p = q = 0 nothing ever moves, so the step never completes.";
    case "alternating":
      return "Alternating forever: with p = q = 1 the chain flips between 0 and 1 at every step and never settles.";
    case "absorbing":
      return "Absorbing: with q = 0 state 1 (completed) is absorbing, so the probability rises monotonically towards 1.";
    case "absorbing_in_0":
      return "Absorbing in state 0: with p = 0 the chain never leaves 'not completed'.";
    case "one_step":
      return "Monotone convergence in one step: p + q = 1, so the stationary probability is reached after the first step.";
    case "monotone":
      return `Monotone convergence towards the stationary probability ${fmt(p / (p + q))}.`;
    case "oscillating":
      return `Oscillating convergence: p + q > 1, so the probability overshoots and undershoots ${fmt(p / (p + q))} while converging.`;
  }
}

/** Formats a probability for people: up to 6 decimals, trailing zeros dropped. */
export function fmt(x: number): string {
  return Number(x.toFixed(6)).toString();
}
