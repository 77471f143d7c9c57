//! The entry builder: which resource, origin, context and batch, and how to enter (blocking,
//! async, or around a future); and pre-resolved handles.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::guard::{Entry, Unfinished};
use crate::block::BlockError;
use crate::engine::{ResourceNode, Sentinel};
use crate::param_flow::{CallArgs, ParamValue};

/// Whether a call comes into this service or goes out of it. System rules apply to inbound
/// calls only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// A call this service serves.
    Inbound,
    /// A call this service makes (the default).
    #[default]
    Outbound,
}

impl Sentinel {
    /// Starts guarding a call to `resource`.
    pub fn entry<'a>(&'a self, resource: &'a str) -> EntryBuilder<'a> {
        EntryBuilder::new(self, resource)
    }

    /// Resolves a resource once, so a hot loop skips the name lookup.
    pub fn resource(&self, resource: &str) -> ResourceHandle {
        ResourceHandle::new(self.clone(), self.node(resource))
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Target<'a> {
    Name(&'a str),
    Handle(&'a ResourceHandle),
}

/// Describes one guarded call. Obtained from [`Sentinel::entry`] or
/// [`ResourceHandle::entry`]; finished by [`enter`](Self::enter) or one of the async helpers.
#[derive(Debug, Clone, Copy)]
#[must_use = "an entry builder does nothing until `enter` is called"]
pub struct EntryBuilder<'a> {
    pub(super) sentinel: &'a Sentinel,
    pub(super) target: Target<'a>,
    pub(super) origin: Option<&'a str>,
    pub(super) context: Option<&'a str>,
    pub(super) entry_type: EntryType,
    pub(super) batch: u32,
    pub(super) prioritized: bool,
    pub(super) args: CallArgs<'a>,
}

impl<'a> EntryBuilder<'a> {
    #[inline]
    pub(crate) fn new(sentinel: &'a Sentinel, resource: &'a str) -> Self {
        Self {
            sentinel,
            target: Target::Name(resource),
            origin: None,
            context: None,
            entry_type: EntryType::Outbound,
            batch: 1,
            prioritized: false,
            args: CallArgs {
                args: &[],
                attachments: &[],
            },
        }
    }

    /// The caller's application name (`limitApp` and authority rules match it).
    pub fn origin(mut self, origin: &'a str) -> Self {
        self.origin = (!origin.is_empty()).then_some(origin);
        self
    }

    /// The entrance context name, for chain-strategy flow rules.
    pub fn context(mut self, context: &'a str) -> Self {
        self.context = (!context.is_empty()).then_some(context);
        self
    }

    /// Marks the call inbound (system rules apply).
    pub fn inbound(mut self) -> Self {
        self.entry_type = EntryType::Inbound;
        self
    }

    /// Marks the call outbound (the default).
    pub fn outbound(mut self) -> Self {
        self.entry_type = EntryType::Outbound;
        self
    }

    /// Sets the entry type.
    pub fn entry_type(mut self, entry_type: EntryType) -> Self {
        self.entry_type = entry_type;
        self
    }

    /// Marks the call prioritized (Sentinel's `entryWithPriority`): past a QPS limit with the
    /// reject behaviour, it may borrow a slot of a coming 500 ms bucket and wait for it (at
    /// most 500 ms) instead of being blocked. The borrowed pass counts in that bucket, and as
    /// an occupied pass now.
    pub fn prioritized(mut self) -> Self {
        self.prioritized = true;
        self
    }

    /// The call's arguments, for hot-parameter rules: a rule with `paramIdx` 0 limits by
    /// `args[0]`, and a negative index counts from the end.
    ///
    /// ```
    /// use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
    ///
    /// let sentinel = sentinel_core::Sentinel::new();
    /// sentinel
    ///     .param_flow_rules()
    ///     .load_rules(vec![ParamFlowRule::qps("GET:/item", -1, 100.0)])
    ///     .unwrap();
    /// let args = [ParamValue::from("shop-1"), ParamValue::from(42u64)]; // the last: 42
    /// let _entry = sentinel.entry("GET:/item").args(&args).enter().unwrap();
    /// ```
    pub fn args(mut self, args: &'a [ParamValue<'a>]) -> Self {
        self.args.args = args;
        self
    }

    /// The call's named arguments (sentinel-golang's attachments), for hot-parameter rules
    /// with a `paramKey`.
    pub fn attachments(mut self, attachments: &'a [(&'a str, ParamValue<'a>)]) -> Self {
        self.args.attachments = attachments;
        self
    }

    /// How many permits the call takes (default 1). A batch of 0 counts as 1: every call
    /// takes at least one permit.
    pub fn batch(mut self, count: u32) -> Self {
        self.batch = count.max(1);
        self
    }

    /// Checks every rule and, if none blocks, returns the guard. A rate-limiter rule may make
    /// this call sleep the calling thread while it queues; use
    /// [`enter_async`](Self::enter_async) in async code.
    ///
    /// A queued call is counted (as passed and in flight) when its wait ends, as in Sentinel.
    // The entry methods inline into the caller, where the builder's settings (no origin,
    // batch 1, ...) are constants the checks fold.
    #[inline]
    pub fn enter(self) -> Result<Entry<'a>, BlockError> {
        let mut wait = Duration::ZERO;
        // The result is returned as it is, so it is built in place.
        let result = self.check(&mut wait);
        self.after_wait(wait, result)
    }

