//! Never built: a dependency graph for the deny.toml test.
