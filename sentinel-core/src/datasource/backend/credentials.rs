//! A user and password, given to the builder or read from the environment.

use super::ConfigError;
use crate::datasource::Secret;

/// The variable a store's user is read from by default: the one the `sentinel-rules` CLI
/// reads too.
pub const USER_ENV: &str = "SENTINEL_RULES_USER";
/// The variable a store's password is read from by default.
pub const PASSWORD_ENV: &str = "SENTINEL_RULES_PASSWORD";

/// A user and a password, or a password alone (Redis's `requirepass`, a token).
///
/// `Debug` shows the user and `<redacted>` for the password; there is no `Display`, so the
/// password cannot reach a log line or an error message by accident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    user: Option<String>,
    password: Secret,
}

impl Credentials {
    /// Logs in as `user`.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: Some(user.into()),
            password: Secret::new(password),
        }
    }

    /// A password without a user (the store's default user).
    pub fn password_only(password: impl Into<String>) -> Self {
        Self {
            user: None,
            password: Secret::new(password),
        }
    }

    /// Credentials from [`USER_ENV`] and [`PASSWORD_ENV`]; see [`CredentialsEnv::read`].
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        CredentialsEnv::default().read()
    }

    /// The user, `None` for a password alone.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The password, for the code that sends it.
    pub fn password(&self) -> &Secret {
        &self.password
    }

    /// Refuses an empty user name (a password alone has none and passes).
    pub fn check(&self) -> Result<(), ConfigError> {
        match self.user.as_deref() {
            Some("") => Err(ConfigError::EmptyUser),
            _ => Ok(()),
        }
    }

    /// `" as {user}"`, or an empty string without a user: the suffix of a store's
    /// secret-free `describe()`.
    pub fn describe(&self) -> String {
        self.user()
            .map(|user| format!(" as {user}"))
            .unwrap_or_default()
    }
}

/// Where credentials come from in the environment: two variables, [`USER_ENV`] and
/// [`PASSWORD_ENV`] unless named otherwise. An empty variable counts as unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsEnv {
    user_var: String,
    password_var: String,
    password_alone: bool,
}

impl Default for CredentialsEnv {
    fn default() -> Self {
        Self::new(USER_ENV, PASSWORD_ENV)
    }
}

impl CredentialsEnv {
    /// Reads the user from `user_var` and the password from `password_var`.
    pub fn new(user_var: impl Into<String>, password_var: impl Into<String>) -> Self {
        Self {
            user_var: user_var.into(),
            password_var: password_var.into(),
            password_alone: false,
        }
    }

    /// Accepts a password without a user (for a store with a default user, as Redis's
    /// `requirepass`). Without this, a password alone is refused as half a login.
    pub fn password_alone(mut self, allowed: bool) -> Self {
        self.password_alone = allowed;
        self
    }

    /// Reads the process environment: both variables set, credentials; neither, `None`;
    /// only one, [`ConfigError::HalfCredentials`] naming both (half a login is never
    /// silently dropped), except a password alone where [`password_alone`](Self::password_alone)
    /// allows it.
    pub fn read(&self) -> Result<Option<Credentials>, ConfigError> {
        self.read_with(|name| std::env::var(name).ok())
    }

    /// [`read`](Self::read) with `lookup` in place of the process environment (for tests,
    /// or a configuration map).
    pub fn read_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Credentials>, ConfigError> {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let half = |set: &str, missing: &str| ConfigError::HalfCredentials {
            set: set.to_owned(),
            missing: missing.to_owned(),
        };
        match (var(&self.user_var), var(&self.password_var)) {
            (Some(user), Some(password)) => Ok(Some(Credentials::new(user, password))),
            (None, None) => Ok(None),
            (None, Some(password)) if self.password_alone => {
                Ok(Some(Credentials::password_only(password)))
            }
            (None, Some(_)) => Err(half(&self.password_var, &self.user_var)),
            (Some(_), None) => Err(half(&self.user_var, &self.password_var)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn debug_shows_the_user_never_the_password() {
        let credentials = Credentials::new("app", "s3cret-pw");
        let shown = format!("{:?}", Some(&credentials));
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(
            shown.contains("app") && shown.contains("<redacted>"),
            "{shown}"
        );
        assert_eq!(credentials.password().expose(), "s3cret-pw");
        assert_eq!(credentials.describe(), " as app");
        assert_eq!(Credentials::password_only("pw").describe(), "");
    }

    #[test]
    fn an_empty_user_is_refused_and_a_password_alone_passes() {
        assert_eq!(
            Credentials::new("", "pw").check(),
            Err(ConfigError::EmptyUser)
        );
        assert_eq!(Credentials::password_only("pw").check(), Ok(()));
    }

    #[test]
    fn the_environment_gives_both_or_neither() {
        let vars = CredentialsEnv::default();
        let both = env(&[(USER_ENV, "app"), (PASSWORD_ENV, "pw")]);
        assert_eq!(
            vars.read_with(both),
            Ok(Some(Credentials::new("app", "pw")))
        );
        assert_eq!(vars.read_with(env(&[])), Ok(None));
        let empty = env(&[(USER_ENV, ""), (PASSWORD_ENV, "")]);
        assert_eq!(vars.read_with(empty), Ok(None));
    }

    #[test]
    fn half_a_login_in_the_environment_is_refused_naming_the_missing_variable() {
        let vars = CredentialsEnv::new("U", "P");
        let err = vars.read_with(env(&[("U", "app")])).expect_err("half");
        assert_eq!(
            err,
            ConfigError::HalfCredentials {
                set: "U".into(),
                missing: "P".into()
            }
        );
        let err = vars
            .read_with(env(&[("P", "s3cret-pw")]))
            .expect_err("half");
        assert!(!err.to_string().contains("s3cret-pw"), "{err}");
        assert!(err.to_string().contains("U is not"), "{err}");
        let alone = vars.password_alone(true).read_with(env(&[("P", "pw")]));
        assert_eq!(alone, Ok(Some(Credentials::password_only("pw"))));
    }
}
