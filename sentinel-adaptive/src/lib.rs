//! Adaptive concurrency limits for Sentinel: a limit on calls in flight that follows the
//! dependency's measured latency instead of a number tuned by hand.
