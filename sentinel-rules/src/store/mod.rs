//! Stores: the URL naming one (`url`), who logs in (`login`), the config each backend is
//! built with (`access`), the source and writer of each (`backend`), and which scheme a
//! server speaks when a command on it failed (`scheme`).

mod access;
mod backend;
mod login;
mod scheme;
mod url;

pub(crate) use access::{Access, AskPassword};
pub(crate) use url::{Nacos, Store};
