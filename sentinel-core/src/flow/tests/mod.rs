//! Flow-control tests, on the fake clock unless a test says otherwise: `controller` (each
//! controller), `strategy` (relate, chain, origins), `concurrency` (real threads and the
//! proptest invariants).

use std::time::Duration;

use proptest::prelude::*;

use super::controller::{Decision, RateLimiter, WarmUp};
use super::*;
use crate::test_support::run_load;
use crate::{BlockError, Clock, FakeClock, RuleFamily, Sentinel};

use crate::test_support::{burst, engine};

mod concurrency;
mod controller;
mod strategy;
