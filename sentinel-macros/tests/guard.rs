//! What a guarded function does: a block reaches the block handler (or becomes the
//! function's `Err`), errors and panics count for the circuit breakers, arguments feed
//! param-flow rules, the fallback gets the body's errors except the ignored ones; sync and
//! async, free functions and methods.

use std::error::Error;
use std::panic::catch_unwind;
use std::sync::OnceLock;

use sentinel_core::authority::AuthorityRule;
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::param_flow::ParamFlowRule;
use sentinel_core::{BlockError, FakeClock, RuleFamily, Sentinel};
use sentinel_macros::sentinel;

/// One engine for every test, its clock standing still (a second never ends mid-test), with
/// each test's rules on resources of its own.
fn engine() -> &'static Sentinel {
    static ENGINE: OnceLock<Sentinel> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
        sentinel
            .flow_rules()
            .load_rules(vec![
                FlowRule::qps("greet", 1.0),
                FlowRule::qps("stock", 1.0),
                FlowRule::qps("quote", 1.0),
                FlowRule::qps("guard::Shop::buy", 1.0),
                FlowRule::qps("shop.restock", 1.0),
                FlowRule::qps("convert", 1.0),
                FlowRule::qps("area", 1.0),
            ])
            .expect("valid flow rules");
        let breaker = |resource: &str| {
            // More than one error opens it (Sentinel compares with `>`).
            DegradeRule::error_count(resource, 1.0, 60).min_request_amount(1)
        };
        sentinel
            .degrade_rules()
            .load_rules(vec![
                breaker("pay"),
                breaker("pay.async"),
                breaker("explode"),
                breaker("lookup"),
            ])
            .expect("valid degrade rules");
        sentinel
            .param_flow_rules()
            .load_rules(vec![ParamFlowRule::qps("cart", 0, 1.0)])
            .expect("valid param-flow rules");
        sentinel
            .authority_rules()
            .load_rules(vec![AuthorityRule::black_list("admin", "mallory")])
            .expect("valid authority rules");
        sentinel
    })
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Blocked(#[from] BlockError),
    #[error("the store failed")]
    Store,
}

fn errors(resource: &str) -> f64 {
    engine()
        .resource_stats(resource)
        .map_or(0.0, |stats| stats.error_qps)
}

#[sentinel(resource = "greet", sentinel = engine(), block_handler = busy)]
fn greet(name: String, times: u32) -> String {
    name.repeat(times as usize)
}

fn busy(name: String, times: u32, blocked: BlockError) -> String {
    format!("busy for {name} x{times}: {:?}", blocked.family())
}

#[test]
fn a_flow_block_calls_the_block_handler_with_the_arguments() {
    assert_eq!(greet("ab".into(), 2), "abab");
    assert_eq!(greet("cd".into(), 3), "busy for cd x3: Flow");
}

#[sentinel(resource = "area", sentinel = engine(), block_handler = no_area)]
fn area((width, height): (u32, u32)) -> u32 {
    width * height
}

fn no_area(size: (u32, u32), _blocked: BlockError) -> u32 {
    assert_eq!(size, (5, 6), "the handler gets the argument whole");
    0
}

#[test]
fn a_parameter_pattern_is_destructured_in_the_body_and_whole_for_the_handler() {
    assert_eq!(area((2, 3)), 6);
    assert_eq!(area((5, 6)), 0);
}

#[sentinel(resource = "stock", sentinel = engine())]
fn stock(item: u32) -> Result<u32, AppError> {
    Ok(item * 10)
}

#[test]
fn without_a_block_handler_a_block_is_the_functions_err() {
    assert_eq!(stock(4).expect("passes"), 40);
    match stock(4) {
        Err(AppError::Blocked(blocked)) => assert_eq!(blocked.resource(), "stock"),
        other => panic!("expected a block, got {other:?}"),
    }
}

#[sentinel(resource = "pay", sentinel = engine())]
fn pay(fail: bool) -> Result<&'static str, AppError> {
    if fail {
        return Err(AppError::Store);
    }
    Ok("paid")
}

#[test]
fn errors_returned_by_the_body_trip_a_circuit_breaker() {
    assert_eq!(pay(false).expect("passes"), "paid");
    assert!(matches!(pay(true), Err(AppError::Store)));
    assert_eq!(errors("pay"), 1.0);
    assert!(matches!(pay(true), Err(AppError::Store)));
    match pay(false) {
        Err(AppError::Blocked(blocked)) => assert_eq!(blocked.family(), RuleFamily::Degrade),
        other => panic!("two errors open the breaker, got {other:?}"),
    }
}

#[sentinel(resource = "explode", sentinel = engine())]
fn explode(panic: bool) -> Result<u32, AppError> {
    if panic {
        panic!("the body panicked");
    }
    Ok(1)
}

