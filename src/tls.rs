//! The one TLS crypto provider of the process: rustls with ring. reqwest (the providers, MCP
//! servers, the chat channels' HTTP) and the websocket client of the channels all build their
//! TLS settings from the process default, and reqwest refuses to build a client without one.

/// Installs ring as rustls's default crypto provider, once. Called by `cli::main` before any
/// thread starts and before any client is built; a later call does nothing.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means a provider is installed already, which is all that is needed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
