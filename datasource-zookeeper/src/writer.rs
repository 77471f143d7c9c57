//! [`ZooKeeperRuleWriter`]: stores rule payloads in znodes, with compare-and-set on the
//! znode's version.

use std::fmt;

use sentinel_core::datasource::{
    encode_rules, Expected, SourceError, WritableDataSource, WriteError,
};
use sentinel_core::RuleSet;
use tokio::sync::Mutex;
use zookeeper_client::{Acls, CreateMode, Error, Stat};

use crate::config::ZooKeeperConfig;
use crate::connect::Connection;

/// The ACL a writer gives the znodes it creates (existing znodes keep theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NodeAcl {
    /// `world:anyone` may do everything (ZooKeeper's `OPEN_ACL_UNSAFE`), the default.
    #[default]
    Open,
    /// Only the identities the writer authenticated with (`auth::`, ZooKeeper's
    /// `CREATOR_ALL_ACL`): with [`credentials`](crate::ZooKeeperConfigBuilder::credentials),
    /// only that digest user may read or write the znode.
    CreatorAll,
}

impl NodeAcl {
    fn acls(self) -> Acls<'static> {
        match self {
            NodeAcl::Open => Acls::anyone_all(),
            NodeAcl::CreatorAll => Acls::creator_all(),
        }
    }
}

/// Why a write found no parent to put its znode under: ZooKeeper's `NoNode` on a create (or
/// on a write under a chroot), which is neither a lost compare-and-set race nor a
/// connection failure. A [`ZooKeeperRuleWriter`] returns it as the source of the
/// `SourceError::Backend` it reports (inside [`WriteError::Store`] for the compare-and-set
/// writes): `std::error::Error::source(&err)` and `downcast_ref::<MissingParent>()` find it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MissingParent {
    /// The config's chroot is no znode: every path is under it, so nothing can be written
    /// until it is created (the writer creates a znode's missing parents, never the chroot).
    #[error(
        "the chroot {chroot} does not exist: is there a znode {chroot}? ZooKeeper creates \
         nothing above a chroot; create {chroot} first, or drop the chroot"
    )]
    Chroot {
        /// The chroot, as configured.
        chroot: String,
    },
    /// A parent of the znode was deleted while the znode was being created.
    #[error("a parent of {path} was deleted while the znode was being created")]
    Parent {
        /// The znode that was to be created.
        path: String,
    },
}

/// A znode's state as a writer sees it: its version (what compare-and-set compares) and
/// `mzxid` (the revision a source reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeVersion {
    /// The znode's data version (`Stat.version`), 0 when created, +1 on every write.
    pub version: i32,
    /// The zxid of the last write (`Stat.mzxid`): a source's revision.
    pub mzxid: i64,
}

impl From<Stat> for NodeVersion {
    fn from(stat: Stat) -> Self {
        Self {
            version: stat.version,
            mzxid: stat.mzxid,
        }
    }
}

/// Writes rule payloads to znodes, for tools, dashboards and tests.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] first and stores it in the format
///   the converters read (see [`encode_rules`]), creating the znode and its parents when
///   missing (with the writer's [`NodeAcl`]);
///   [`put_rules_if`](Self::put_rules_if) only when the znode is still at the version the
///   caller read (ZooKeeper's own compare-and-set, `setData` with a version), so two
///   operators cannot overwrite each other unknowingly.
/// - [`put_bytes`](Self::put_bytes) stores bytes as given, unchecked.
/// - [`at`](Self::at) binds the writer to one znode as a [`WritableDataSource`], whose
///   revision is the znode's `mzxid` (the revision a [`ZooKeeperSource`](crate::ZooKeeperSource)
///   reports).
pub struct ZooKeeperRuleWriter {
    connection: Mutex<Connection>,
    acl: NodeAcl,
    at: String,
}

impl fmt::Debug for ZooKeeperRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperRuleWriter")
            .field("at", &self.at)
            .field("acl", &self.acl)
            .finish_non_exhaustive()
    }
}

impl ZooKeeperRuleWriter {
    /// Establishes a session (failing now rather than on the first write).
    pub async fn connect(config: ZooKeeperConfig) -> Result<Self, SourceError> {
        let at = config.describe();
        let mut connection = Connection::new(config);
        connection.client().await?;
        Ok(Self {
            connection: Mutex::new(connection),
            acl: NodeAcl::Open,
            at,
        })
    }

