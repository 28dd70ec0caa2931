//! Command-line front ends: one file per subcommand.
