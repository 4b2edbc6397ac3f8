//! Names the facade's hidden module for the attribute macros' expansions after this release's
//! patch version (`__private0` for 0.1.0), as thiserror and serde do: a path that changes with
//! every release is one nobody can pin. `velocity-policy-macros` writes the same name
//! (`concat!("__private", env!("CARGO_PKG_VERSION_PATCH"))`); the two are released together
//! and the facade depends on the macros' exact version.

use std::path::PathBuf;
use std::{env, fs, io};

fn main() -> io::Result<()> {
    println!("cargo:rerun-if-changed=build.rs");
    let patch = env::var("CARGO_PKG_VERSION_PATCH").map_err(io::Error::other)?;
    let out_dir = env::var_os("OUT_DIR").ok_or_else(|| io::Error::other("OUT_DIR is not set"))?;
    let module = format!(
        "/// What the attribute macros' expansions call. Not a public API: its name changes with\n\
         /// every release, and so may its items.\n\
         #[doc(hidden)]\n\
         pub mod __private{patch} {{\n    \
             #[doc(hidden)]\n    \
             pub use crate::private::*;\n\
         }}\n"
    );
    fs::write(PathBuf::from(out_dir).join("private.rs"), module)
}