    /// The ACL of the znodes this writer creates ([`NodeAcl::Open`] by default).
    pub fn with_acl(mut self, acl: NodeAcl) -> Self {
        self.acl = acl;
        self
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]) and stores it
    /// at `path`. An invalid set is refused whole with [`WriteError::Invalid`], naming every
    /// bad rule; nothing is written then.
    pub async fn put_rules(&self, path: &str, rules: &RuleSet) -> Result<NodeVersion, WriteError> {
        let bytes = encode_rules(path, rules)?;
        Ok(self.put_bytes(path, bytes).await?)
    }

    /// [`put_rules`](Self::put_rules), only if the znode at `path` is still at `version`
    /// (`None`: only if it does not exist). Another version is [`WriteError::Conflict`]
    /// (`expected` is the version, 0 for `None`) and nothing is written.
    pub async fn put_rules_if(
        &self,
        path: &str,
        rules: &RuleSet,
        version: Option<i32>,
    ) -> Result<NodeVersion, WriteError> {
        let bytes = encode_rules(path, rules)?;
        self.put_bytes_if(path, bytes, version).await
    }

    /// Stores `value` at `path`, unchecked, only if the znode is still at `version` (`None`:
    /// only if it does not exist); another version is [`WriteError::Conflict`].
    pub async fn put_bytes_if(
        &self,
        path: &str,
        value: impl Into<Vec<u8>>,
        version: Option<i32>,
    ) -> Result<NodeVersion, WriteError> {
        let value: Vec<u8> = value.into();
        let conflict = || WriteError::Conflict {
            key: path.to_owned(),
            expected: version.map_or(0, |v| u64::try_from(v).unwrap_or_default()),
        };
        let result = match version {
            Some(version) => self.set(path, &value, Some(version)).await,
            None => self.create(path, &value).await,
        };
        match result {
            Ok(stat) => Ok(stat.into()),
            Err(Failure::Zk(Error::NoNode)) => {
                match self.missing_parent(path, version.is_none()).await? {
                    Some(missing) => Err(WriteError::Store(missing_parent_error(path, missing))),
                    // setData on a znode deleted since it was read: a lost race.
                    None => Err(conflict()),
                }
            }
            Err(Failure::Zk(Error::BadVersion | Error::NodeExists)) => Err(conflict()),
            Err(e) => Err(WriteError::Store(
                self.error(&format!("write {path}"), e).await,
            )),
        }
    }

    /// Stores `value` at `path`, unchecked, creating the znode (and its parents) when
    /// missing.
    pub async fn put_bytes(
        &self,
        path: &str,
        value: impl Into<Vec<u8>>,
    ) -> Result<NodeVersion, SourceError> {
        let value: Vec<u8> = value.into();
        let op = format!("write {path}");
        // Set, else create, else (created meanwhile) set: two tries cover every race.
        for _ in 0..2 {
            match self.set(path, &value, None).await {
                Ok(stat) => return Ok(stat.into()),
                Err(Failure::Zk(Error::NoNode)) => {}
                Err(e) => return Err(self.error(&op, e).await),
            }
            match self.create(path, &value).await {
                Ok(stat) => return Ok(stat.into()),
                Err(Failure::Zk(Error::NodeExists)) => {}
                Err(Failure::Zk(Error::NoNode)) => {
                    if let Some(missing) = self.missing_parent(path, true).await? {
                        return Err(missing_parent_error(path, missing));
                    }
                }
                Err(e) => return Err(self.error(&op, e).await),
            }
        }
        Err(SourceError::Backend {
            message: format!("{op}: the znode kept being created and deleted"),
            source: None,
        })
    }

    /// Deletes the znode at `path` (absent already: nothing to do). It must have no
    /// children.
    pub async fn delete(&self, path: &str) -> Result<(), SourceError> {
        let mut connection = self.connection.lock().await;
        let client = connection.client().await?;
        let op = format!("delete {path}");
        connection
            .optional(&op, client.delete(path, None))
            .await
            .map(drop)
    }

    /// The znode's version and `mzxid`, `None` when it does not exist.
    pub async fn version(&self, path: &str) -> Result<Option<NodeVersion>, SourceError> {
        let mut connection = self.connection.lock().await;
        let client = connection.client().await?;
        let op = format!("exists {path}");
        let stat = connection.bounded(&op, client.check_stat(path)).await?;
        Ok(stat.map(NodeVersion::from))
    }

    /// This writer bound to the znode at `path`, as a [`WritableDataSource`] whose revision
    /// is the znode's `mzxid`.
    pub fn at(self, path: impl Into<String>) -> ZooKeeperRuleTarget {
        ZooKeeperRuleTarget {
            writer: self,
            path: path.into(),
        }
    }

    /// `setData`, with the version to compare (`None`: any).
    async fn set(&self, path: &str, value: &[u8], version: Option<i32>) -> Result<Stat, Failure> {
        let mut connection = self.connection.lock().await;
        let client = connection.client().await?;
        Ok(connection
            .raw(client.set_data(path, value, version))
            .await?)
    }

    /// `create`, its missing parents first (with the writer's ACL).
    async fn create(&self, path: &str, value: &[u8]) -> Result<Stat, Failure> {
        let mut connection = self.connection.lock().await;
        let client = connection.client().await?;
        let options = CreateMode::Persistent.with_acls(self.acl.acls());
        if let Some((parent, _)) = path.rsplit_once('/') {
            if !parent.is_empty() {
                match connection.raw(client.check_stat(parent)).await? {
                    Some(_) => {}
                    None => connection.raw(client.mkdir(parent, &options)).await?,
                }
            }
        }
        let (stat, _) = connection.raw(client.create(path, value, &options)).await?;
        Ok(stat)
    }

    /// After a `NoNode` on a write to `path`: the missing chroot, or (on a create, which makes
    /// the znode's parents first) the parent deleted meanwhile; `None` when the parents are
    /// there (a `setData` on a znode deleted since it was read).
    async fn missing_parent(
        &self,
        path: &str,
        creating: bool,
    ) -> Result<Option<MissingParent>, SourceError> {
        let mut connection = self.connection.lock().await;
        if let Some(chroot) = connection.config().chroot().map(str::to_owned) {
            let client = connection.client().await?;
            // Under a chroot, "/" is the chroot itself.
            let stat = connection
                .bounded("exists /", client.check_stat("/"))
                .await?;
            if stat.is_none() {
                return Ok(Some(MissingParent::Chroot { chroot }));
            }
        }
        Ok(creating.then(|| MissingParent::Parent {
            path: path.to_owned(),
        }))
    }

    async fn error(&self, op: &str, failure: Failure) -> SourceError {
        match failure {
            Failure::Zk(err) => self.connection.lock().await.error(op, err),
            Failure::Session(err) => err,
        }
    }
}

