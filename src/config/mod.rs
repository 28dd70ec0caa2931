//! Configuration: where tern keeps its files ([`Paths`]), the TOML config file with its
//! defaults and validation, and the providers available without any config file (from the
//! ecosystem's conventional environment variables).
//!
//! Loading happens in two stages, as in ripgrep: [`load`] parses and validates into plain
//! data with errors that name the file, line and key; building providers from that data is
//! left to the caller.

mod settings;

pub use settings::{
    Config, MaintenanceMode, MaintenanceSettings, ModelRef, ModelRoles, ProviderKind,
    ProviderProfile, RetrySettings, SessionSettings,
};