#[test]
fn a_panic_counts_as_an_error_and_goes_on_unwinding() {
    for _ in 0..2 {
        let payload = catch_unwind(|| explode(true)).expect_err("the panic goes on");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the body panicked"));
    }
    let stats = engine().resource_stats("explode").expect("entered");
    assert_eq!((stats.error_qps, stats.concurrency), (2.0, 0));
    assert!(
        matches!(explode(false), Err(AppError::Blocked(_))),
        "two panics open the breaker"
    );
}

#[sentinel(resource = "pay.async", sentinel = engine())]
async fn pay_async(fail: bool) -> Result<&'static str, AppError> {
    let amount: u32 = "12".parse().map_err(|_| AppError::Store)?;
    tokio::task::yield_now().await;
    if fail {
        return Err(AppError::Store);
    }
    Ok(if amount > 10 { "paid" } else { "small" })
}

#[sentinel(resource = "quote", sentinel = engine(), block_handler = no_quote)]
async fn quote(item: u64) -> u64 {
    tokio::task::yield_now().await;
    item * 100
}

async fn no_quote(_item: u64, blocked: BlockError) -> u64 {
    assert_eq!(blocked.family(), RuleFamily::Flow);
    0
}

#[tokio::test]
async fn an_async_fn_is_guarded_the_same_way() {
    assert_eq!(quote(3).await, 300);
    assert_eq!(quote(3).await, 0, "the block handler answers");

    assert_eq!(pay_async(false).await.expect("passes"), "paid");
    assert!(matches!(pay_async(true).await, Err(AppError::Store)));
    assert!(matches!(pay_async(true).await, Err(AppError::Store)));
    assert_eq!(errors("pay.async"), 2.0);
    assert!(matches!(pay_async(false).await, Err(AppError::Blocked(_))));
}

struct Shop {
    name: &'static str,
}

impl Shop {
    /// Named by default `guard::Shop::buy` (this test crate is `guard`).
    #[sentinel(sentinel = engine(), block_handler = Self::closed)]
    fn buy(&self, item: u32) -> String {
        format!("{} sold item {item}", self.name)
    }

    fn closed(&self, item: u32, _blocked: BlockError) -> String {
        format!("{} cannot sell item {item} now", self.name)
    }

    /// A result that borrows `self`.
    #[sentinel(resource = "shop.name", sentinel = engine())]
    fn name(&self) -> Result<&str, AppError> {
        Ok(self.name)
    }

    #[sentinel(resource = "shop.restock", sentinel = engine())]
    async fn restock(&mut self, name: &'static str) -> Result<(), AppError> {
        self.name = name;
        Ok(())
    }
}

#[tokio::test]
async fn a_method_is_guarded_and_named_by_its_type() {
    let mut shop = Shop { name: "corner" };
    assert_eq!(shop.buy(1), "corner sold item 1");
    assert_eq!(shop.buy(2), "corner cannot sell item 2 now");
    assert!(engine().resource_stats("guard::Shop::buy").is_some());
    assert_eq!(shop.name().expect("no rule"), "corner");

    shop.restock("market").await.expect("passes");
    assert_eq!(shop.name, "market");
    assert!(matches!(
        shop.restock("mall").await,
        Err(AppError::Blocked(_))
    ));
    assert_eq!(shop.name, "market", "a blocked call never ran");
}

#[sentinel(resource = "cart", sentinel = engine(), args(user))]
fn add_to_cart(user: &str, item: u32) -> Result<String, AppError> {
    Ok(format!("{user} added {item}"))
}

#[sentinel(resource = "admin", sentinel = engine(), origin = caller)]
fn admin(caller: &str) -> Result<(), AppError> {
    let _ = caller;
    Ok(())
}

#[test]
fn arguments_feed_param_flow_rules_and_the_origin_authority_rules() {
    assert!(add_to_cart("alice", 1).is_ok());
    assert!(
        add_to_cart("bob", 1).is_ok(),
        "another user has a limit of his own"
    );
    match add_to_cart("alice", 2) {
        Err(AppError::Blocked(blocked)) => assert_eq!(blocked.family(), RuleFamily::ParamFlow),
        other => panic!("alice's second call this second is blocked, got {other:?}"),
    }

    assert!(admin("alice").is_ok());
    match admin("mallory") {
        Err(AppError::Blocked(blocked)) => assert_eq!(blocked.family(), RuleFamily::Authority),
        other => panic!("mallory is on the black list, got {other:?}"),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("no such item")]
struct NotFound;

type BoxError = Box<dyn Error + Send + Sync>;

#[sentinel(
    resource = "lookup",
    sentinel = engine(),
    fallback = cached,
    exceptions_to_ignore(NotFound)
)]
fn lookup(item: u32) -> Result<String, BoxError> {
    match item {
        0 => Err(NotFound.into()),
        1 => Err("the catalogue is down".into()),
        _ => Ok(format!("item {item}")),
    }
}