/// Why a request failed: the request itself, or no session to send it on.
enum Failure {
    Zk(Error),
    Session(SourceError),
}

impl From<Error> for Failure {
    fn from(err: Error) -> Self {
        Failure::Zk(err)
    }
}

impl From<SourceError> for Failure {
    fn from(err: SourceError) -> Self {
        Failure::Session(err)
    }
}

/// A [`ZooKeeperRuleWriter`] bound to one znode: a [`WritableDataSource`] whose revision is
/// the znode's `mzxid`. Made by [`ZooKeeperRuleWriter::at`].
#[derive(Debug)]
pub struct ZooKeeperRuleTarget {
    writer: ZooKeeperRuleWriter,
    path: String,
}

fn to_revision(mzxid: i64) -> u64 {
    u64::try_from(mzxid).unwrap_or_default()
}

#[async_trait::async_trait]
impl WritableDataSource for ZooKeeperRuleTarget {
    fn describe(&self) -> String {
        format!("zookeeper znode {} at {}", self.path, self.writer.at)
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        let conflict = |expected: Option<u64>| WriteError::Conflict {
            key: self.path.clone(),
            expected: expected.unwrap_or(0),
        };
        let written = match expected {
            Expected::Anything => self.writer.put_bytes(&self.path, bytes).await?,
            Expected::Revision(None) => self
                .writer
                .put_bytes_if(&self.path, bytes, None)
                .await
                .map_err(|e| match e {
                    WriteError::Conflict { .. } => conflict(None),
                    e => e,
                })?,
            Expected::Revision(Some(revision)) => {
                // The mzxid the caller read, then ZooKeeper's version check: a write in
                // between changes both.
                let now = self.writer.version(&self.path).await?;
                match now {
                    Some(now) if to_revision(now.mzxid) == revision => self
                        .writer
                        .put_bytes_if(&self.path, bytes, Some(now.version))
                        .await
                        .map_err(|e| match e {
                            WriteError::Conflict { .. } => conflict(Some(revision)),
                            e => e,
                        })?,
                    _ => return Err(conflict(Some(revision))),
                }
            }
        };
        Ok(Some(to_revision(written.mzxid)))
    }

    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        let version = self.writer.version(&self.path).await?;
        Ok(version.map(|v| to_revision(v.mzxid)))
    }
}

/// `missing` as the error of a write to `path`: a backend failure whose source is the typed
/// [`MissingParent`].
fn missing_parent_error(path: &str, missing: MissingParent) -> SourceError {
    SourceError::Backend {
        message: format!("write {path}: {missing}"),
        source: Some(Box::new(missing)),
    }
}
