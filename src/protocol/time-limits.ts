/**
 * The longest durations kvindex accepts, wherever an option becomes a timer or a server-side
 * duration. Past them, values misbehaved instead of failing (found by fuzzing): a
 * `--connect-timeout` of 3e9 ms fired every attempt's timer at once, so serve never connected;
 * a `--max-age` of 2^53 s came back from nats-server as "invalid json".
 */

/** Node's longest timer delay, ms: a longer one fires at once (with a TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2_147_483_647;

/** The longest duration, in whole seconds, that nats-server's int64 nanoseconds hold. */
export const MAX_NANOS_S = 9_223_372_036;
