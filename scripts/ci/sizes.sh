# Sizes of chaos and the benchmarks in CI; sourced by .ci/run (docs/engine.md "Benchmarks in CI").
#
# BATON_CI_SIZE=small (the default of .ci/run): every scenario and every assertion runs, with
# fewer repetitions, so that the stages after the installs fit in 10 minutes on 2 cores.
# BATON_CI_SIZE=full: the sizes `npm run test:chaos` and `npm run bench` use by hand.
# A variable already set in the environment wins over this file (e.g. to replay a run).
# A new benchmark with a size knob adds its CI size here, next to the others.

ci_size() { # NAME VALUE: export NAME=VALUE unless NAME is already set
  if [ -z "${!1+x}" ]; then export "$1=$2"; fi
}

case "${BATON_CI_SIZE:-full}" in
  full) ;;
  small)
    # Chaos: 8 of the crash scenario's kill points (84 on this code; all of them by hand),
    # chosen with a seed derived from the commit (printed; BATON_CHAOS_SEED replays a run),
    # chained and one alone per class of the chosen points; the parallel-wave, many-engines and fuzz scenarios
    # as they are, the fuzz with fewer cases (500 by hand).
    ci_size BATON_CHAOS_KILL_POINTS 8
    # Three crash releases at a time (2 by hand): each waits on its runner steps much of the time.
    ci_size BATON_CHAOS_AT_ONCE 3
    ci_size BATON_CHAOS_FUZZ_RUNS 100
    # The many-engines scenario: 60 concurrent releases on its three engines (100 by hand); the
    # overlapping starts, the SIGSTOP past the lease and every check as they are.
    ci_size BATON_CHAOS_ENGINE_RELEASES 60
    # bench:action: median of 5 action runs (10 by hand).
    ci_size BENCH_ACTION_RUNS 5
    # bench:gate: 1,000 simulated canaries of each kind, as by hand (about 8 s on a loaded
    # machine): its false-stop bounds are stated at aa_runs >= 1,000.
    ci_size BENCH_GATE_RUNS 1000
    # bench:engine: 60 concurrent releases in the load phase, 120 timed sequential callbacks
    # (100 and 160 by hand).
    ci_size BENCH_ENGINE_RELEASES 60
    ci_size BENCH_ENGINE_SEQ_CALLBACKS 120
    # bench:peer: 5 rounds of 60 releases per side (5 of 100 by hand), the median of per-round
    # ratios judged. Each round runs one side after the other, so a swing of the load that npm
    # test puts beside it lands on one side of one round: at 3 rounds, one round of one CI run
    # measured 0.49 (Baton at 61 steps/s, DBOS at 125 a minute later) and the median came to
    # 1.1; five rounds take three such rounds to move the median. Not fewer releases a round:
    # Baton's statements per step, judged against its budget of 2.6, rise under load and as the
    # round gets shorter (rounds of 36 releases measured 2.54-2.65 in CI, median 2.59; rounds of
    # 60, 2.41-2.61 over 26 runs, medians at most 2.58), and the steps ratio comes out lower
    # (1.48 at 20 releases, 1.38-1.58 at 60 against 1.5-1.7 at 100), which the CI floor below
    # allows for. At 1 round the Node CPU ratio of one code ranged 0.64-1.08.
    ci_size BENCH_PEER_ROUNDS 5
    ci_size BENCH_PEER_RELEASES 60
    # At this size the steps ratio is required to be >= 1.0 (never behind the peer), not the
    # 1.5 a full run by hand requires: one or two rounds measured 1.18-2.35 on one code (at
    # loads of 2 to 17). Statements per step (a work count) and the Node CPU ratio keep their
    # limits.
    ci_size BENCH_PEER_MIN_STEPS_RATIO 1.0
    # bench:engines: 20 releases per engine count (150 by hand).
    ci_size BENCH_ENGINES_RELEASES 20
    # npm test's exposure property test (test/property/exposure.property.test.ts): 6 generated
    # releases and 4 with parallel waves per store (12 and 6 by hand; the parallel property runs at least 4), every fifth on a machine;
    # its hangs wait out the engine's 5 s control-plane timeout in real time. About 80 s and
    # 40 s of CPU for the file under the CPU lock on 2 cores, most of it the machine releases.
    ci_size BATON_EXPOSURE_RUNS 6
    # bench:exposure -- --mutants: no full check (200 driven releases by hand): the property
    # test above drives generated releases through the same checks on both stores, so CI drives
    # them once. Then every mutant, each on 2 releases that exercise it (20 by hand, the health
    # mutant 4 machines), every one caught with every other check at 0: the mutants prove the
    # checker, the property test the engine.
    # One mutant at a time (BATON_EXPOSURE_MUTANTS_AT_ONCE=3 runs three side by side, each on
    # its own copy, engine and workers): about 37 s and 35 s of CPU for the five under the CPU
    # lock on 2 cores (the workers start from a bundle of each copy's bench file).
    ci_size BATON_EXPOSURE_RELEASES 0
    ci_size BATON_EXPOSURE_MUTANT_RELEASES 2
    ci_size BATON_EXPOSURE_MUTANTS_AT_ONCE 1
    # bench:storage: 1,000 stored releases (10,000 by hand).
    ci_size BENCH_RELEASES 1000
    # bench:fuzz: 15 fast-check cases per property (100 by hand); every route x every body and
    # the limit bodies run whole (about 5,200 cases per store).
    ci_size BATON_FUZZ_RUNS 15
    # bench:fleet: a wave of 4 lanes against a wave of 1, and the pair again with a 2 s model
    # load (20 lanes and 60 s by hand); the safety checks hold in every run.
    ci_size BENCH_FLEET_LANES 4
    ci_size BENCH_FLEET_MODEL_LOAD_MS 2000
    ;;
  *)
    echo "[ci] BATON_CI_SIZE must be small or full, not ${BATON_CI_SIZE}" >&2
    return 1
    ;;
esac