    /// A checked call's result once its queueing `wait` (if any) is over: the thread sleeps
    /// through it (a fake clock advances instead), and a passed call starts then.
    #[inline(always)]
    fn after_wait<'e>(
        &self,
        wait: Duration,
        mut result: Result<Entry<'e>, BlockError>,
    ) -> Result<Entry<'e>, BlockError> {
        if !wait.is_zero() {
            if !self.sentinel.clock().wait_virtually(wait) {
                std::thread::sleep(wait);
            }
            if let Ok(entry) = &mut result {
                entry.start();
            }
        }
        result
    }

    /// [`enter`](Self::enter), with an entry independent of the borrows it came from (the
    /// engine, the resource name, the arguments): what an async handler returns from a
    /// `match` on its last line, where an entry borrowing a local would not compile
    /// (E0597). It costs what `enter` costs by name; through a [`ResourceHandle`] the entry
    /// shares the handle's resource (a reference count).
    ///
    /// ```
    /// use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
    /// use sentinel_core::Sentinel;
    ///
    /// async fn order(sentinel: Sentinel, user: String) -> u16 {
    ///     let args = [ParamValue::from(user.as_str())];
    ///     match sentinel.entry("GET:/order").args(&args).enter_owned() {
    ///         Ok(_entry) => 200, // exits when the handler's future completes
    ///         Err(_blocked) => 429,
    ///     }
    /// }
    /// # let sentinel = Sentinel::new();
    /// # sentinel.param_flow_rules().load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 1.0)]).unwrap();
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # assert_eq!(rt.block_on(order(sentinel.clone(), "alice".into())), 200);
    /// # assert_eq!(rt.block_on(order(sentinel, "alice".into())), 429);
    /// ```
    #[inline]
    pub fn enter_owned(self) -> Result<Entry<'static>, BlockError> {
        let mut wait = Duration::ZERO;
        let result = self.check_owned(&mut wait);
        self.after_wait(wait, result)
    }

    /// Checks every rule without waiting: the call passes now, passes once a rate-limiter
    /// rule's wait is over ([`Admission::Queued`]: the caller waits, on any timer, then
    /// [`starts`](Queued::start) it), or is blocked. For adapters that drive their own
    /// futures (a tower layer): no sleep, no boxed future. A fake clock still advances itself
    /// instead of asking for a wait.
    ///
    /// ```
    /// use sentinel_core::{Admission, Sentinel};
    ///
    /// let sentinel = Sentinel::new();
    /// let entry = match sentinel.entry("GET:/order").try_enter() {
    ///     Ok(Admission::Now(entry)) => entry,
    ///     Ok(Admission::Queued(queued)) => {
    ///         std::thread::sleep(queued.wait()); // or tokio::time::sleep(...).await
    ///         queued.start()
    ///     }
    ///     Err(blocked) => panic!("{blocked}"),
    /// };
    /// drop(entry);
    /// ```
    #[inline]
    pub fn try_enter(self) -> Result<Admission<'a>, BlockError> {
        let mut wait = Duration::ZERO;
        let entry = self.check(&mut wait)?;
        if wait.is_zero() {
            return Ok(Admission::Now(entry));
        }
        Ok(self.admit(entry, wait))
    }

    /// [`try_enter`](Self::try_enter), with an admission independent of the borrow it came
    /// from: for a future that outlives it (a tower layer's response future). It costs what
    /// `try_enter` costs by name; through a [`ResourceHandle`] the entry shares the handle's
    /// resource (a reference count), as [`Entry::into_owned`] does, without moving the entry.
    ///
    /// ```
    /// use sentinel_core::{Admission, Entry, Sentinel};
    ///
    /// let sentinel = Sentinel::new();
    /// let name = String::from("GET:/order");
    /// let entry: Entry<'static> = match sentinel.entry(&name).try_enter_owned() {
    ///     Ok(Admission::Now(entry)) => entry,
    ///     Ok(Admission::Queued(queued)) => {
    ///         std::thread::sleep(queued.wait()); // or tokio::time::sleep(...).await
    ///         queued.start()
    ///     }
    ///     Err(blocked) => panic!("{blocked}"),
    /// };
    /// drop(name); // the entry outlives the name it was entered by
    /// drop(entry);
    /// ```
    #[inline]
    pub fn try_enter_owned(self) -> Result<Admission<'static>, BlockError> {
        let mut wait = Duration::ZERO;
        let entry = self.check_owned(&mut wait)?;
        if wait.is_zero() {
            return Ok(Admission::Now(entry));
        }
        Ok(self.admit(entry, wait))
    }

    /// The admission of a checked call that must wait `wait` (not zero) first.
    fn admit<'e>(&self, mut entry: Entry<'e>, wait: Duration) -> Admission<'e> {
        if self.sentinel.clock().wait_virtually(wait) {
            entry.start();
            return Admission::Now(entry);
        }
        Admission::Queued(Queued { entry, wait })
    }

    /// Like [`enter`](Self::enter), but queues with `tokio::time::sleep`. If the future is
    /// dropped while it queues, the call never started: nothing is counted for it (the rate
    /// limiter's slot stays taken, as a slept-through slot would).
    pub async fn enter_async(self) -> Result<Entry<'a>, BlockError> {
        let mut wait = Duration::ZERO;
        let mut result = self.check(&mut wait);
        if !wait.is_zero() {
            if !self.sentinel.clock().wait_virtually(wait) {
                tokio::time::sleep(wait).await;
            }
            if let Ok(entry) = &mut result {
                entry.start();
            }
        }
        result
    }

    /// Runs `future` under the guard: the entry exits when the future completes.
    ///
    /// A future dropped before it completes (a `tokio::time::timeout` around this call, a
    /// client gone away) exits the entry as an **error**, as does a panic in it: neither is a
    /// success a circuit breaker should count.
    pub async fn run<F: Future>(self, future: F) -> Result<F::Output, BlockError> {
        let entry = self.enter_async().await?;
        let mut guard = Unfinished(Some(entry));
        let output = future.await;
        guard.finish();
        Ok(output)
    }

    /// Runs a fallible `future` under the guard and records an `Err` as an error, which error
    /// ratio and error count circuit breakers count. A future dropped before it completes
    /// counts as an error too (see [`run`](Self::run)).
    pub async fn run_result<T, E, F>(self, future: F) -> Result<Result<T, E>, BlockError>
    where
        F: Future<Output = Result<T, E>>,
    {
        let entry = self.enter_async().await?;
        let mut guard = Unfinished(Some(entry));
        let output = future.await;
        if output.is_err() {
            if let Some(entry) = guard.0.as_mut() {
                entry.set_error();
            }
        }
        guard.finish();
        Ok(output)
    }
}

