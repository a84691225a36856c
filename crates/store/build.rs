//! Rebuilds the crate when a migration is added or changed: `embed_migrations!` reads the
//! `migrations` folder at compile time, and cargo does not otherwise know to look there.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
