//! Stores: the URL naming one (`url`), who logs in (`login`), the config each backend is
//! built with (`access`), and the source and writer of each (`backend`).

mod access;
mod backend;
mod login;
mod url;

pub(crate) use access::{Access, AskPassword};
pub(crate) use url::{dashboard_family, Nacos, Store, DASHBOARD_FAMILIES};