/// What [`EntryBuilder::try_enter`] decided for a call that is not blocked.
#[derive(Debug)]
#[must_use = "dropping an admission exits (or abandons) the call at once"]
pub enum Admission<'a> {
    /// The call passed and is counted: the entry is live.
    Now(Entry<'a>),
    /// A rate-limiter rule gave the call a slot after [`Queued::wait`]. It is counted when it
    /// starts; dropped before, it never started and counts nothing.
    Queued(Queued<'a>),
}

/// A call waiting for its rate-limiter slot. Made by [`EntryBuilder::try_enter`].
#[derive(Debug)]
#[must_use = "a queued call counts nothing until it starts"]
pub struct Queued<'a> {
    entry: Entry<'a>,
    wait: Duration,
}

impl<'a> Queued<'a> {
    /// How long the call waits before it starts.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The wait is over: the call starts (and is counted) now.
    pub fn start(mut self) -> Entry<'a> {
        self.entry.start();
        self.entry
    }

    /// The same queued call, independent of the borrow it came from (see
    /// [`Entry::into_owned`]).
    pub fn into_owned(self) -> Queued<'static> {
        Queued {
            entry: self.entry.into_owned(),
            wait: self.wait,
        }
    }
}

/// A pre-resolved resource: entries through it skip the name lookup.
///
/// ```
/// let sentinel = sentinel_core::Sentinel::new();
/// let handle = sentinel.resource("db.query");
/// for _ in 0..3 {
///     let _entry = handle.entry().enter().expect("no rules, never blocked");
/// }
/// assert_eq!(sentinel.resource_stats("db.query").unwrap().pass_qps, 3.0);
/// ```
#[derive(Clone)]
pub struct ResourceHandle {
    sentinel: Sentinel,
    pub(super) node: Option<Arc<ResourceNode>>,
}

impl fmt::Debug for ResourceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceHandle")
            .field("resource", &self.node.as_ref().map(|n| &n.name))
            .finish_non_exhaustive()
    }
}

impl ResourceHandle {
    pub(crate) fn new(sentinel: Sentinel, node: Option<Arc<ResourceNode>>) -> Self {
        Self { sentinel, node }
    }

    /// Starts guarding a call to this resource.
    #[inline]
    pub fn entry(&self) -> EntryBuilder<'_> {
        EntryBuilder {
            target: Target::Handle(self),
            ..EntryBuilder::new(&self.sentinel, "")
        }
    }
}
