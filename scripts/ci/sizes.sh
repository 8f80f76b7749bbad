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
    # Chaos: 30 of the crash scenario's kill points (about 90), chosen with a seed derived from
    # the commit (printed; BATON_CHAOS_SEED replays a run); the parallel-wave, many-engines and
    # fuzz scenarios as they are, the fuzz with fewer cases.
    ci_size BATON_CHAOS_KILL_POINTS 30
    ci_size BATON_CHAOS_FUZZ_RUNS 150
    # bench:action: median of 5 action runs (10 by hand).
    ci_size BENCH_ACTION_RUNS 5
    # bench:gate: 1,000 simulated canaries of each kind, as by hand (about 8 s on a loaded
    # machine): its false-stop bounds are stated at aa_runs >= 1,000.
    ci_size BENCH_GATE_RUNS 1000
    # bench:engine: 60 concurrent releases in the load phase, 120 timed sequential callbacks
    # (100 and 160 by hand). bench:peer: 2 rounds of 100 releases per side (5 of 100 by hand):
    # with fewer releases a round the steps ratio came out lower (1.48 at 20, 1.38-1.58 at 60).
    ci_size BENCH_ENGINE_RELEASES 60
    ci_size BENCH_ENGINE_SEQ_CALLBACKS 120
    ci_size BENCH_PEER_ROUNDS 2
    ci_size BENCH_PEER_RELEASES 100
    # At this size the steps ratio is required to be >= 1.0 (never behind the peer), not the
    # 1.5 a full run by hand requires: two rounds measured 1.38-1.65 on one code. Statements per
    # step (a work count) and the Node CPU ratio keep their limits.
    ci_size BENCH_PEER_MIN_STEPS_RATIO 1.0
    # bench:engines: 50 releases per engine count (150 by hand).
    ci_size BENCH_ENGINES_RELEASES 50
    # bench:exposure -- --mutants: 20 driven releases (200 by hand; every sixth generated one on
    # a machine, at least 10% of those driven), then each mutant on 5 releases that exercise it
    # (the health mutant on 4 machines), every one caught with every other check at 0. The
    # slowest benchmark (several CPU seconds a release); npm test's property test
    # (test/property/exposure.property.test.ts) drives more generated releases with the same
    # checks on both stores.
    ci_size BATON_EXPOSURE_RELEASES 20
    ci_size BATON_EXPOSURE_MUTANT_RELEASES 5
    # bench:storage: 2,000 stored releases (10,000 by hand).
    ci_size BENCH_RELEASES 2000
    # bench:fuzz: 30 fast-check cases per property (100 by hand); every route x every body and
    # the limit bodies run whole (about 5,200 cases per store).
    ci_size BATON_FUZZ_RUNS 30
    # bench:fleet: a wave of 8 lanes against a wave of 1, and the pair again with a 5 s model
    # load (20 lanes and 60 s by hand); the safety checks hold in every run.
    ci_size BENCH_FLEET_LANES 8
    ci_size BENCH_FLEET_MODEL_LOAD_MS 5000
    ;;
  *)
    echo "[ci] BATON_CI_SIZE must be small or full, not ${BATON_CI_SIZE}" >&2
    return 1
    ;;
esac