fn cached(error: BoxError) -> Result<String, BoxError> {
    Ok(format!("cached ({error})"))
}

#[test]
fn the_fallback_gets_errors_and_ignored_errors_pass_through_uncounted() {
    for _ in 0..3 {
        let error = lookup(0).expect_err("ignored: returned as it is");
        assert!(error.downcast_ref::<NotFound>().is_some());
    }
    assert_eq!(errors("lookup"), 0.0, "ignored errors do not count");
    assert_eq!(
        lookup(1).expect("the fallback answers"),
        "cached (the catalogue is down)"
    );
    assert_eq!(errors("lookup"), 1.0);
    assert_eq!(lookup(2).expect("passes"), "item 2");
    assert_eq!(
        lookup(1).expect("the fallback answers"),
        "cached (the catalogue is down)"
    );
    // Two errors opened the breaker: a block reaches the fallback as an error.
    let answer = lookup(2).expect("the fallback answers the block");
    assert!(
        answer.starts_with("cached (blocked by circuit breaker"),
        "{answer}"
    );
}

#[derive(Debug, PartialEq)]
enum ConvertError {
    Blocked,
    Invalid,
    Overflow,
}

impl From<BlockError> for ConvertError {
    fn from(_: BlockError) -> Self {
        ConvertError::Blocked
    }
}

fn is_invalid(error: &ConvertError) -> bool {
    *error == ConvertError::Invalid
}

#[sentinel(resource = "convert", sentinel = engine(), ignore_if = is_invalid)]
fn convert(text: &str) -> Result<u8, ConvertError> {
    let value: u32 = text.parse().map_err(|_| ConvertError::Invalid)?;
    u8::try_from(value).map_err(|_| ConvertError::Overflow)
}

#[test]
fn ignore_if_leaves_an_error_uncounted() {
    assert_eq!(convert("x"), Err(ConvertError::Invalid));
    assert_eq!(errors("convert"), 0.0);
    assert_eq!(convert("300"), Err(ConvertError::Blocked), "1 a second");
}

#[sentinel]
fn unnamed() -> Result<(), BlockError> {
    Ok(())
}

#[test]
fn a_function_without_a_resource_is_named_by_its_path() {
    unnamed().expect("no rules");
    let stats = Sentinel::global()
        .resource_stats("guard::unnamed")
        .expect("the global engine, the function's path");
    assert_eq!(stats.pass_qps, 1.0);
}

#[test]
fn a_resource_may_be_named_by_a_constant() {
    for _ in 0..3 {
        assert!(stock_free(1).is_ok());
    }
    assert_eq!(
        engine().resource_stats("free").map(|s| s.pass_qps),
        Some(3.0)
    );
}

#[sentinel(resource = RESOURCE, sentinel = engine())]
fn stock_free(item: u32) -> Result<u32, AppError> {
    Ok(item)
}

const RESOURCE: &str = "free";

static EVALUATIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The engine, counting how often the attribute asks for it.
fn counted_engine() -> &'static Sentinel {
    EVALUATIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    engine()
}

#[sentinel(resource = "counted", sentinel = counted_engine())]
fn counted() -> Result<(), BlockError> {
    Ok(())
}

#[test]
fn the_engine_and_the_resource_are_resolved_once() {
    for _ in 0..5 {
        counted().expect("no rule");
    }
    assert_eq!(EVALUATIONS.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        engine().resource_stats("counted").map(|s| s.pass_qps),
        Some(5.0)
    );
}

#[tokio::test]
async fn a_guarded_future_is_send_and_runs_on_a_spawned_task() {
    let task = tokio::spawn(pay_async_spawned(21));
    assert_eq!(task.await.expect("the task ran").expect("passes"), 42);
}

#[sentinel(resource = "pay.spawned", sentinel = engine(), args(amount))]
async fn pay_async_spawned(amount: u64) -> Result<u64, AppError> {
    tokio::task::yield_now().await;
    Ok(amount * 2)
}

/// A generic function: one `static` handle, one resource for every `T`.
#[sentinel(resource = "show", sentinel = engine())]
fn show<T>(value: T) -> Result<String, BlockError>
where
    T: std::fmt::Display,
{
    Ok(value.to_string())
}

#[test]
fn a_generic_function_shares_one_resource_across_its_types() {
    assert_eq!(show(1).expect("no rule"), "1");
    assert_eq!(show("two").expect("no rule"), "two");
    assert_eq!(
        engine().resource_stats("show").map(|s| s.pass_qps),
        Some(2.0)
    );
}
