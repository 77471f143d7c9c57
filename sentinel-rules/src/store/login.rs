//! Who logs in to a store: a user and a password from the environment, the terminal or
//! standard input, never from the command line.

use sentinel_core::datasource::Secret;

use crate::failure::Failure;

/// The environment variables credentials are read from (never from the command line).
pub(crate) const USER_VAR: &str = "SENTINEL_RULES_USER";
pub(crate) const PASSWORD_VAR: &str = "SENTINEL_RULES_PASSWORD";

/// A user (from the environment) and a password (from the environment, the terminal or
/// standard input). `Debug` shows the password as `<redacted>`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Login {
    pub(crate) user: Option<String>,
    pub(crate) password: Option<Secret>,
}

impl Login {
    pub(crate) fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        Self {
            user: var(USER_VAR),
            password: var(PASSWORD_VAR).map(Secret::from),
        }
    }

    /// The user and password for `store`, which needs both or neither: half a login is a
    /// usage error, never silently dropped.
    #[cfg_attr(
        not(any(
            feature = "etcd",
            feature = "redis",
            feature = "nacos",
            feature = "nats",
            feature = "zookeeper"
        )),
        allow(dead_code)
    )]
    pub(crate) fn pair(&self, store: &str) -> Result<Option<(&str, &str)>, Failure> {
        match (&self.user, &self.password) {
            (Some(user), Some(password)) => Ok(Some((user, password.expose()))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(Failure::Usage(format!(
                "{store} needs a password with {USER_VAR}: set {PASSWORD_VAR}, or pass \
                 --ask-password or --password-stdin"
            ))),
            (None, Some(_)) => Err(Failure::Usage(format!(
                "{store} needs a user with the password: set {USER_VAR}"
            ))),
        }
    }

    /// Asks for the password on the terminal, without echo.
    pub(crate) fn ask_password(&self) -> Result<String, Failure> {
        let prompt = match &self.user {
            Some(user) => format!("password for {user}: "),
            None => "password: ".to_owned(),
        };
        let password = rpassword::prompt_password(prompt).map_err(|e| {
            Failure::Usage(format!(
                "--ask-password needs a terminal ({e}); use --password-stdin or {PASSWORD_VAR}"
            ))
        })?;
        non_empty(password, "the terminal")
    }

    /// The first line of `input`, without its line end.
    pub(crate) fn password_from(mut input: impl std::io::BufRead) -> Result<String, Failure> {
        let mut line = String::new();
        input
            .read_line(&mut line)
            .map_err(|e| Failure::Usage(format!("--password-stdin: {e}")))?;
        let password = line.trim_end_matches(['\r', '\n']).to_owned();
        non_empty(password, "standard input")
    }
}

fn non_empty(password: String, from: &str) -> Result<String, Failure> {
    if password.is_empty() {
        Err(Failure::Usage(format!("no password on {from}")))
    } else {
        Ok(password)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_the_first_line_of_its_input() {
        let read = |input: &str| Login::password_from(input.as_bytes());
        assert_eq!(read("s3cret\r\nnext\n").ok().as_deref(), Some("s3cret"));
        assert_eq!(read("with spaces \n").ok().as_deref(), Some("with spaces "));
        assert!(matches!(read(""), Err(Failure::Usage(m)) if m == "no password on standard input"));
        assert!(matches!(read("\n"), Err(Failure::Usage(_))));
        let login = Login {
            user: Some("ops".into()),
            password: Some("s3cret".into()),
        };
        assert!(!format!("{login:?}").contains("s3cret"));
    }
}
